"""Typed JetStream: publish, and every consumer form (fetch, next, messages, consume, ordered, push)."""

from __future__ import annotations

import threading

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync import PayloadDecodeError
from natsjs_sync.codecs import MSGPACK, TypedMsg
from natsjs_sync.jetstream import JetStream, Stream


class Reading(msgspec.Struct):
    sensor: str
    value: float


def _fill(js: JetStream, stream: Stream, bad_at: int | None = None, n: int = 4) -> str:
    subject = f"{stream.name}.readings"
    view = js.typed(subject, Reading)
    for i in range(n):
        if i == bad_at:
            ack = js.publish(subject, b'{"sensor": "s", "value": "high"}', headers={"content-type": "application/json"})
        else:
            ack = view.publish(Reading(f"s{i}", float(i)), msg_id=f"r{i}")
        assert ack.seq == i + 1
    return subject


def test_publish_returns_the_pub_ack_and_dedupes(js: JetStream, stream: Stream) -> None:
    view = js.typed(f"{stream.name}.r", Reading, codec=MSGPACK)
    first = view.publish(Reading("a", 1.0), msg_id="one")
    again = view.publish(Reading("a", 1.0), msg_id="one")
    assert (first.seq, again.duplicate) == (1, True)
    fut = view.publish_async(Reading("b", 2.0))
    assert fut.result(10).seq == 2
    stored = stream.get_msg(1)
    assert stored.headers is not None and stored.headers["content-type"] == "application/msgpack"
    assert MSGPACK.decode(stored.data, Reading) == Reading("a", 1.0)


def test_fetch_next_and_messages(js: JetStream, stream: Stream) -> None:
    _fill(js, stream)
    cons = stream.create_consumer(durable_name="typed", ack_policy="explicit").typed(Reading)
    batch = cons.fetch(2, max_wait=5)
    got = list(batch)
    assert [m.value for m in got] == [Reading("s0", 0.0), Reading("s1", 1.0)]
    assert batch.error is None  # the batch's own attributes, through the view
    for m in got:
        m.ack_sync()
    one = cons.next(timeout=5)
    assert (one.value, one.metadata.sequence.stream) == (Reading("s2", 2.0), 3)
    one.ack()
    with cons.messages(stop_after=1) as it:
        assert [m.value.sensor for m in it] == ["s3"]


def test_a_bad_message_raises_with_its_stream_sequence(js: JetStream, stream: Stream) -> None:
    subject = _fill(js, stream, bad_at=1)
    cons = stream.create_consumer(durable_name="strict", ack_policy="explicit").typed(Reading)
    assert cons.next(timeout=5).value.sensor == "s0"
    with pytest.raises(PayloadDecodeError) as info:
        cons.next(timeout=5)
    exc = info.value
    assert (exc.subject, exc.stream_sequence, exc.type, exc.field) == (subject, 2, Reading, "$.value")
    assert "stream sequence 2" in str(exc)


def test_consume_hands_bad_messages_to_the_dead_letter_callback(js: JetStream, stream: Stream) -> None:
    _fill(js, stream, bad_at=2, n=5)
    dead: list[int] = []
    good: list[str] = []
    done = threading.Event()

    def dead_letter(msg: nats.Msg, exc: PayloadDecodeError) -> None:
        dead.append(exc.stream_sequence or 0)
        msg.term(str(exc)[:100])

    def handle(m: TypedMsg[Reading]) -> None:
        good.append(m.value.sensor)
        m.ack()
        if len(good) == 4:
            done.set()

    cons = stream.create_consumer(durable_name="dl", ack_policy="explicit")
    with cons.typed(Reading, on_decode_error=dead_letter).consume(handle):
        assert done.wait(10)
    assert good == ["s0", "s1", "s3", "s4"]
    assert dead == [3]


def test_iteration_skips_dead_letters(js: JetStream, stream: Stream) -> None:
    _fill(js, stream, bad_at=0, n=3)
    dead: list[nats.Msg] = []
    cons = stream.create_consumer(durable_name="it", ack_policy="none").typed(
        Reading, on_decode_error=lambda m, e: dead.append(m))
    assert cons.next(timeout=5).value.sensor == "s1"  # the bad first message went to the callback
    # One left: a fetch of one ends as soon as it has it (a fetch returns what it read by max_wait).
    assert [m.value.sensor for m in cons.fetch(1, max_wait=5)] == ["s2"]
    assert list(cons.fetch_no_wait(5)) == []
    assert len(dead) == 1 and dead[0].metadata.sequence.stream == 1


def test_ordered_consumer_every_form(js: JetStream, stream: Stream) -> None:
    _fill(js, stream)
    oc = js.ordered_consumer(stream.name).typed(Reading)
    assert [m.value.sensor for m in oc.fetch(2, max_wait=5)] == ["s0", "s1"]
    assert oc.next(timeout=5).value.sensor == "s2"
    with oc.messages() as it:
        assert it.next(timeout=5).value.sensor == "s3"
    got: list[str] = []
    done = threading.Event()

    def handle(m: TypedMsg[Reading]) -> None:
        got.append(m.value.sensor)
        if len(got) == 4:
            done.set()

    with js.ordered_consumer(stream.name).typed(Reading).consume(handle):
        assert done.wait(10)
    assert got == ["s0", "s1", "s2", "s3"]


def test_push_consumer(js: JetStream, stream: Stream) -> None:
    _fill(js, stream)
    pc = js.create_push_consumer(stream.name, durable_name="push", deliver_subject=js.nc.new_inbox(),
                                 ack_policy="explicit")
    got: list[str] = []
    done = threading.Event()

    def handle(m: TypedMsg[Reading]) -> None:
        got.append(m.value.sensor)
        m.ack()
        if len(got) == 4:
            done.set()

    with pc.typed(Reading).consume(handle):
        assert done.wait(10)
    assert got == ["s0", "s1", "s2", "s3"]


def test_nats_py_pull_subscription(js: JetStream, stream: Stream) -> None:
    subject = _fill(js, stream, bad_at=1, n=3)
    dead: list[int] = []
    psub = js.pull_subscribe(subject, durable="np").typed(Reading, on_decode_error=lambda m, e: dead.append(
        e.stream_sequence or 0))
    got: list[str] = []
    for _ in range(5):  # a nats-py fetch returns what has come; the three may come in parts
        got += [m.value.sensor for m in psub.fetch(3, timeout=5)]
        if len(got) + len(dead) == 3:
            break
    assert got == ["s0", "s2"] and dead == [2]
