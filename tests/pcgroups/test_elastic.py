"""Elastic consumer groups against a real server: membership changes while publishing, killed members."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig, JetStream
from natsjs_sync.testing import FaultProxy

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


def _hold_back_watch(js: JetStream, stream: str, group: str) -> None:
    """Pause the member's watch of the group's config (its consumer on the bucket's stream) for a
    minute: changes stay unseen by it and nothing tells it so (heartbeats go on), as while a watch
    that lost its server waits for missed heartbeats before it heals."""
    bucket_stream = f"KV_{pcgroups.ELASTIC_BUCKET}"
    key = f"$KV.{pcgroups.ELASTIC_BUCKET}.{stream}.{group}"
    watches = [name for name in js.consumer_names(bucket_stream)
               if key in {*(js.consumer(bucket_stream, name).cached_info.config.filter_subjects or ()),
                          js.consumer(bucket_stream, name).cached_info.config.filter_subject}]
    assert len(watches) == 1, watches
    js.pause_consumer(bucket_stream, watches[0], until=datetime.now(timezone.utc) + timedelta(seconds=60))


def _group_of_a(js: JetStream, estream: str) -> str:
    """An elastic group "g" on ``estream`` whose one member is "a"; the stream of its consumers."""
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    pcgroups.add_members(js, estream, "g", ["a"])
    return f"{estream}-g"


def _consuming_a(js: JetStream, estream: str) -> pcgroups.ElasticConsumeContext:
    """An instance of member "a" (acks each message, ``ack_wait`` 1 s), once it consumes."""
    a = pcgroups.elastic_consume(js, estream, "g", "a", lambda m: m.ack(), ConsumerConfig(ack_wait=1.0))
    assert wait_until(lambda: a.consuming, 10)
    return a


def test_a_removed_member_whose_watch_lags_never_joins_again_on_the_config_it_last_saw(
        js: JetStream, estream: str) -> None:
    # The member's consumer goes for another reason than its removal (idle past its inactive
    # threshold while it reconnected after a server died) and its watch has not delivered the
    # removal yet: when idle it joins again, on the config in the bucket, not the one it saw.
    cg = _group_of_a(js, estream)
    a = _consuming_a(js, estream)
    try:
        _hold_back_watch(js, estream, "g")
        pcgroups.delete_members(js, estream, "g", ["a"])
        removed = pcgroups.get_elastic_config(js, estream, "g").revision
        js.delete_consumer(cg, "a")
        # Its next idle round either reads the removal or makes the consumer again.
        assert wait_until(lambda: a.config.revision >= removed or "a" in js.consumer_names(cg), 20)
        assert "a" not in js.consumer_names(cg) and not a.consuming
    finally:
        a.stop()


def test_a_member_removed_while_it_makes_its_consumer_lets_go_of_it(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any) -> None:
    # The removal lands between the member's read of the config and the answer to its
    # create: the consumer it made is from a config already left behind. Its watch lags.
    cg = _group_of_a(js, estream)
    creating = threading.Event()
    subs = [nc.subscribe(subject, cb=lambda _: creating.set())
            for subject in (f"$JS.API.CONSUMER.CREATE.{cg}.a", f"$JS.API.CONSUMER.CREATE.{cg}.a.>")]
    nc.flush()
    with FaultProxy(shared_server.url) as proxy, nats.connect(proxy.url, name="member-a") as anc:
        a = pcgroups.elastic_consume(anc.jetstream(), estream, "g", "a", lambda m: m.ack(),
                                     ConsumerConfig(ack_wait=1.0))
        try:
            assert wait_until(lambda: a.consuming, 10)
            _hold_back_watch(js, estream, "g")
            creating.clear()
            proxy.latency(1.5, "to_client")  # every answer reaches the member 1.5 s late
            js.delete_consumer(cg, "a")  # it joins again when idle
            assert creating.wait(30)
            pcgroups.delete_members(js, estream, "g", ["a"])  # while the answer is on its way
            removed = pcgroups.get_elastic_config(js, estream, "g").revision
            # The removal is written before its create's answer reached it: what the member
            # asks from now on may be answered at once.
            proxy.heal()
            assert wait_until(lambda: a.config.revision >= removed or a.consuming, 30)
            assert not a.consuming
            assert wait_until(lambda: "a" not in js.consumer_names(cg), 10)
        finally:
            proxy.heal()
            a.stop()
            for sub in subs:
                sub.unsubscribe()


def test_an_instance_that_cannot_read_the_config_after_its_create_leaves_the_consumer_alone(
        js: JetStream, estream: str, shared_server: Any) -> None:
    # Two instances of one member: the first consumes. The second joins (its create finds the
    # consumer as it is and changes nothing), then cannot read the group's key to check. It
    # must not delete what may be its sibling's live consumer: it only does not consume.
    cg = _group_of_a(js, estream)
    first = _consuming_a(js, estream)
    try:
        created = js.consumer(cg, "a").cached_info.created
        with nats.connect(shared_server.url, name="second-a") as snc:
            second = pcgroups.elastic_consume(snc.jetstream(), estream, "g", "a", lambda m: m.ack(),
                                              ConsumerConfig(ack_wait=1.0))
            try:
                assert wait_until(lambda: second.consuming, 10)
                second._stop_consuming()
                # Its key reads now go through a client that is closed: each one fails.
                with nats.connect(shared_server.url, name="closed") as cnc:
                    unreadable = cnc.jetstream().key_value(pcgroups.ELASTIC_BUCKET)
                second._kv = unreadable
                second._join()  # read before the create fails: nothing made
                second._join(fresh=True)  # made (unchanged), then the read after it fails
                assert not second.consuming
            finally:
                second.stop()
        assert "a" in js.consumer_names(cg) and js.consumer(cg, "a").cached_info.created == created
        assert first.consuming
    finally:
        first.stop()


def test_an_instance_whose_join_spans_a_change_never_deletes_the_consumer_a_pinned_sibling_handles_from(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any) -> None:
    # Two instances of member a. The first is pinned and its handler is busy with message X.
    # The second starts; while its create (which finds the consumer as it is) is under way,
    # b joins the group, and X's partition stays a's. The second reads the change after its
    # create: it must leave the consumer to the pinned instance, which deletes it once its
    # handler is done, not delete it under that handler (X would then go to the second
    # instance while the first still handles it).
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    pcgroups.add_members(js, estream, "g", ["a"])
    parts = key_partitions(js, KEYS, 4)
    stay = next(k for k in KEYS if parts[k] in (0, 1))  # a's partitions once b has joined too
    cg = f"{estream}-g"
    busy, release = threading.Event(), threading.Event()
    second_got: list[str] = []

    def first_handler(msg: nats.Msg) -> None:
        busy.set()
        release.wait(20)
        msg.ack_sync(timeout=5)

    first = pcgroups.elastic_consume(js, estream, "g", "a", first_handler, ConsumerConfig(ack_wait=15.0))
    creating = threading.Event()
    subs = [nc.subscribe(subject, cb=lambda _: creating.set())
            for subject in (f"$JS.API.CONSUMER.CREATE.{cg}.a", f"$JS.API.CONSUMER.CREATE.{cg}.a.>")]
    nc.flush()
    try:
        assert wait_until(lambda: first.consuming, 10)
        js.publish(f"{estream}.{stay}", b"X")
        assert busy.wait(10)
        created = js.consumer(cg, "a").cached_info.created
        with FaultProxy(shared_server.url) as proxy, nats.connect(proxy.url, name="second-a") as snc:
            proxy.latency(0.5, "to_client")  # every answer reaches the second instance 0.5 s late
            second: list[pcgroups.ElasticConsumeContext] = []
            starting = threading.Thread(target=lambda: second.append(pcgroups.elastic_consume(
                snc.jetstream(), estream, "g", "a", lambda m: (second_got.append(m.subject), m.ack()),
                ConsumerConfig(ack_wait=15.0))))
            starting.start()
            try:
                assert creating.wait(30)
                pcgroups.add_members(js, estream, "g", ["b"])  # while the answer is on its way
                starting.join(30)
                assert second, "the second instance did not start"
                # Its join is over, and the first instance's handler still runs.
                assert js.consumer(cg, "a").cached_info.created == created
                assert not second_got
            finally:
                release.set()
                proxy.heal()
                starting.join(30)
                for ctx in second:
                    ctx.stop()
    finally:
        release.set()
        first.stop()
        for sub in subs:
            sub.unsubscribe()


def test_a_creator_acting_on_a_stale_read_never_removes_a_member_added_meanwhile(
        nc: nats.Client, js: JetStream, estream: str, shared_server: Any) -> None:
    # Two hosts start at once and both create the group ("every start may call it"); the
    # slow one's answers come late, so whatever it does next acts on what it saw before
    # the fast one created the group and joined it.
    pcgroups.create_elastic(js, estream, "first", 4)  # the bucket exists: the race is on the key alone
    bucket, key = pcgroups.ELASTIC_BUCKET, f"{estream}.g"
    reached = threading.Event()  # the slow host's first read or write of the key is at the server
    subs = [nc.subscribe(subject, cb=lambda _: reached.set())
            for subject in (f"$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{key}", f"$KV.{bucket}.{key}")]
    nc.flush()
    made: list[pcgroups.ElasticConsumerGroupConfig] = []
    with FaultProxy(shared_server.url) as proxy, nats.connect(proxy.url, name="slow-host") as slow:
        slow_js = slow.jetstream(timeout=30.0)
        proxy.latency(2.0, "to_client")
        t = threading.Thread(target=lambda: made.append(pcgroups.create_elastic(slow_js, estream, "g", 4,
                                                                                _filters(estream))))
        t.start()
        try:
            assert reached.wait(30)
            for sub in subs:
                sub.unsubscribe()
            pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
            assert pcgroups.add_members(js, estream, "g", ["fast"]) == ["fast"]
            # The member is added before the slow host heard back from its read or write of
            # the key: what it asks from now on may be answered at once.
            proxy.heal()
        finally:
            t.join(60)
    assert made and made[0].fixed_part() == pcgroups.get_elastic_config(js, estream, "g").fixed_part()
    assert pcgroups.get_elastic_config(js, estream, "g").members == ("fast",)


def test_a_rebalance_lets_the_running_handler_finish_and_never_runs_two_at_once(js: JetStream,
                                                                                   estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    parts = key_partitions(js, KEYS, 4)
    stay = next(k for k in KEYS if parts[k] in (0, 1))  # a's partitions once b has joined too
    lock = threading.Lock()
    running: list[int] = []
    peak = [0]
    calls: list[tuple[str, int, int]] = []
    started, overlapped = threading.Event(), threading.Event()

    def handler(member: str) -> Callable[[nats.Msg], None]:
        def handle(msg: nats.Msg) -> None:
            i = int(msg.data)
            with lock:
                running.append(i)
                peak[0] = max(peak[0], len(running))
                calls.append((member, i, msg.metadata.num_delivered))
                if running.count(i) > 1 or (member == "a" and len(running) > 1):
                    overlapped.set()
            try:
                if i == 0:
                    started.set()
                    # Slow work, longer than the 5 s a rebalance used to wait before making the
                    # consumer again (ack_wait is 30 s: the message is still this handler's).
                    overlapped.wait(9.0)
                msg.ack_sync(timeout=5)
            finally:
                with lock:
                    running.remove(i)
        return handle

    a = pcgroups.elastic_consume(js, estream, "g", "a", handler("a"), ConsumerConfig(ack_wait=30.0))
    b = pcgroups.elastic_consume(js, estream, "g", "b", handler("b"), ConsumerConfig(ack_wait=2.0))
    n = 40
    try:
        pcgroups.add_members(js, estream, "g", ["a"])
        js.publish(f"{estream}.{stay}", b"0")
        assert started.wait(20)
        pcgroups.add_members(js, estream, "g", ["b"])  # a rebalance while a's handler runs
        for i in range(1, n):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        assert wait_until(lambda: {c[1] for c in calls} == set(range(n))
                          and js.stream(f"{estream}-g").cached_info.state.messages == 0, 45), sorted(calls)
    finally:
        a.stop()
        b.stop()
    assert not overlapped.is_set() and peak[0] == 1, calls
    # The slow handler's acknowledgement reached its consumer: message 0 came once.
    assert [c for c in calls if c[1] == 0] == [("a", 0, 1)]
    assert {c[0] for c in calls if c[1] and parts[KEYS[c[1] % 16]] in (2, 3)} == {"b"}


def test_delete_elastic_leaves_a_stream_that_is_not_the_groups(js: JetStream, estream: str) -> None:
    pcgroups.create_elastic(js, estream, "other", 4)
    # Named as group g's work queue would be, but someone else's.
    js.create_stream(name=f"{estream}-g", subjects=[f"{estream}x.>"], storage="memory")
    with pytest.raises(pcgroups.ConsumerGroupError, match="not the work queue"):
        pcgroups.delete_elastic(js, estream, "g")
    assert f"{estream}-g" in list(js.stream_names())
    pcgroups.delete_elastic(js, estream, "other")
    assert f"{estream}-other" not in list(js.stream_names())


def _rewritten_as_written(js: JetStream, stream: str, group: str, raw: str) -> None:
    """Membership changes of a group whose config is ``raw`` change only the membership's bytes."""
    kv = js.key_value(pcgroups.ELASTIC_BUCKET)
    pcgroups.add_members(js, stream, group, ["m2", "m1"])
    assert kv.get(f"{stream}.{group}").value.decode() == raw[:-1] + ',"members":["m2","m1"]}'
    pcgroups.delete_members(js, stream, group, ["m2", "m1"])
    assert kv.get(f"{stream}.{group}").value.decode() == raw


def test_membership_changes_keep_the_null_lists_orbit_go_wrote(js: JetStream, estream: str) -> None:
    # orbit.go writes nil slices as null (its CLI given no filter); its members compare the
    # filters exactly (reflect.DeepEqual: null is not []) and would stop.
    pcgroups.create_elastic(js, estream, "first", 4)
    go = {"nofilter": '{"max_members":2,"partitioning_filters":null}',
          "nowildcards": f'{{"max_members":2,"partitioning_filters":[{{"filter":"{estream}.>",'
                         '"partitioning_wildcards":null}]}'}
    for group, raw in go.items():
        js.key_value(pcgroups.ELASTIC_BUCKET).put(f"{estream}.{group}", raw.encode())
    pcgroups.create_elastic(js, estream, "nofilter", 2)
    pcgroups.create_elastic(js, estream, "nowildcards", 2, [pcgroups.PartitioningFilter(filter=f"{estream}.>")])
    for group, raw in go.items():
        _rewritten_as_written(js, estream, group, raw)


def test_a_no_limit_written_as_minus_one_means_no_limit_and_stays_so(js: JetStream, estream: str) -> None:
    # natsio-pcgroups writes "no limit" buffer sizes as -1, orbit.go's CLI and this client as 0 (left out).
    pcgroups.create_elastic(js, estream, "first", 4)
    raw = (f'{{"max_members":4,"partitioning_filters":[{{"filter":"{estream}.*","partitioning_wildcards":[1]}}],'
           '"max_buffered_msg":-1,"max_buffered_bytes":-1}')
    js.key_value(pcgroups.ELASTIC_BUCKET).put(f"{estream}.g", raw.encode())
    cfg = pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    assert (cfg.max_buffered_msgs, cfg.max_buffered_bytes) == (0, 0)
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_elastic(js, estream, "g", 4, _filters(estream), max_buffered_msgs=100)
    _rewritten_as_written(js, estream, "g", raw)


def test_create_elastic_refuses_a_stream_of_its_name_that_is_someone_elses(js: JetStream, estream: str) -> None:
    js.create_stream(name=f"{estream}-g", subjects=[f"{estream}x.>"], storage="memory")
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="not the work queue"):
        pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    # Refused before anything was written: no config, the stream as it was.
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_elastic_config(js, estream, "g")
    cfg = js.stream(f"{estream}-g").cached_info.config
    assert cfg.retention == "limits" and cfg.subjects == [f"{estream}x.>"] and not cfg.sources


def test_create_elastic_never_rewrites_a_group_stream_made_with_other_settings(js: JetStream, estream: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 4, _filters(estream))
    # The config went (a deletion that stopped half way); the stream of 4 partitions stayed.
    js.key_value(pcgroups.ELASTIC_BUCKET).delete(f"{estream}.g")
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="another configuration"):
        pcgroups.create_elastic(js, estream, "g", 8, _filters(estream))
    st = js.stream(f"{estream}-g").cached_info.config
    assert st.sources is not None and st.sources[0].subject_transforms is not None
    assert st.sources[0].subject_transforms[0].dest.startswith("{{Partition(4,1)}}")
    # The config this call wrote is withdrawn: no group of 8 partitions over a stream of 4.
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_elastic_config(js, estream, "g")
    # The same settings again make the group whole, reusing its stream.
    assert pcgroups.create_elastic(js, estream, "g", 4, _filters(estream)).max_members == 4


def test_create_elastic_again_with_wildcards_given_as_a_list_is_the_same_group(js: JetStream, estream: str) -> None:
    listed = [pcgroups.PartitioningFilter(filter=f"{estream}.*", partitioning_wildcards=[1])]  # type: ignore[arg-type]
    first = pcgroups.create_elastic(js, estream, "g", 4, listed)
    again = pcgroups.create_elastic(js, estream, "g", 4, listed)
    assert again.fixed_part() == first.fixed_part()
    assert again.partitioning_filters[0].partitioning_wildcards == (1,)


@pytest.mark.parametrize("bad", ["a.b", "", "a b", "x*", ">", "a/b"])
def test_member_names_that_are_not_nats_tokens_are_refused_before_anything_is_written(
        js: JetStream, estream: str, bad: str) -> None:
    pcgroups.create_elastic(js, estream, "g", 2, _filters(estream))
    kv = js.key_value(pcgroups.ELASTIC_BUCKET)
    before = kv.get(f"{estream}.g").revision
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.add_members(js, estream, "g", ["ok", bad])
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.set_member_mappings(js, estream, "g", [pcgroups.MemberMapping(member=bad, partitions=(0, 1))])
    with pytest.raises(ValueError, match="invalid member name"):
        pcgroups.elastic_consume(js, estream, "g", bad, lambda m: m.ack())
    assert kv.get(f"{estream}.g").revision == before
    # A bad name another client wrote is shown (it can have no consumer) and can be dropped.
    kv.put(f"{estream}.g", json.dumps({"max_members": 2, "partitioning_filters": None, "members": [bad, "ok"]}))
    assert [(s.member, s.consumer_exists) for s in pcgroups.list_elastic_members(js, estream, "g")] == [
        (bad, False), ("ok", False)]
    assert pcgroups.delete_members(js, estream, "g", [bad]) == ["ok"]


@pytest.mark.parametrize("bad", ["grüße", "a:b", "a@b", "a,b"])
def test_group_names_no_kv_key_can_hold_are_refused_as_config_errors(js: JetStream, estream: str, bad: str) -> None:
    # The config's key is "<stream>.<group>": a name the server takes as a stream name but no
    # client's KV takes as a key token is refused up front, as the other invalid names are.
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="invalid consumer group name"):
        pcgroups.create_elastic(js, estream, bad, 2, _filters(estream))
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="invalid consumer group name"):
        pcgroups.create_static(js, estream, bad, 2, members=["m1"])
    assert f"{estream}-{bad}" not in set(js.stream_names())


def test_a_group_whose_stream_cannot_be_made_leaves_no_config(js: JetStream, estream: str) -> None:
    # More buffer than any server has memory for (the group's stream is stored like its memory
    # source): the server refuses the stream after the config was stored.
    with pytest.raises(nats.JetStreamError, match="insufficient"):
        pcgroups.create_elastic(js, estream, "g", 2, _filters(estream), max_buffered_bytes=2 ** 50)
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_elastic_config(js, estream, "g")
    # So the group can be made with other settings at once.
    cfg = pcgroups.create_elastic(js, estream, "g", 2, _filters(estream), max_buffered_bytes=1 << 20)
    assert cfg.max_buffered_bytes == 1 << 20
    assert js.stream(f"{estream}-g").cached_info.config.max_bytes == 1 << 20
