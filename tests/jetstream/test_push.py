"""Legacy push consumers (nats-py's js.subscribe): binding, queue groups, flow control, heartbeats."""

from __future__ import annotations

import threading

import pytest

import natsjs_sync as nats
from natsjs_sync import Msg
from natsjs_sync.jetstream import JetStream, PushSubscription, Stream

from ..conftest import wait_until


def _fill(js: JetStream, subject: str, n: int, size: int = 0) -> None:
    pad = b"." * size
    for i in range(n):
        js.publish_async(subject, str(i).encode() + pad)
    js.publish_async_complete(timeout=20)


def test_ephemeral_push_iterate_and_unsubscribe_deletes_consumer(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 20)
    # The server would remove the consumer on its own only after 60 s idle: what
    # removes it within the wait below is the unsubscribe's delete.
    sub = js.subscribe(f"{stream.name}.>", inactive_threshold=60.0)
    assert isinstance(sub, PushSubscription)
    got = []
    for msg in sub.messages:
        got.append(int(msg.data))
        msg.ack()
        if len(got) == 20:
            break
    assert got == list(range(20))
    consumer = sub.consumer
    assert consumer in list(stream.consumer_names())
    sub.unsubscribe()
    # The delete can still be under way on a loaded machine (its reply later than
    # the client waits for it): wait for the server's view.
    assert wait_until(lambda: consumer not in list(stream.consumer_names()), timeout=10), \
        "the unsubscribed ephemeral consumer was not deleted"


def test_durable_survives_and_rebinds(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 10)
    sub = js.subscribe(f"{stream.name}.a", durable="proc", ack_wait=1.0)
    for _ in range(4):
        sub.next_msg(timeout=2).ack_sync()
    with pytest.raises(nats.JetStreamError):  # one subscriber at a time on a non-queue push consumer
        js.subscribe(f"{stream.name}.a", durable="proc")
    sub.unsubscribe()
    assert "proc" in list(stream.consumer_names())  # durable: kept
    # Bound again, it continues where the acks left off (what was pushed to the
    # old subscription and never acked comes again after the 1 s ack wait).
    assert wait_until(lambda: not stream.consumer("proc").cached_info.push_bound, timeout=5)
    sub2 = js.subscribe(f"{stream.name}.a", durable="proc")
    assert sorted(int(sub2.next_msg(timeout=3).data) for _ in range(6)) == [4, 5, 6, 7, 8, 9]
    sub2.unsubscribe()


def test_callback_auto_acks_unless_manual(js: JetStream, stream: Stream) -> None:
    done = threading.Event()
    seen: list[Msg] = []

    def cb(msg: Msg) -> None:
        seen.append(msg)
        if len(seen) == 5:
            done.set()

    sub = js.subscribe(f"{stream.name}.a", durable="auto", cb=cb)
    _fill(js, f"{stream.name}.a", 5)
    assert done.wait(5)
    assert wait_until(lambda: all(m.is_acked for m in seen), timeout=5)
    assert wait_until(lambda: stream.consumer("auto").info().num_ack_pending == 0, timeout=5)
    sub.unsubscribe()

    manual: list[Msg] = []
    got = threading.Event()
    sub = js.subscribe(f"{stream.name}.b", durable="manual", cb=lambda m: (manual.append(m), got.set()),
                       manual_ack=True)
    js.publish(f"{stream.name}.b", b"x")
    assert got.wait(5)
    assert not manual[0].is_acked
    assert stream.consumer("manual").info().num_ack_pending == 1
    sub.unsubscribe()


def test_queue_group_splits_work(js: JetStream, stream: Stream) -> None:
    counts = [0, 0]
    total = 400
    lock = threading.Lock()
    done = threading.Event()

    def make(i: int):  # type: ignore[no-untyped-def]
        def cb(msg: Msg) -> None:
            with lock:
                counts[i] += 1
                if sum(counts) == total:
                    done.set()
        return cb

    subs = [js.subscribe(f"{stream.name}.q", queue="workers", cb=make(i)) for i in range(2)]
    assert subs[0].consumer == subs[1].consumer == "workers"
    _fill(js, f"{stream.name}.q", total)
    assert done.wait(10)
    assert sum(counts) == total and all(c > 0 for c in counts)
    with pytest.raises(nats.JetStreamError):  # wrong queue for that consumer
        js.subscribe(f"{stream.name}.q", durable="workers")
    for s in subs:
        s.unsubscribe()


def test_flow_control_and_heartbeats_never_reach_the_user(js: JetStream, stream: Stream) -> None:
    """With flow control on and a reader that keeps a small backlog, every message
    arrives once, no status message is seen, and the server is never stalled for long."""
    total = 3000
    _fill(js, f"{stream.name}.f", total, size=1000)
    sub = js.subscribe(f"{stream.name}.f", durable="fc", flow_control=True, idle_heartbeat=0.5,
                       ack_policy="none")
    got = []
    for _ in range(total):
        msg = sub.next_msg(timeout=5)
        assert msg.status is None and msg.reply and msg.reply.startswith("$JS.ACK.")
        got.append(int(msg.data.split(b".")[0]))
    assert got == list(range(total))
    # Idle now: heartbeats arrive (and are swallowed) while next_msg times out.
    before = sub.last_activity
    for _ in range(10):  # bounded: a loaded machine may read the heartbeats of a wait after it
        with pytest.raises(nats.TimeoutError):
            sub.next_msg(timeout=1.2)
        if sub.last_activity > before:
            break
    assert sub.last_activity > before
    sub.unsubscribe()


def test_start_options_passed_by_name(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.s", 10)
    sub = js.subscribe(f"{stream.name}.s", deliver_policy="by_start_sequence", opt_start_seq=8)
    assert [int(sub.next_msg(timeout=2).data) for _ in range(3)] == [7, 8, 9]
    sub.unsubscribe()
    with pytest.raises(TypeError):
        js.subscribe(f"{stream.name}.s", no_such_option=1)


def test_ordered_subscription(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.o", 50)
    sub = js.subscribe(f"{stream.name}.o", ordered_consumer=True)
    assert [int(m.data) for m in (sub.next_msg(timeout=2) for _ in range(50))] == list(range(50))
    sub.unsubscribe()


def test_go_style_push_consumer_consumes_with_flow_control(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    for i in range(200):
        js.publish(f"{name}.a", str(i).encode())
    deliver = js.nc.new_inbox()
    pc = js.create_push_consumer(name, durable_name="gopush", deliver_subject=deliver, ack_policy="explicit",
                                 flow_control=True, idle_heartbeat=1.0)
    assert js.push_consumer(name, "gopush").cached_info.config.deliver_subject == deliver
    seen: list[int] = []
    done = threading.Event()

    def handler(msg: nats.Msg) -> None:
        seen.append(int(msg.data))
        msg.ack()
        if len(seen) == 200:
            done.set()

    with pc.consume(handler) as ctx:
        assert done.wait(10)
        with pytest.raises(nats.JetStreamError, match="already bound"):
            pc.consume(handler)
    assert ctx.closed
    assert seen == list(range(200))
    with pytest.raises(ValueError, match="deliver_subject"):
        js.create_push_consumer(name, durable_name="nodeliver")


def test_go_style_push_consumer_reports_missed_heartbeats(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    pc = js.create_push_consumer(name, durable_name="hb", deliver_subject=js.nc.new_inbox(), ack_policy="none",
                                 idle_heartbeat=0.5)
    errors: list[Exception] = []
    missed = threading.Event()
    ctx = pc.consume(lambda m: None, error_cb=lambda e: (errors.append(e), missed.set()))
    try:
        js.delete_consumer(name, "hb")  # its heartbeats stop
        assert missed.wait(10)
        assert isinstance(errors[0], nats.NoHeartbeatError)
    finally:
        ctx.stop()


def test_push_consumers_are_managed_from_the_stream_handle(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    _fill(js, f"{name}.s", 5)
    deliver = js.nc.new_inbox()
    pc = stream.create_push_consumer(durable_name="fromstream", deliver_subject=deliver, ack_policy="none")
    assert pc.cached_info.stream_name == name and stream.push_consumer("fromstream").cached_info.name == "fromstream"
    updated = stream.update_push_consumer(durable_name="fromstream", deliver_subject=deliver, ack_policy="none",
                                          description="changed")
    assert updated.info().config.description == "changed"
    again = stream.create_or_update_push_consumer(durable_name="fromstream", deliver_subject=deliver,
                                                  ack_policy="none", description="again")
    assert again.cached_info.config.description == "again"
    fresh = js.create_or_update_push_consumer(name, durable_name="made", deliver_subject=js.nc.new_inbox(),
                                              ack_policy="none")
    assert fresh.cached_info.name == "made"
    seen: list[bytes] = []
    done = threading.Event()

    def handler(msg: nats.Msg) -> None:
        seen.append(msg.data)
        if len(seen) == 5:
            done.set()

    with again.consume(handler):
        assert done.wait(10)
    assert seen == [b"0", b"1", b"2", b"3", b"4"]
    with pytest.raises(nats.ConsumerNotFoundError):
        stream.update_push_consumer(durable_name="never", deliver_subject=deliver, ack_policy="none")
