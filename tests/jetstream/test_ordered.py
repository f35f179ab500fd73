"""Ordered consumer (ADR-17): each stream message once and in order, whatever happens."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import natsjs_sync as nats
from natsjs_sync import Msg
from natsjs_sync.errors import JetStreamNotEnabledError
from natsjs_sync.jetstream import JetStream, OrderedConsumer, Stream
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until


def _publish(js: JetStream, subject: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        js.publish_async(subject, str(i).encode())
    js.publish_async_complete(timeout=10)


def test_messages_in_order(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    _publish(js, f"{name}.a", 300)
    oc = js.ordered_consumer(name)
    got = []
    with oc.messages(max_messages=50) as it:
        for msg in it:
            got.append(int(msg.data))
            if len(got) == 300:
                break
    assert got == list(range(300))


def test_filter_and_start_sequence(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    for i in range(20):
        js.publish(f"{name}.{'a' if i % 2 else 'b'}", str(i).encode())
    oc = js.ordered_consumer(name, filter_subjects=[f"{name}.a"], deliver_policy="by_start_sequence",
                             opt_start_seq=10)
    got = [int(m.data) for m in oc.fetch(100, max_wait=3)]  # the wait covers the consumer's creation too
    assert got == [i for i in range(9, 20) if i % 2]


def test_fetch_and_next_continue_where_they_left(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    _publish(js, f"{name}.x", 10)
    oc = js.ordered_consumer(name)
    first = [int(m.data) for m in oc.fetch(4, max_wait=2)]
    assert first == [0, 1, 2, 3]
    assert int(oc.next(timeout=2).data) == 4
    rest = [int(m.data) for m in oc.fetch(10, max_wait=3)]
    assert rest == [5, 6, 7, 8, 9]
    with pytest.raises(TimeoutError):
        oc.next(timeout=0.3)


def test_exact_sequence_while_consumer_deleted_under_it(js: JetStream, stream: Stream) -> None:
    """The consumer is deleted three times mid-read: the reader still sees 0..N-1 once each."""
    name = stream.cached_info.config.name
    total = 2000
    _publish(js, f"{name}.x", total)
    oc = js.ordered_consumer(name)
    got: list[int] = []
    with oc.messages(max_messages=100, expires=5.0) as it:
        for msg in it:
            got.append(int(msg.data))
            if len(got) in (300, 900, 1500):
                js.delete_consumer(name, oc.name)  # type: ignore[arg-type]
            if len(got) == total:
                break
    assert got == list(range(total))
    assert oc.resets >= 3


def test_consume_while_publishing(js: JetStream, stream: Stream) -> None:
    name = stream.cached_info.config.name
    total = 500
    got: list[int] = []
    done = threading.Event()

    def handler(msg: object) -> None:
        got.append(int(msg.data))  # type: ignore[attr-defined]
        if len(got) == total:
            done.set()

    ctx = js.ordered_consumer(name).consume(handler, max_messages=64)
    try:
        _publish(js, f"{name}.y", total)
        assert done.wait(15)
    finally:
        ctx.stop()
    assert got == list(range(total))


def test_sequence_check_reads_both_reply_subject_formats(js: JetStream, stream: Stream) -> None:
    """The check that keeps order, fed reply subjects a server may send: the
    usual one, the domain form of ADR-15 (no server here sends it), a stale
    one from a consumer replaced by a reset, and a skipped consumer sequence."""
    name = stream.cached_info.config.name
    oc = js.ordered_consumer(name)
    oc.fetch(1, max_wait=2)  # creates the consumer (within the wait, on a loaded machine too); the stream is empty
    assert oc.name is not None

    def verdict(reply: str | None) -> str:
        return oc.accept(Msg(f"{name}.x", reply=reply))

    assert verdict(f"$JS.ACK.{name}.{oc.name}.1.7.1.1700000000000000000.3") == "ok"
    assert (oc._stream_seq, oc._consumer_seq) == (7, 1)
    assert verdict(f"$JS.ACK.hub.ACCHASH.{name}.{oc.name}.1.9.2.1700000000000000000.2.r4nd") == "ok"
    assert (oc._stream_seq, oc._consumer_seq) == (9, 2)
    assert verdict(f"$JS.ACK.{name}.{oc.name}_old.1.10.3.1700000000000000000.1") == "stale"
    assert verdict(f"$JS.ACK.{name}.{oc.name}.1.10.x.1700000000000000000.1") == "stale"
    assert verdict(None) == "stale"
    assert verdict(f"$JS.ACK.{name}.{oc.name}.1.12.5.1700000000000000000.0") == "gap"
    assert (oc._stream_seq, oc._consumer_seq) == (9, 2)  # nothing taken from the gap
    assert verdict(f"$JS.ACK.{name}.{oc.name}.1.10.3.1700000000000000000.0") == "ok"
    gone = oc.name
    oc.delete()
    assert verdict(f"$JS.ACK.{name}.{gone}.1.11.4.1700000000000000000.0") == "stale"  # no consumer now


# ---------------------------------------------------------------------- the first create


def _outcome(oc: OrderedConsumer, start: Callable[[], object], bound: float = 10.0) -> BaseException | None:
    """What ``start()`` raised, waiting at most ``bound`` seconds (then it is
    cancelled: a start that retries for ever must not hang the test)."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            ctx = start()
        except BaseException as exc:
            result.append(exc)
        else:
            ctx.stop()  # type: ignore[attr-defined]
            result.append(None)

    t = threading.Thread(target=run, name="ordered-start", daemon=True)
    t.start()
    t.join(bound)
    if t.is_alive():
        oc.cancel()
        t.join(bound)
    assert result, "the start did not return"
    return result[0]


def _starts(oc: OrderedConsumer) -> list[Callable[[], object]]:
    return [lambda: oc.messages(expires=2.0), lambda: oc.consume(lambda m: None, expires=2.0)]


def test_messages_and_consume_raise_on_a_server_without_jetstream() -> None:
    """Nobody answers the API (503) and the server announces no JetStream: a
    definite error at once, not retries for ever."""
    with NatsServer(jetstream=False) as server, nats.connect(server.url, name="no-js") as nc:
        oc = nc.jetstream().ordered_consumer("NOPE")
        for start in _starts(oc):
            assert isinstance(_outcome(oc, start), JetStreamNotEnabledError)


def test_messages_and_consume_raise_for_an_account_without_jetstream() -> None:
    """The server has JetStream, the account does not (err_code 10039)."""
    accounts = {"NOJS": {"users": [{"user": "a", "password": "a"}]}}
    with NatsServer(config={"accounts": accounts}) as server, \
            nats.connect(server.url, user="a", password="a", name="no-js-account") as nc:
        oc = nc.jetstream().ordered_consumer("NOPE")
        for start in _starts(oc):
            err = _outcome(oc, start)
            assert isinstance(err, JetStreamNotEnabledError) and err.err_code == 10039


def test_the_first_create_has_the_api_timeout(nats_server: NatsServer, nats_fault_proxy: FaultProxy) -> None:
    """A server that does not answer: messages() and consume() give up after the
    context's API timeout instead of retrying for ever."""
    with nats.connect(nats_server.url, name="admin") as admin:
        admin.jetstream().create_stream(name="T", subjects=["T.>"], storage="memory")
    with nats.connect(nats_fault_proxy.url, name="stalled") as nc:
        oc = nc.jetstream(timeout=1.0).ordered_consumer("T")
        nats_fault_proxy.blackhole()
        try:
            for start in _starts(oc):
                assert isinstance(_outcome(oc, start), TimeoutError)
        finally:
            nats_fault_proxy.heal()


def test_start_hold_first_keeps_the_second_message_from_a_heal(js: JetStream, stream: Stream) -> None:
    """``start(hold_first=)`` keeps the first message for the first read. A background heal
    run right after ``next()`` returned it (before it was kept) used to keep the second
    message for the reader itself, which the first then replaced: the second was lost."""
    _publish(js, f"{stream.name}.a", 3)
    oc = js.ordered_consumer(stream.name)
    # Heartbeats give the iterator its background heal (ticks every 5 s: none in this test).
    it = oc.messages(max_messages=10, expires=30.0, heartbeat=5.0)
    real_next = it.next

    def next_then_heal(timeout: float | None = None) -> Msg:
        msg = real_next(timeout)
        # The interleaving, forced: the second message is queued, and a heal runs in the gap.
        sub = it._owned.sub
        assert sub is not None
        assert wait_until(lambda: sub.pending_msgs >= 1, timeout=10)
        it._on_idle_item(None)
        return msg

    it.next = next_then_heal  # type: ignore[method-assign]
    it.start(hold_first=5.0)
    del it.next  # type: ignore[method-assign]
    with it:
        assert [it.next(timeout=5).data for _ in range(3)] == [b"0", b"1", b"2"]


def test_a_consumer_deleted_while_its_messages_wait_unread_is_made_anew(js: JetStream, stream: Stream) -> None:
    """The pull was answered in full and its messages wait for a reader: no request is out,
    so no heartbeat can go missing. The consumer, deleted meanwhile, is still made anew in
    the background while nobody reads (as with heartbeats), and nothing is lost or repeated."""
    _publish(js, f"{stream.name}.a", 8)
    oc = js.ordered_consumer(stream.name)
    with oc.messages(max_messages=5, expires=30.0, heartbeat=0.5) as it:
        it.start()  # one request for 5: answered at once, the next is sent once they are read
        first = oc.name
        assert wait_until(lambda: oc.info().delivered.stream_seq == 5, timeout=10)
        js.delete_consumer(stream.name, first)  # type: ignore[arg-type]

        def made_anew() -> bool:
            return any(c.name != first for c in js.consumers_info(stream.name))

        assert wait_until(made_anew, timeout=20, interval=0.05), "no consumer made anew while nobody read"
        assert [int(it.next(timeout=5).data) for _ in range(8)] == list(range(8))


def test_stop_drops_the_messages_an_idle_heal_kept(js: JetStream, stream: Stream) -> None:
    """Messages the background heal took for the reader are received and not read:
    stop() drops them, and next() raises BadSubscriptionError as it does for the rest."""
    _publish(js, f"{stream.name}.a", 3)
    oc = js.ordered_consumer(stream.name)
    it = oc.messages(max_messages=10, heartbeat=0.2)
    it.start()
    assert wait_until(lambda: len(it._held) == 3, timeout=20), "the heal kept nothing"
    it.stop()
    with pytest.raises(nats.BadSubscriptionError):
        it.next(timeout=1)
