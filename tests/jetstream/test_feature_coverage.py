"""JetStream settings whose effect a user relies on, checked against a real server:
not that a field round-trips, but that the server behaves as the setting says
(a refused publish, a refused purge, a message republished, a paused consumer,
the right waiting request served ...)."""

from __future__ import annotations

import datetime
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import NoStreamResponseError
from natsjs_sync.jetstream import JetStream, Placement, RePublish, Stream, StreamSource
from natsjs_sync.jetstream.stream_config import ExternalStream, StreamConsumerLimits, StreamConsumerSource
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsCluster, NatsServer

from ..conftest import wait_until


def _name() -> str:
    return "C" + next_nuid()


def _later(seconds: float = 3600) -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


@pytest.fixture
def make_stream(js: JetStream) -> Iterator[Any]:
    """Create streams with any settings; all are deleted afterwards."""
    made: list[str] = []

    def make(**kwargs: Any) -> Stream:
        name = kwargs.pop("name", None) or _name()
        if "subjects" not in kwargs and "mirror" not in kwargs and "sources" not in kwargs:
            kwargs["subjects"] = [f"{name}.>"]
        st = js.create_stream(name=name, storage="memory", **kwargs)
        made.append(name)
        return st

    yield make
    for name in made:
        try:
            js.delete_stream(name)
        except nats.NatsError:
            pass


# ---------------------------------------------------------------------- stream settings


def test_discard_new_per_subject_refuses_a_second_message_on_that_subject(js: JetStream, make_stream: Any) -> None:
    st = make_stream(discard="new", discard_new_per_subject=True, max_msgs_per_subject=1)
    name = st.name
    assert st.cached_info.config.discard_new_per_subject is True
    js.publish(f"{name}.a", b"1")
    with pytest.raises(nats.JetStreamError) as info:
        js.publish(f"{name}.a", b"2")
    assert info.value.err_code == 10077  # maximum messages per subject exceeded
    js.publish(f"{name}.b", b"other subjects still have room")
    assert st.get_last_msg_for_subject(f"{name}.a").data == b"1"  # the first one was kept
    assert st.info().state.messages == 2


def test_deny_purge_refuses_a_purge(js: JetStream, make_stream: Any) -> None:
    st = make_stream(deny_purge=True)
    js.publish(f"{st.name}.a", b"keep me")
    with pytest.raises(nats.JetStreamError) as info:
        st.purge()
    assert info.value.err_code == 10110  # stream purge not permitted
    assert st.info().state.messages == 1


def test_first_seq_numbers_the_first_message(js: JetStream, make_stream: Any) -> None:
    st = make_stream(first_seq=1000)
    assert js.publish(f"{st.name}.a", b"x").seq == 1000
    assert js.publish(f"{st.name}.a", b"y").seq == 1001
    assert st.info().state.first_seq == 1000


def test_republish_delivers_to_the_destination_with_stream_headers(nc: nats.Client, js: JetStream,
                                                                  make_stream: Any) -> None:
    name = _name()
    out = f"out{name}"
    make_stream(name=name, republish=RePublish(src=f"{name}.>", dest=f"{out}.>"))
    sub = nc.subscribe(f"{out}.>")
    nc.flush(timeout=5)
    ack = js.publish(f"{name}.a", b"payload")
    msg = sub.next_msg(timeout=5)
    assert msg.subject == f"{out}.a" and msg.data == b"payload"
    assert msg.headers is not None
    assert msg.headers["Nats-Stream"] == name and msg.headers["Nats-Subject"] == f"{name}.a"
    assert int(msg.headers["Nats-Sequence"]) == ack.seq
    sub.unsubscribe()


def test_republish_headers_only_sends_the_size_not_the_body(nc: nats.Client, js: JetStream,
                                                            make_stream: Any) -> None:
    name = _name()
    out = f"out{name}"
    make_stream(name=name, republish=RePublish(src=f"{name}.>", dest=f"{out}.>", headers_only=True))
    sub = nc.subscribe(f"{out}.>")
    nc.flush(timeout=5)
    js.publish(f"{name}.a", b"12345")
    msg = sub.next_msg(timeout=5)
    assert msg.data == b""
    assert msg.headers is not None and msg.headers["Nats-Msg-Size"] == "5"
    sub.unsubscribe()


def test_consumer_limits_are_inherited_by_new_consumers(make_stream: Any) -> None:
    st = make_stream(consumer_limits=StreamConsumerLimits(inactive_threshold=30.0, max_ack_pending=50))
    limits = st.cached_info.config.consumer_limits
    assert limits is not None and limits.max_ack_pending == 50
    cfg = st.create_consumer(durable_name="d").cached_info.config
    assert cfg.max_ack_pending == 50 and cfg.inactive_threshold == 30.0
    # Asking for more than the stream allows is refused.
    with pytest.raises(nats.JetStreamError):
        st.create_consumer(durable_name="greedy", max_ack_pending=500)


# ---------------------------------------------------------------------- consumer settings


def test_ack_policy_all_acknowledges_everything_before(js: JetStream, stream: Stream) -> None:
    for i in range(5):
        js.publish(f"{stream.name}.a", str(i).encode())
    cons = stream.create_consumer(durable_name="all", ack_policy="all", ack_wait=30.0)
    assert cons.cached_info.config.ack_policy == "all"
    msgs = list(cons.fetch(5, max_wait=5))
    assert len(msgs) == 5
    msgs[3].ack_sync(timeout=5)  # the fourth acknowledges the first three too
    info = cons.info()
    assert info.ack_floor.stream_seq == 4
    assert info.num_ack_pending == 1


def test_request_limits_end_a_fetch_with_a_409(js: JetStream, stream: Stream) -> None:
    for _ in range(10):
        js.publish(f"{stream.name}.a", b"x" * 10)
    cons = stream.create_consumer(durable_name="lim", max_batch=5, max_expires=2.5, max_bytes=4096)
    cfg = cons.cached_info.config
    assert (cfg.max_batch, cfg.max_expires, cfg.max_bytes) == (5, 2.5, 4096)

    # The refusals come at once: each fetch's max_wait is only a bound (within max_expires here).
    with cons.fetch(10, max_wait=2) as batch:
        assert list(batch) == []
    assert isinstance(batch.error, nats.JetStreamError)
    assert batch.error.code == 409 and "MaxRequestBatch" in str(batch.error)

    with cons.fetch(1, max_wait=5) as batch:
        assert list(batch) == []
    assert isinstance(batch.error, nats.JetStreamError)
    assert batch.error.code == 409 and "MaxRequestExpires" in str(batch.error)

    # Within the limits the same consumer serves.
    with cons.fetch(5, max_wait=2) as batch:
        assert len(list(batch)) == 5
    assert batch.error is None

    # fetch_bytes asks for a huge batch (as nats.go does), so max_bytes gets its own consumer.
    by_size = stream.create_consumer(durable_name="size", max_bytes=4096)
    with by_size.fetch_bytes(10_000, max_wait=5) as batch:
        assert list(batch) == []
    assert isinstance(batch.error, nats.JetStreamError)
    assert batch.error.code == 409 and "MaxRequestMaxBytes" in str(batch.error)
    with by_size.fetch_bytes(4096, max_wait=2) as batch:
        assert len(list(batch)) == 10


def test_max_ack_pending_and_max_waiting_hold_back_a_consumer(js: JetStream, stream: Stream) -> None:
    for _ in range(5):
        js.publish(f"{stream.name}.a", b"x")
    cons = stream.create_consumer(durable_name="m", max_ack_pending=2, max_waiting=1)
    # The fetches that get messages ask for no more than they get, so that they end at once: a
    # fetch returns what it read by its max_wait, and a loaded machine may read late.
    held = list(cons.fetch(2, max_wait=5))
    assert len(held) == 2
    assert list(cons.fetch(5, max_wait=0.5)) == []  # no more than two unacknowledged at a time
    held[0].ack_sync(timeout=5)
    assert len(list(cons.fetch(1, max_wait=5))) == 1  # one slot freed, one more message
    assert list(cons.fetch(5, max_wait=0.5)) == []  # and no more
    # A second waiting pull request beyond max_waiting is refused.
    waiting = cons.fetch(1, max_wait=10)
    assert wait_until(lambda: cons.info().num_waiting == 1)
    with cons.fetch(1, max_wait=2) as refused:
        assert list(refused) == []
    assert isinstance(refused.error, nats.JetStreamError) and refused.error.code == 409
    assert "MaxWaiting" in str(refused.error)
    waiting.close()


def test_no_ack_stream_stores_without_answering(nc: nats.Client, make_stream: Any) -> None:
    st = make_stream(no_ack=True)
    with pytest.raises(nats.TimeoutError):
        nc.request(f"{st.name}.a", b"1", timeout=0.5)  # stored, but no PubAck comes back
    nc.publish(f"{st.name}.a", b"2")
    assert wait_until(lambda: st.info().state.messages == 2)


def test_replay_original_paces_a_pull_consumer(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"1")
    threading.Event().wait(0.6)  # the gap between the two messages the replay must reproduce
    js.publish(f"{stream.name}.a", b"2")
    cons = stream.create_consumer(durable_name="r", replay_policy="original")
    assert cons.next(timeout=5).data == b"1"
    started = time.monotonic()
    assert cons.next(timeout=5).data == b"2"
    assert time.monotonic() - started >= 0.4


@pytest.mark.server("2.11")
def test_pause_until_leaves_the_consumer_paused(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"waiting")
    cons = stream.create_consumer(durable_name="p", pause_until=_later())
    info = cons.info()
    assert info.paused is True
    assert info.pause_remaining is not None and info.pause_remaining > 3000
    with cons.fetch(1, max_wait=0.5) as batch:
        assert list(batch) == []  # paused: nothing is delivered
    cons.resume()
    assert cons.next(timeout=5).data == b"waiting"


# ---------------------------------------------------------------------- priority groups


@pytest.mark.server("2.11")
def test_overflow_min_pending_serves_only_when_the_backlog_is_big_enough(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="o", priority_policy="overflow", priority_groups=["g"])
    for _ in range(5):
        js.publish(f"{stream.name}.a", b"x")
    cons = js.consumer(stream.name, "o")
    with cons.fetch(5, max_wait=0.5, group="g", min_pending=100) as batch:
        assert list(batch) == []  # 5 pending is below the 100 this client waits for
    assert batch.error is None
    with cons.fetch(4, max_wait=5, group="g", min_pending=2) as batch:
        assert len(list(batch)) == 4  # served while at least 2 are pending ...
    with cons.fetch(5, max_wait=0.5, group="g", min_pending=2) as batch:
        assert list(batch) == []  # ... and the fifth is not: one is pending


@pytest.mark.server("2.11")
def test_overflow_min_ack_pending_serves_only_when_others_lag(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="o", priority_policy="overflow", priority_groups=["g"])
    for _ in range(5):
        js.publish(f"{stream.name}.a", b"x")
    cons = js.consumer(stream.name, "o")
    held = list(cons.fetch(2, max_wait=5, group="g"))  # a main client holds two unacknowledged
    assert len(held) == 2
    with cons.fetch(2, max_wait=0.5, group="g", min_ack_pending=5) as batch:
        assert list(batch) == []  # 2 pending acks is below 5: the overflow client stays idle
    with cons.fetch(2, max_wait=5, group="g", min_ack_pending=2) as batch:
        assert len(list(batch)) == 2


@pytest.mark.server("2.12")
def test_prioritized_sends_to_the_waiting_request_with_the_lowest_priority(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="z", priority_policy="prioritized", priority_groups=["g"])
    cons = js.consumer(stream.name, "z")
    low = cons.fetch(1, max_wait=10, group="g", priority=5)
    assert wait_until(lambda: cons.info().num_waiting == 1)
    high = cons.fetch(1, max_wait=10, group="g", priority=0)  # asked later, but preferred
    assert wait_until(lambda: cons.info().num_waiting == 2)
    js.publish(f"{stream.name}.a", b"first")
    with high:
        assert [m.data for m in high] == [b"first"]
    js.publish(f"{stream.name}.a", b"second")
    with low:
        assert [m.data for m in low] == [b"second"]


@pytest.mark.server("2.12")
def test_prioritized_messages_iteration_receives(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="z", priority_policy="prioritized", priority_groups=["g"])
    cons = js.consumer(stream.name, "z")
    with cons.messages(group="g", priority=1, max_messages=5) as it:
        js.publish(f"{stream.name}.a", b"y")
        msg = it.next(timeout=5)
        assert msg.data == b"y"
        msg.ack()


# ---------------------------------------------------------------------- pulling


def test_fetch_with_heartbeats_outlives_idle_periods_without_an_error(js: JetStream, stream: Stream) -> None:
    cons = stream.create_consumer(durable_name="h")
    # Heartbeats every 0.6 s keep a 3 s fetch alive on an idle consumer: it ends
    # at its max_wait, empty, and not with NoHeartbeatError. (The fetch counts a
    # heartbeat when it reads it: a reading thread that a loaded machine held for
    # two heartbeats, 0.4 s at 0.2 s, ended it with that error.)
    started = time.monotonic()
    with cons.fetch(1, max_wait=3, heartbeat=0.6) as batch:
        assert list(batch) == []
    assert batch.error is None
    assert time.monotonic() - started >= 2.4  # far longer than two missed heartbeats
    # And the heartbeat-watched fetch still delivers.
    with cons.fetch(1, max_wait=5, heartbeat=0.5) as batch:
        js.publish(f"{stream.name}.a", b"late")
        assert [m.data for m in batch] == [b"late"]
    assert batch.error is None


def _pull_requests(nc: nats.Client, stream: Stream, durable: str) -> tuple[nats.Subscription, list[dict[str, Any]]]:
    """Watch the pull requests a client sends (a second subscriber on the API subject)."""
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def record(msg: nats.Msg) -> None:
        with lock:
            seen.append(json.loads(msg.data) if msg.data else {})

    sub = nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{durable}", cb=record)
    nc.flush(timeout=5)
    return sub, seen


def test_threshold_messages_sets_when_the_client_asks_for_more(nc: nats.Client, js: JetStream,
                                                               stream: Stream) -> None:
    for i in range(40):
        js.publish(f"{stream.name}.a", str(i).encode())
    cons = stream.create_consumer(durable_name="t", ack_policy="none")
    watcher = nats.connect(nc.connected_url or "", name="watcher")
    try:
        sub, seen = _pull_requests(watcher, stream, "t")
        with cons.messages(max_messages=10, threshold_messages=2) as it:
            got = [it.next(timeout=5).data for _ in range(40)]
        assert got == [str(i).encode() for i in range(40)]
        assert wait_until(lambda: sum(r.get("batch", 0) for r in seen) >= 40)
        batches = [r.get("batch") for r in seen]
        assert batches[0] == 10
        # Top-ups happen once at most 2 are still owed: each asks for 8 or more.
        assert len(batches) >= 4 and all(b is not None and b >= 8 for b in batches)
        sub.unsubscribe()
    finally:
        watcher.close()


def test_messages_by_bytes_delivers_a_backlog_bigger_than_max_bytes(js: JetStream, stream: Stream) -> None:
    for _ in range(100):
        js.publish(f"{stream.name}.a", b"x" * 100)
    cons = stream.create_consumer(durable_name="mb", ack_policy="none")
    with cons.messages(max_bytes=4096) as it:
        got = [it.next(timeout=3) for _ in range(100)]
    assert len(got) == 100


def test_threshold_bytes_sets_when_the_client_asks_for_more(nc: nats.Client, js: JetStream, stream: Stream) -> None:
    for _ in range(100):
        js.publish(f"{stream.name}.a", b"x" * 100)
    cons = stream.create_consumer(durable_name="tb", ack_policy="none")
    watcher = nats.connect(nc.connected_url or "", name="watcher")
    try:
        sub, seen = _pull_requests(watcher, stream, "tb")
        with cons.messages(max_bytes=4096, threshold_bytes=512) as it:
            got = [it.next(timeout=3) for _ in range(100)]
        assert len(got) == 100
        assert wait_until(lambda: len(seen) >= 3)
        asked = [r.get("max_bytes") for r in seen]
        assert asked[0] == 4096
        # A top-up comes once at most 512 bytes are still owed.
        assert len(asked) >= 3 and all(b is not None and b >= 4096 - 512 for b in asked)
        sub.unsubscribe()
    finally:
        watcher.close()


# ---------------------------------------------------------------------- ordered consumers


def test_ordered_consumer_name_prefix_and_metadata_reach_the_server(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"1")
    oc = js.ordered_consumer(stream.name, name_prefix="mine", metadata={"team": "blue"})
    assert oc.next(timeout=5).data == b"1"
    info = oc.info()
    assert info.name.startswith("mine")
    assert info.config.metadata is not None and info.config.metadata.get("team") == "blue"
    # The server lists it under that name: a user can find their consumers.
    assert any(n.startswith("mine") for n in js.consumer_names(stream.name))
    oc.delete()


def test_ordered_consumer_replay_original_keeps_the_gaps(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"1")
    threading.Event().wait(0.6)  # the gap between the two messages the replay must reproduce
    js.publish(f"{stream.name}.a", b"2")
    oc = js.ordered_consumer(stream.name, replay_policy="original")
    assert oc.info().config.replay_policy == "original"
    assert oc.next(timeout=5).data == b"1"
    started = time.monotonic()
    assert oc.next(timeout=5).data == b"2"
    assert time.monotonic() - started >= 0.4  # paced like the original publishes
    oc.delete()


def test_ordered_consumer_fetch_bytes_and_fetch_no_wait(js: JetStream, stream: Stream) -> None:
    for i in range(6):
        js.publish(f"{stream.name}.a", str(i).encode() * 50)
    oc = js.ordered_consumer(stream.name)
    first = oc.fetch_no_wait(2)
    assert [m.data[:1] for m in first] == [b"0", b"1"]
    # About 90 bytes of subject and metadata come with each 50-byte payload: 300 bytes hold two.
    by_size = oc.fetch_bytes(300, max_wait=2)
    assert 1 <= len(by_size) <= 2
    assert [m.data[:1] for m in by_size] == [str(i).encode() for i in range(2, 2 + len(by_size))]
    rest = oc.fetch_no_wait(10)
    assert [m.data[:1] for m in rest] == [str(i).encode() for i in range(2 + len(by_size), 6)]
    started = time.monotonic()
    assert oc.fetch_no_wait(10) == []  # nothing left: returns at once instead of waiting
    assert time.monotonic() - started < 5
    oc.delete()


def test_ordered_consumer_max_reset_attempts_gives_up(nc: nats.Client, js: JetStream, stream: Stream) -> None:
    # Through an API prefix nobody serves, making the consumer fails in a way
    # worth retrying (no responders). A limit turns endless retries into an error.
    lost = nc.jetstream(api_prefix="$NOBODY.API")
    limited = lost.ordered_consumer(stream.name, max_reset_attempts=2)
    with pytest.raises(nats.JetStreamError, match="could not be re-created") as info:
        limited.next(timeout=30)
    assert not isinstance(info.value, nats.TimeoutError)
    assert isinstance(info.value.__cause__, nats.JetStreamNotEnabledError)
    unlimited = lost.ordered_consumer(stream.name)
    with pytest.raises(nats.TimeoutError):
        unlimited.next(timeout=1)  # without a limit it keeps trying until the deadline


# ---------------------------------------------------------------------- push consumers


def test_create_or_update_and_update_push_consumer(nc: nats.Client, js: JetStream, stream: Stream) -> None:
    name = stream.name
    with pytest.raises(nats.ConsumerNotFoundError):
        js.update_push_consumer(name, durable_name="p", deliver_subject=nc.new_inbox())
    deliver = nc.new_inbox()
    pc = js.create_or_update_push_consumer(name, durable_name="p", deliver_subject=deliver,
                                           filter_subject=f"{name}.a")
    assert pc.cached_info.config.filter_subject == f"{name}.a"
    again = js.create_or_update_push_consumer(name, durable_name="p", deliver_subject=deliver,
                                              filter_subject=f"{name}.a", description="same, described")
    assert again.cached_info.config.description == "same, described"
    # Narrow it to .b: only .b messages are delivered from then on.
    updated = js.update_push_consumer(name, durable_name="p", deliver_subject=deliver, filter_subject=f"{name}.b")
    assert updated.info().config.filter_subject == f"{name}.b"
    js.publish(f"{name}.a", b"not for me")
    js.publish(f"{name}.b", b"for me")
    got: list[bytes] = []
    done = threading.Event()

    def handler(msg: nats.Msg) -> None:
        got.append(msg.data)
        msg.ack()
        done.set()

    ctx = updated.consume(handler)
    try:
        assert done.wait(5)
    finally:
        ctx.stop()
    assert got == [b"for me"]


# ---------------------------------------------------------------------- publishing


def _in_msgs(server: NatsServer) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/varz", timeout=5) as resp:
        return int(json.load(resp)["in_msgs"])


def test_sync_publish_retries_no_responders_retry_attempts_times_retry_wait_apart(nats_server: NatsServer) -> None:
    nc = nats.connect(nats_server.url, name="retry")
    try:
        js = nc.jetstream()
        nc.flush(timeout=5)
        before = _in_msgs(nats_server)
        started = time.monotonic()
        with pytest.raises(NoStreamResponseError):
            js.publish("nobody.stores.this", b"x", retry_attempts=3, retry_wait=0.3)
        elapsed = time.monotonic() - started
        # One publish and three retries reached the server, with retry_wait between them.
        assert _in_msgs(nats_server) - before == 4
        assert elapsed >= 0.9
        before = _in_msgs(nats_server)
        with pytest.raises(NoStreamResponseError):
            js.publish("nobody.stores.this", b"x", retry_attempts=0)
        assert _in_msgs(nats_server) - before == 1
    finally:
        nc.close()


@pytest.mark.server("2.14")
def test_schedule_rollup_and_ttl_never_shape_what_the_schedule_produces(js: JetStream, make_stream: Any) -> None:
    st = make_stream(allow_msg_schedules=True, allow_msg_ttl=True, allow_rollup_hdrs=True)
    name = st.name
    js.publish(f"{name}.sensor", b"21.5")
    js.publish(f"{name}.sched.sample", b"", schedule_every=1, schedule_source=f"{name}.sensor",
               schedule_target=f"{name}.out", schedule_rollup=True, schedule_ttl="never")
    cons = js.create_consumer(name, filter_subject=f"{name}.out", ack_policy="none")
    first, second = cons.next(timeout=10), cons.next(timeout=10)
    for msg in (first, second):
        assert msg.data == b"21.5"
        assert msg.headers is not None and msg.headers.get("Nats-TTL") == "never"
    assert second.metadata.sequence.stream > first.metadata.sequence.stream
    # Each produced message replaced the one before it on the target subject.
    subjects = st.info(subjects_filter=f"{name}.out").state.subjects or {}
    assert subjects == {f"{name}.out": 1}
    st.purge(subject=f"{name}.sched.sample")  # deleting the schedule stops it


@pytest.mark.server("2.14")
def test_durable_sourcing_through_a_flow_control_consumer_drains_a_work_queue(js: JetStream,
                                                                               make_stream: Any) -> None:
    origin = make_stream(retention="workqueue")
    for i in range(3):
        js.publish(f"{origin.name}.a", str(i).encode())
    deliver = f"deliver.{origin.name}"
    pc = js.create_push_consumer(origin.name, durable_name="src", deliver_subject=deliver, ack_policy="flow_control",
                                 flow_control=True, idle_heartbeat=1.0, max_deliver=-1)
    assert pc.cached_info.config.ack_policy == "flow_control"
    agg = make_stream(sources=[StreamSource(name=origin.name,
                                            consumer=StreamConsumerSource(name="src", deliver_subject=deliver))])
    # Copied through the durable consumer, and acknowledged by flow control:
    # the work queue lets go of what the sourcing stream stored.
    assert wait_until(lambda: agg.info().state.messages == 3, timeout=10)
    assert wait_until(lambda: origin.info().state.messages == 0, timeout=10)
    assert [agg.get_msg(i).data for i in (1, 2, 3)] == [b"0", b"1", b"2"]


# ---------------------------------------------------------------------- JetStream domains


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[NatsServer]:
    """A server whose JetStream runs in the domain ``hub``."""
    server = NatsServer(config={"jetstream": {"store_dir": str(tmp_path), "domain": "hub"}})
    server.start()
    yield server
    server.close()


def test_jetstream_domain_reaches_that_domain(hub: NatsServer) -> None:
    nc = nats.connect(hub.url, name="domain")
    try:
        jd = nc.jetstream(domain="hub")
        assert jd.api_prefix == "$JS.hub.API"
        assert jd.account_info().domain == "hub"
        st = jd.create_stream(name="DOM", subjects=["dom.>"], storage="memory")
        assert jd.publish("dom.a", b"x").domain == "hub"
        msg = st.create_consumer(durable_name="d").next(timeout=5)
        assert msg.data == b"x" and msg.metadata.stream == "DOM"
        with pytest.raises(nats.JetStreamNotEnabledError):
            nc.jetstream(domain="elsewhere").account_info(timeout=2)
    finally:
        nc.close()


def test_a_source_in_another_account_is_copied_through_its_external_api(tmp_path: Path) -> None:
    # Account A shares its JetStream API (imported by B under $JS.A.API) and the
    # subject the sourced messages are delivered on.
    accounts = {
        "A": {"jetstream": "enabled", "users": [{"user": "a", "password": "a"}],
              "exports": [{"service": "$JS.API.>"}, {"stream": "deliver.>"}]},
        "B": {"jetstream": "enabled", "users": [{"user": "b", "password": "b"}],
              "imports": [{"service": {"account": "A", "subject": "$JS.API.>"}, "to": "$JS.A.API.>"},
                          {"stream": {"account": "A", "subject": "deliver.>"}}]},
    }
    server = NatsServer(config={"accounts": accounts})
    server.start()
    host = server.url.split("//", 1)[1]
    a = nats.connect(f"nats://a:a@{host}", name="account-a")
    b = nats.connect(f"nats://b:b@{host}", name="account-b")
    try:
        ja, jb = a.jetstream(), b.jetstream()
        ja.create_stream(name="ORIGIN", subjects=["origin.>"], storage="memory")
        ja.publish("origin.a", b"1")
        ja.publish("origin.b", b"2")
        with pytest.raises(nats.StreamNotFoundError):
            jb.stream("ORIGIN")  # B cannot see A's stream by itself
        source = StreamSource(name="ORIGIN", external=ExternalStream(api="$JS.A.API", deliver="deliver.agg"))
        agg = jb.create_stream(name="AGG", storage="memory", sources=[source])
        sources = agg.cached_info.config.sources
        assert sources is not None and sources[0].external == ExternalStream(api="$JS.A.API", deliver="deliver.agg")
        assert wait_until(lambda: agg.info().state.messages == 2, timeout=10)
        assert [agg.get_msg(1).data, agg.get_msg(2).data] == [b"1", b"2"]
    finally:
        a.close()
        b.close()
        server.close()


@pytest.mark.cluster
def test_placement_chooses_servers_by_cluster_and_tags() -> None:
    with NatsCluster(3, config={"server_tags": ["ssd", "eu"]}) as cluster:
        nc = nats.connect(cluster.urls, name="placement")
        try:
            js = nc.jetstream()
            assert wait_until(lambda: _has_meta_leader(js), timeout=20)
            st = js.create_stream(name="PLACED", subjects=["placed.>"], storage="memory",
                                  placement=Placement(cluster=cluster.name, tags=["ssd"]))
            info = st.info()
            assert info.config.placement == Placement(cluster=cluster.name, tags=["ssd"])
            assert info.cluster is not None and info.cluster.name == cluster.name
            for refused in (Placement(tags=["hdd"]), Placement(cluster="elsewhere")):
                with pytest.raises(nats.JetStreamError) as err:
                    js.create_stream(name="NOWHERE", subjects=["nowhere.>"], storage="memory", placement=refused)
                assert err.value.err_code in (10005, 10074)  # no server (or no cluster) matches
            kv = js.create_key_value(bucket="placed", storage="memory", placement=Placement(tags=["eu"]))
            assert kv.status().stream_info.config.placement == Placement(tags=["eu"])
            with pytest.raises(nats.JetStreamError):
                js.create_object_store(bucket="nowhere", storage="memory", placement=Placement(tags=["us"]))
        finally:
            nc.close()


def _has_meta_leader(js: JetStream) -> bool:
    try:
        js.account_info(timeout=2)
    except nats.NatsError:
        return False
    return True
