"""Elastic consumer groups against a real server: membership changes while publishing, killed members."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig, JetStream

from ..conftest import wait_until
from ._kit import (
    Records,
    check_delivery,
    key_partitions,
    kill_the_active_instance,
    members,
    start_publisher,
    wait_until_left,
)

pytestmark = pytest.mark.server("2.11")

KEYS = [f"k{i}" for i in range(16)]


def _filters(stream: str) -> list[pcgroups.PartitioningFilter]:
    return [pcgroups.PartitioningFilter(filter=f"{stream}.*", partitioning_wildcards=(1,))]


def test_create_elastic_writes_orbit_layout_and_its_work_queue_stream(js: JetStream, estream: str) -> None:
    cfg = pcgroups.create_elastic(js, estream, "g", 4, _filters(estream), max_buffered_msgs=1000)
    kv = js.key_value("elastic-consumer-groups")
    assert json.loads(kv.get(f"{estream}.g").value) == {
        "max_members": 4, "partitioning_filters": [{"filter": f"{estream}.*", "partitioning_wildcards": [1]}],
        "max_buffered_msg": 1000}
    st = js.stream(f"{estream}-g").cached_info.config
    assert st.retention == "workqueue" and st.discard == "new" and st.max_msgs == 1000
    assert st.sources is not None and st.sources[0].name == estream
    assert st.sources[0].subject_transforms is not None
    assert st.sources[0].subject_transforms[0].dest == f"{{{{Partition(4,1)}}}}.{estream}.{{{{Wildcard(1)}}}}"
    assert pcgroups.create_elastic(js, estream, "g", 4, _filters(estream), max_buffered_msgs=1000).fixed_part() \
        == cfg.fixed_part()
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_elastic(js, estream, "g", 8, _filters(estream))
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.create_elastic(js, estream, "bad", 4, [pcgroups.PartitioningFilter(filter=f"{estream}.x")])
    assert pcgroups.list_elastic_groups(js, estream) == ["g"]


def test_delete_elastic_removes_its_config_and_its_stream(js: JetStream, estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    pcgroups.delete_elastic(js, estream, "g")
    assert pcgroups.list_elastic_groups(js, estream) == []
    assert f"{estream}-g" not in list(js.stream_names())
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_elastic_config(js, estream, "g")
    # Again: the config is gone already (fine), the stream too (that is reported).
    with pytest.raises(nats.StreamNotFoundError):
        pcgroups.delete_elastic(js, estream, "g")


def test_membership_edits_keep_fields_this_client_does_not_know(js: JetStream, estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    kv = js.key_value("elastic-consumer-groups")
    raw = json.loads(kv.get(f"{estream}.g").value)
    kv.put(f"{estream}.g", json.dumps({**raw, "future_field": {"x": 1}}).encode())
    assert pcgroups.add_members(js, estream, "g", ["a", "b"]) == ["a", "b"]
    assert pcgroups.delete_members(js, estream, "g", ["a"]) == ["b"]
    pcgroups.set_member_mappings(js, estream, "g", [pcgroups.MemberMapping(member="c", partitions=(0, 1, 2, 3))])
    stored = json.loads(kv.get(f"{estream}.g").value)
    assert stored["future_field"] == {"x": 1}
    assert "members" not in stored and stored["member_mappings"] == [{"member": "c", "partitions": [0, 1, 2, 3]}]
    with pytest.raises(pcgroups.ConsumerGroupError, match=r"can't add members to .* member mappings"):
        pcgroups.add_members(js, estream, "g", ["d"])
    with pytest.raises(pcgroups.ConsumerGroupError, match=r"can't drop members from .* member mappings"):
        pcgroups.delete_members(js, estream, "g", ["c"])
    with pytest.raises(pcgroups.ConsumerGroupError, match="no member names"):
        pcgroups.delete_members(js, estream, "g", [])
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.set_member_mappings(js, estream, "g", [pcgroups.MemberMapping(member="c", partitions=(0,))])


def test_concurrent_add_members_from_many_processes_lose_no_member(js: JetStream, estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 8, _filters(estream))
    names = [f"w{i}" for i in range(8)]
    threads = [threading.Thread(target=pcgroups.add_members, args=(js, estream, "g", [n])) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(pcgroups.get_elastic_config(js, estream, "g").members) == names


def test_rebalancing_while_publishing_in_order_and_nothing_left(nc: nats.Client, js: JetStream,
                                                                estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    got: list[tuple[str, int, int, str]] = []
    lock = threading.Lock()
    seen = threading.Condition(lock)

    def handler(member: str) -> Callable[[nats.Msg], None]:
        def handle(msg: nats.Msg) -> None:
            try:
                msg.ack_sync(timeout=5)
            except nats.NatsError:
                return
            with seen:
                got.append((member, int(msg.data), msg.metadata.num_delivered, msg.subject))
                seen.notify_all()
        return handle

    tmpl = ConsumerConfig(ack_wait=2.0)
    # Members may start before they are added: they wait.
    ctxs = {m: pcgroups.elastic_consume(js, estream, "g", m, handler(m), tmpl) for m in ("a", "b")}
    n = 120

    def acked(count: int) -> bool:
        with seen:
            return seen.wait_for(lambda: len({g[1] for g in got}) >= count, 20)

    try:
        assert pcgroups.add_members(js, estream, "g", ["a"]) == ["a"]
        for i in range(n):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
            if i == 40:
                assert acked(30)
                pcgroups.add_members(js, estream, "g", ["b"])
            if i == 80:
                # b has its partitions before a leaves.
                assert wait_until(lambda: sorted(pcgroups.list_elastic_active_members(js, estream, "g")) == ["a", "b"],
                                  20), (pcgroups.list_elastic_active_members(js, estream, "g"), ctxs["b"].consuming,
                                        ctxs["a"].consuming)
                pcgroups.delete_members(js, estream, "g", ["a"])
        assert acked(n)
        # The server's own view: the work queue holds nothing (every message acknowledged).
        assert wait_until(lambda: js.stream(f"{estream}-g").cached_info.state.messages == 0, 10)
        assert pcgroups.list_elastic_active_members(js, estream, "g") == ["b"]
    finally:
        for c in ctxs.values():
            c.stop()
    parts = key_partitions(js, KEYS, 4)
    by_member: dict[str, set[int]] = defaultdict(set)
    for member, _, _, subject in got:
        by_member[member].add(parts[subject.split(".", 1)[1]])
    assert by_member["b"] and by_member["a"]
    assert all(s.startswith(f"{estream}.k") for *_, s in got)
    records: list[dict[str, Any]] = [{"ev": "got", "pid": m, "id": i, "n": d} for m, i, d, _ in got]
    check_delivery(records, {i: parts[KEYS[i % 16]] for i in range(n)}, key="id")


def test_sigkilled_elastic_member_taken_over_and_removed_member_rebalanced(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any, tmp_path: Path) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    pcgroups.add_members(js, estream, "g", ["m1", "m2"])
    recs = Records(nc, "g")
    n = 200
    leave = 130  # the message after which m2 leaves
    with members(shared_server.url, "elastic", estream, "g", ["m1", "m1", "m2"], 2.0, tmp_path) as procs:
        # Pauses: the kill, then the removal, land mid-stream.
        # The kill lands mid-stream; the rest waits at message `leave` until m2 has left.
        left = threading.Event()
        pub = start_publisher(js, lambda i: f"{estream}.{KEYS[i % 16]}", n, pause_after=(60,), gates={leave: left})
        try:
            survivor = kill_the_active_instance(recs, procs[:2])  # one of m1's two
            assert recs.wait_for(lambda rs: any(r["pid"] == survivor for r in rs), 30)
            pcgroups.delete_members(js, estream, "g", ["m2"])  # m1's survivor takes every partition
            assert wait_until_left(js, estream, "g", "m2")
        finally:
            left.set()
        pub.join(60)
        assert not pub.is_alive()
        assert recs.wait_for(lambda rs: len({r["id"] for r in rs if r["ev"] == "got"}) == n, 45), \
            sorted(set(range(n)) - {r["id"] for r in recs.snapshot()})[:20]
        assert wait_until(lambda: js.stream(f"{estream}-g").cached_info.state.messages == 0, 20)
        late = [r for r in recs.snapshot() if r["id"] > leave]
        assert late and {r["member"] for r in late} == {"m1"}
    parts = key_partitions(js, KEYS, 4)
    check_delivery(recs.snapshot(), {i: parts[KEYS[i % 16]] for i in range(n)}, key="id")
