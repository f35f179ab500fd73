"""One group, members in natsio-pcgroups (Python 3.13) and here: each reads what the other wrote.

Skipped, with the reason, where no Python with natsio-pcgroups is found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import JetStream

from ..conftest import wait_until
from ._kit import Records, check_delivery, key_partitions, members, natsio, run_natsio, wait_until_left
from .conftest import PARTITIONS

pytestmark = pytest.mark.server("2.11")


@pytest.fixture(autouse=True)
def _natsio_present() -> None:
    natsio()  # skips, saying why, where no Python 3.13 with natsio-pcgroups can be had

KEYS = [f"k{i}" for i in range(16)]


def test_static_group_made_here_read_by_natsio_and_shared_with_its_member(
        nc: nats.Client, js: JetStream, pstream: str, shared_server: Any, tmp_path: Path) -> None:
    url = shared_server.url
    pcgroups.create_static(js, pstream, "g", PARTITIONS, filters=[f"{pstream}.*"], members=["m1", "m2"])
    # natsio re-creating the same group finds ours identical (same bytes, same rules).
    out = run_natsio(url, f'cfg = await pcgroups.create_static(js, "{pstream}", "g", {PARTITIONS}, '
                          f'["{pstream}.*"], ["m1", "m2"])\nprint(json.dumps(cfg.to_wire()))')
    assert json.loads(out) == {"max_members": PARTITIONS, "filters": [f"{pstream}.*"], "members": ["m1", "m2"]}
    recs = Records(nc, "g")
    n = 100
    with members(url, "static", pstream, "g", ["natsio:m1", "m2"], 2.0, tmp_path):
        for i in range(n):
            js.publish(f"{pstream}.{KEYS[i % 16]}", str(i).encode())
        assert recs.wait_for(lambda rs: len({r["seq"] for r in rs if r["ev"] == "got"}) == n, 30)
        assert wait_until(lambda: all(js.consumer(pstream, f"g-{m}").cached_info.num_ack_pending == 0
                                      for m in ("m1", "m2")), 20)
    records = recs.snapshot()
    parts = {s: int(js.stream(pstream).get_msg(s).subject.split(".", 1)[0]) for s in range(1, n + 1)}
    assert {parts[r["seq"]] for r in records if r["member"] == "m1"} == {0, 1}
    assert {parts[r["seq"]] for r in records if r["member"] == "m2"} == {2, 3}
    assert all(r["subject"].startswith(f"{pstream}.k") for r in records)
    check_delivery(records, parts)


def test_elastic_membership_changed_by_natsio_rebalances_members_here(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any, tmp_path: Path) -> None:
    url = shared_server.url
    pcgroups.create_elastic(js, estream, "g", 4, [pcgroups.PartitioningFilter(filter=f"{estream}.*",
                                                                              partitioning_wildcards=(1,))])
    run_natsio(url, f'await pcgroups.add_members(js, "{estream}", "g", ["m1", "m2"])')
    assert sorted(pcgroups.get_elastic_config(js, estream, "g").members) == ["m1", "m2"]
    recs = Records(nc, "g")
    n = 120
    with members(url, "elastic", estream, "g", ["natsio:m1", "m2"], 2.0, tmp_path):
        for i in range(n):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
            if i == 60:
                assert recs.wait_for(lambda rs: {r["member"] for r in rs} == {"m1", "m2"}, 30)
                # natsio drops our member: natsio's member takes every partition.
                run_natsio(url, f'await pcgroups.delete_members(js, "{estream}", "g", ["m2"])')
                assert wait_until_left(js, estream, "g", "m2")
        assert recs.wait_for(lambda rs: len({r["id"] for r in rs if r["ev"] == "got"}) == n, 45), \
            sorted(set(range(n)) - {r["id"] for r in recs.snapshot()})[:20]
        assert wait_until(lambda: js.stream(f"{estream}-g").cached_info.state.messages == 0, 20)
        assert {r["member"] for r in recs.snapshot() if r["id"] > 60} == {"m1"}
    parts = key_partitions(js, KEYS, 4)
    check_delivery(recs.snapshot(), {i: parts[KEYS[i % 16]] for i in range(n)}, key="id")


def _acked(recs: Records, ids: set[int], timeout: float) -> bool:
    return recs.wait_for(lambda rs: {r["id"] for r in rs if r["ev"] == "acked"} >= ids, timeout)


def test_a_group_natsio_made_is_the_same_group_here_and_our_edits_keep_its_members_running(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any, tmp_path: Path) -> None:
    url = shared_server.url
    # natsio-pcgroups' defaults: "no limit" written as -1 (orbit.go and this client write 0, left out).
    run_natsio(url, f'await pcgroups.create_elastic(js, "{estream}", "g", 4, '
                    f'[pcgroups.PartitioningFilter(filter="{estream}.*", partitioning_wildcards=[1])])')
    kv = js.key_value(pcgroups.ELASTIC_BUCKET)
    assert json.loads(kv.get(f"{estream}.g").value)["max_buffered_msg"] == -1
    # The same group, made again here with this client's defaults (every host's start may do it).
    cfg = pcgroups.create_elastic(js, estream, "g", 4, [pcgroups.PartitioningFilter(
        filter=f"{estream}.*", partitioning_wildcards=(1,))])
    assert (cfg.max_buffered_msgs, cfg.max_buffered_bytes) == (0, 0)
    recs = Records(nc, "g")
    with members(url, "elastic", estream, "g", ["natsio:m1", "m2"], 2.0, tmp_path):
        # Membership written here: natsio's member compares the limits exactly and goes on only
        # when they are still spelled -1.
        pcgroups.add_members(js, estream, "g", ["m1", "m2"])
        for i in range(64):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        assert _acked(recs, set(range(64)), 45), sorted(set(range(64)) - {r["id"] for r in recs.snapshot()})[:20]
        assert {r["member"] for r in recs.snapshot()} == {"m1", "m2"}
        pcgroups.delete_members(js, estream, "g", ["m2"])
        assert wait_until_left(js, estream, "g", "m2")
        for i in range(64, 96):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        assert _acked(recs, set(range(96)), 45)
        assert {r["member"] for r in recs.snapshot() if r["id"] >= 64} == {"m1"}
    stored = json.loads(kv.get(f"{estream}.g").value)
    assert (stored["max_buffered_msg"], stored["max_buffered_bytes"], stored["members"]) == (-1, -1, ["m1"])
    parts = key_partitions(js, KEYS, 4)
    check_delivery(recs.snapshot(), {i: parts[KEYS[i % 16]] for i in range(96)}, key="id")


def test_a_group_made_here_is_the_same_group_for_natsio(nc: nats.Client, js: JetStream, estream: str,
                                                        shared_server: Any, tmp_path: Path) -> None:
    url = shared_server.url
    # No filters: every subject, partitioned by the whole subject.
    pcgroups.create_elastic(js, estream, "g", 2)
    # natsio's "no limit" is -1 and it compares exactly; with 0 it means what this client and Go write.
    out = run_natsio(url, f'cfg = await pcgroups.create_elastic(js, "{estream}", "g", 2, None, 0, 0)\n'
                          f'print(json.dumps(cfg.to_wire()))\n'
                          f'await pcgroups.add_members(js, "{estream}", "g", ["m1", "m2"])')
    assert json.loads(out) == {"max_members": 2}
    recs = Records(nc, "g")
    with members(url, "elastic", estream, "g", ["natsio:m1", "m2"], 2.0, tmp_path):
        for i in range(40):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        assert _acked(recs, set(range(40)), 45)
        assert {r["member"] for r in recs.snapshot()} == {"m1", "m2"}
