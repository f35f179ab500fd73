"""Static consumer groups against a real server: create, consume, fail-over of a killed member."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig, JetStream

from ..conftest import wait_until
from ._kit import Records, check_delivery, kill_the_active_instance, members, partition_of, start_publisher
from .conftest import PARTITIONS

pytestmark = pytest.mark.server("2.11")


def test_create_static_writes_orbit_layout_and_is_idempotent(js: JetStream, pstream: str) -> None:
    cfg = pcgroups.create_static(js, pstream, "g", PARTITIONS, filters=[f"{pstream}.*"], members=["a", "b"])
    raw = json.loads(js.key_value("static-consumer-groups").get(f"{pstream}.g").value)
    assert raw == {"max_members": 4, "filters": [f"{pstream}.*"], "members": ["a", "b"]}
    assert pcgroups.create_static(js, pstream, "g", PARTITIONS, filters=[f"{pstream}.*"], members=["a", "b"]) == cfg
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_static(js, pstream, "g", PARTITIONS, members=["a"])
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.create_static(js, pstream, "bad", 2, member_mappings=[pcgroups.MemberMapping(member="a",
                                                                                             partitions=(0,))])
    assert pcgroups.list_static_groups(js, pstream) == ["g"]
    assert pcgroups.get_static_config(js, pstream, "g") == cfg


def test_two_members_split_partitions_in_order_with_subjects_stripped(nc: nats.Client, js: JetStream,
                                                                       pstream: str) -> None:
    pcgroups.create_static(js, pstream, "g", PARTITIONS, members=["a", "b"])
    got: dict[str, list[nats.Msg]] = {"a": [], "b": []}
    total = threading.Semaphore(0)

    def handler(member: str) -> Callable[[nats.Msg], None]:
        def handle(msg: nats.Msg) -> None:
            got[member].append(msg)
            msg.ack()
            total.release()
        return handle

    with pytest.raises(pcgroups.MemberNotInGroupError):
        pcgroups.static_consume(js, pstream, "g", "c", handler("a"))
    tmpl = ConsumerConfig(ack_wait=2.0)
    ctxs = [pcgroups.static_consume(js, pstream, "g", m, handler(m), tmpl) for m in ("a", "b")]
    try:
        for i in range(80):
            js.publish(f"{pstream}.k{i % 16}", str(i).encode())
        for _ in range(80):
            assert total.acquire(timeout=10)
        assert wait_until(lambda: set(pcgroups.list_static_active_members(js, pstream, "g")) == {"a", "b"}, 10)
    finally:
        for c in ctxs:
            c.stop()
    assert got["a"] and got["b"]
    seqs = [m.metadata.sequence.stream for ms in got.values() for m in ms]
    assert sorted(seqs) == list(range(1, 81))
    parts = partition_of(js, pstream, seqs)
    # a owns partitions 0 and 1, b 2 and 3; each in stream order; subjects without the partition.
    for member, owned in (("a", {0, 1}), ("b", {2, 3})):
        mine = [m.metadata.sequence.stream for m in got[member]]
        assert {parts[s] for s in mine} <= owned
        assert mine == sorted(mine)
        assert all(m.subject.startswith(f"{pstream}.k") for m in got[member])
    info = js.consumer(pstream, "g-a").cached_info
    assert info.config.priority_groups == ["PCG"] and info.config.filter_subjects == ["0.>", "1.>"]


def test_deleting_the_group_stops_its_members(js: JetStream, pstream: str) -> None:
    pcgroups.create_static(js, pstream, "g", 2, members=["a"])
    ctx = pcgroups.static_consume(js, pstream, "g", "a", lambda m: m.ack(), ConsumerConfig(ack_wait=2.0))
    try:
        pcgroups.delete_static(js, pstream, "g")
        assert ctx.wait(10)
        assert ctx.error is None
        assert "g-a" not in list(js.consumer_names(pstream))
    finally:
        ctx.stop()


def test_changing_a_static_config_stops_the_member_with_an_error(js: JetStream, pstream: str) -> None:
    pcgroups.create_static(js, pstream, "g", 2, members=["a"])
    errors: list[Exception] = []
    ctx = pcgroups.static_consume(js, pstream, "g", "a", lambda m: m.ack(), ConsumerConfig(ack_wait=2.0),
                                  error_cb=errors.append)
    try:
        js.key_value("static-consumer-groups").put(f"{pstream}.g", b'{"max_members":2,"members":["a","b"]}')
        assert ctx.wait(10)
        assert isinstance(ctx.error, pcgroups.GroupConfigChangedError)
    finally:
        ctx.stop()


def test_sigkilled_member_is_taken_over_nothing_lost_nothing_acked_redelivered(
        nc: nats.Client, js: JetStream, pstream: str, shared_server: object, tmp_path: Path) -> None:
    url = shared_server.url  # type: ignore[attr-defined]
    pcgroups.create_static(js, pstream, "g", PARTITIONS, members=["m1", "m2"])
    recs = Records(nc, "g")
    n = 200
    # m1 runs twice (one pinned, one standing by), m2 once.
    with members(url, "static", pstream, "g", ["m1", "m1", "m2"], 2.0, tmp_path) as procs:
        # The pause lets the kill land mid-stream.
        pub = start_publisher(js, lambda i: f"{pstream}.k{i % 16}", n, pause_after=(60,))
        survivor = kill_the_active_instance(recs, procs[:2])  # one of m1's two
        pub.join(60)
        assert not pub.is_alive()
        # Every message handled, the standby took over m1's partitions.
        assert recs.wait_for(lambda rs: len({r["seq"] for r in rs if r["ev"] == "got"}) == n, 45), \
            sorted(set(range(1, n + 1)) - recs.got_seqs())[:20]
        assert any(r["pid"] == survivor for r in recs.snapshot())

        # The server's own view: everything acknowledged, nothing pending.
        def settled() -> bool:
            infos = [js.consumer(pstream, f"g-{m}").cached_info for m in ("m1", "m2")]
            return all(i.num_ack_pending == 0 and i.num_pending == 0 for i in infos)

        assert wait_until(settled, 20)
    records = recs.snapshot()
    check_delivery(records, partition_of(js, pstream, range(1, n + 1)))


def test_a_handler_may_stop_its_own_member(js: JetStream, pstream: str) -> None:
    pcgroups.create_static(js, pstream, "g", 2, members=["a"])
    box: list[pcgroups.StaticConsumeContext] = []
    handled = threading.Event()

    def handle(msg: nats.Msg) -> None:
        msg.ack()
        box[0].stop()
        handled.set()

    box.append(pcgroups.static_consume(js, pstream, "g", "a", handle, ConsumerConfig(ack_wait=2.0)))
    js.publish(f"{pstream}.k1", b"x")
    assert handled.wait(10)
    assert box[0].wait(10) and box[0].error is None
    assert not box[0].consuming


def test_deleting_a_group_deletes_its_own_consumers_not_those_of_a_group_named_alike(js: JetStream,
                                                                                      pstream: str) -> None:
    pcgroups.create_static(js, pstream, "orders", 2, members=["m1"])
    pcgroups.create_static(js, pstream, "orders-eu", 2, members=["m1"])
    got = threading.Semaphore(0)

    def handle(msg: nats.Msg) -> None:
        msg.ack_sync(timeout=5)
        got.release()

    tmpl = ConsumerConfig(ack_wait=2.0)
    eu = pcgroups.static_consume(js, pstream, "orders-eu", "m1", handle, tmpl)
    ours = pcgroups.static_consume(js, pstream, "orders", "m1", lambda m: m.ack(), tmpl)
    try:
        pcgroups.delete_static(js, pstream, "orders")
        assert ours.wait(10) and ours.error is None
        names = set(js.consumer_names(pstream))
        assert "orders-m1" not in names and "orders-eu-m1" in names
        # orders-eu's member goes on consuming from where it was.
        js.publish(f"{pstream}.k1", b"x")
        assert got.acquire(timeout=10)
        assert not eu.done.is_set()
        assert js.consumer(pstream, "orders-eu-m1").cached_info.num_ack_pending == 0
    finally:
        ours.stop()
        eu.stop()
    # An earlier deletion that stopped after the config went: the consumers left are still
    # found by the group's own names only.
    pcgroups.create_static(js, pstream, "orders", 2, members=["m1"])
    pcgroups.static_consume(js, pstream, "orders", "m1", lambda m: m.ack(), tmpl).stop()
    js.key_value(pcgroups.STATIC_BUCKET).delete(f"{pstream}.orders")
    pcgroups.delete_static(js, pstream, "orders")
    names = set(js.consumer_names(pstream))
    assert "orders-m1" not in names and "orders-eu-m1" in names


def test_a_group_whose_consumer_names_are_another_groups_is_refused(js: JetStream, pstream: str) -> None:
    # "<group>-<member>": group orders with member eu-m1 and group orders-eu with member m1
    # would both use the consumer orders-eu-m1.
    pcgroups.create_static(js, pstream, "orders", 2, members=["eu-m1"])
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="orders-eu-m1"):
        pcgroups.create_static(js, pstream, "orders-eu", 2, members=["m1"])
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="orders-eu-m1"):
        pcgroups.create_static(js, pstream, "orders-eu", 2, member_mappings=[
            pcgroups.MemberMapping(member="m1", partitions=(0, 1))])
    assert pcgroups.list_static_groups(js, pstream) == ["orders"]


def test_the_consumer_name_check_reads_only_the_groups_that_could_share_a_name(nc: nats.Client, js: JetStream,
                                                                              pstream: str) -> None:
    # Many groups of the stream with "-" in their names: checking one group's consumer names
    # reads the few groups that could derive them, never every group of the stream.
    for i in range(30):
        pcgroups.create_static(js, pstream, f"orders-r{i}", 2, members=["m1"])

    def requests(call: Callable[[], object]) -> int:
        before = nc.stats["out_msgs"]
        call()
        return nc.stats["out_msgs"] - before

    assert requests(lambda: pcgroups.create_static(js, pstream, "orders-new", 2, members=["m1", "x-y"])) <= 10
    assert requests(lambda: pcgroups.delete_static(js, pstream, "orders-new")) <= 10
    # A name shared at its second "-" is still found.
    pcgroups.create_static(js, pstream, "a-b-c", 2, members=["d"])
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="a-b-c-d"):
        pcgroups.create_static(js, pstream, "a", 2, members=["b-c-d"])
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="a-b-c-d"):
        pcgroups.create_static(js, pstream, "a-b", 2, members=["c-d"])
    pcgroups.create_static(js, pstream, "a-b", 2, members=["c-e"])


def _create_at_once(js: JetStream, stream: str, group: str, members: list[str], start: threading.Barrier,
                    outcome: dict[str, str]) -> None:
    start.wait(10)
    try:
        pcgroups.create_static(js, stream, group, 2, members=members)
        outcome[group] = "created"
    except pcgroups.ConsumerGroupExistsError as exc:
        outcome[group] = f"refused: {exc}"


def test_of_two_groups_sharing_a_consumer_name_created_at_once_exactly_one_stays(js: JetStream, pstream: str,
                                                                                 shared_server: Any) -> None:
    # Both creators check before either writes; the later creation gives way and is told.
    conns = [nats.connect(shared_server.url) for _ in range(2)]
    try:
        for r in range(10):
            specs = [(f"a{r}", ["b-c"]), (f"a{r}-b", ["c"])]
            start = threading.Barrier(2)
            outcome: dict[str, str] = {}
            threads = [threading.Thread(target=_create_at_once, args=(conns[i].jetstream(), pstream, *specs[i],
                                                                      start, outcome)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            created = {g for g, what in outcome.items() if what == "created"}
            refused = [what for what in outcome.values() if what.startswith("refused")]
            assert len(created) == 1 and len(refused) == 1 and f"a{r}-b-c" in refused[0], (r, outcome)
            assert set(pcgroups.list_static_groups(js, pstream)) & {g for g, _ in specs} == created
    finally:
        for c in conns:
            c.close()


def test_a_member_never_takes_over_a_consumer_another_group_or_a_user_owns(js: JetStream, pstream: str) -> None:
    got = threading.Semaphore(0)

    def handle(msg: nats.Msg) -> None:
        msg.ack_sync(timeout=5)
        got.release()

    tmpl = ConsumerConfig(ack_wait=2.0)
    pcgroups.create_static(js, pstream, "orders", 2, filters=[f"{pstream}.*"], members=["eu-m1"])
    ours = pcgroups.static_consume(js, pstream, "orders", "eu-m1", handle, tmpl)
    try:
        # Another client (no such check there) made a group whose member m1 derives the same name.
        js.key_value(pcgroups.STATIC_BUCKET).put(f"{pstream}.orders-eu", b'{"max_members":2,"members":["m1"]}')
        with pytest.raises(pcgroups.ConsumerGroupExistsError, match="orders-eu-m1"):
            pcgroups.static_consume(js, pstream, "orders-eu", "m1", lambda m: m.ack(), tmpl)
        pcgroups.delete_static(js, pstream, "orders-eu")
        # orders' consumer is untouched and its member goes on.
        info = js.consumer(pstream, "orders-eu-m1").cached_info
        assert info.config.filter_subjects == [f"0.{pstream}.*", f"1.{pstream}.*"]
        js.publish(f"{pstream}.k1", b"x")
        assert got.acquire(timeout=10)
        assert not ours.done.is_set()
    finally:
        ours.stop()
    # A consumer of the name a member derives that is no member's (no PCG priority group) is left alone.
    js.create_consumer(pstream, ConsumerConfig(durable_name="billing-a", filter_subject=f"0.{pstream}.k1"))
    pcgroups.create_static(js, pstream, "billing", 2, members=["a"])
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="billing-a"):
        pcgroups.static_consume(js, pstream, "billing", "a", lambda m: m.ack(), tmpl)
    assert js.consumer(pstream, "billing-a").cached_info.config.filter_subject == f"0.{pstream}.k1"


def test_deleting_a_group_leaves_a_consumer_of_a_members_name_that_no_member_made(js: JetStream,
                                                                                    pstream: str) -> None:
    # A user's durable called "<group>-<member>" (no PCG priority group): members refuse it, and so
    # does the group's deletion.
    js.create_consumer(pstream, ConsumerConfig(durable_name="billing-a", filter_subject=f"0.{pstream}.k1"))
    pcgroups.create_static(js, pstream, "billing", 2, members=["a", "b"])
    pcgroups.static_consume(js, pstream, "billing", "b", lambda m: m.ack(), ConsumerConfig(ack_wait=2.0)).stop()
    assert "billing-b" in set(js.consumer_names(pstream))
    pcgroups.delete_static(js, pstream, "billing")
    assert set(js.consumer_names(pstream)) == {"billing-a"}
    assert js.consumer(pstream, "billing-a").cached_info.config.filter_subject == f"0.{pstream}.k1"
    # Also when the config went first (a deletion that stopped half-way).
    pcgroups.create_static(js, pstream, "billing", 2, members=["a"])
    js.key_value(pcgroups.STATIC_BUCKET).delete(f"{pstream}.billing")
    pcgroups.delete_static(js, pstream, "billing")
    assert set(js.consumer_names(pstream)) == {"billing-a"}


def test_deleting_a_group_another_client_wrote_with_a_member_name_no_consumer_can_have(js: JetStream,
                                                                                        pstream: str) -> None:
    pcgroups.create_static(js, pstream, "g", 2, members=["c"])
    pcgroups.static_consume(js, pstream, "g", "c", lambda m: m.ack(), ConsumerConfig(ack_wait=2.0)).stop()
    # natsio-pcgroups checks no member names: "a b" is stored, and no consumer "g-a b" can exist.
    js.key_value(pcgroups.STATIC_BUCKET).put(f"{pstream}.g", b'{"max_members":2,"members":["a b","c"]}')
    pcgroups.delete_static(js, pstream, "g")
    assert "g-c" not in set(js.consumer_names(pstream))
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_static_config(js, pstream, "g")


@pytest.mark.parametrize("bad", ["a.b", "", "a b", "x*", ">"])
def test_member_names_that_are_not_nats_tokens_are_refused_before_anything_is_written(
        js: JetStream, pstream: str, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.create_static(js, pstream, "g", 2, members=["ok", bad])
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.create_static(js, pstream, "g", 2, member_mappings=[pcgroups.MemberMapping(member=bad,
                                                                                            partitions=(0, 1))])
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_static_config(js, pstream, "g")
    pcgroups.create_static(js, pstream, "g", 2, members=["ok"])
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.static_consume(js, pstream, "g", bad, lambda m: m.ack())
