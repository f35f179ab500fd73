"""Acknowledgements and message metadata."""

from __future__ import annotations

import datetime
import time

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import MsgAlreadyAckdError, NotJSMessageError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.jetstream.message import parse_metadata


def test_metadata_both_reply_formats() -> None:
    old = "$JS.ACK.ORDERS.C1.3.40.12.1700000000123456789.5"
    md = parse_metadata(old)
    assert (md.stream, md.consumer, md.num_delivered, md.sequence.stream, md.sequence.consumer,
            md.num_pending, md.domain) == ("ORDERS", "C1", 3, 40, 12, 5, None)
    assert md.timestamp == datetime.datetime.fromtimestamp(1700000000.123456, datetime.timezone.utc)
    assert md.timestamp_ns == 1700000000123456789
    new = "$JS.ACK.hub.ACCHASH.ORDERS.C1.3.40.12.1700000000123456789.5.tok"
    md2 = parse_metadata(new)
    assert (md2.domain, md2.stream, md2.sequence.stream) == ("hub", "ORDERS", 40)
    assert parse_metadata("$JS.ACK._.ACC.S.C.1.2.3.4.5").domain is None
    for bad in (None, "", "inbox.x", "$JS.ACK.too.few", "$JS.ACK.S.C.x.2.3.4.5"):
        with pytest.raises(NotJSMessageError):
            parse_metadata(bad)


def test_metadata_from_server(js: JetStream, stream: Stream) -> None:
    for i in range(3):
        js.publish(f"{stream.name}.a", str(i).encode())
    cons = stream.create_consumer(durable_name="MD")
    msg = cons.next(timeout=2)
    md = msg.metadata
    assert (md.stream, md.consumer, md.sequence.stream, md.sequence.consumer) == (stream.name, "MD", 1, 1)
    assert md.num_delivered == 1 and md.num_pending == 2
    assert abs((datetime.datetime.now(datetime.timezone.utc) - md.timestamp).total_seconds()) < 60


def test_ack_twice_and_core_messages(js: JetStream, stream: Stream, nc: nats.Client) -> None:
    js.publish(f"{stream.name}.a", b"1")
    msg = stream.create_consumer(durable_name="A2").next(timeout=2)
    assert not msg.is_acked
    msg.ack_sync(timeout=2)
    assert msg.is_acked
    with pytest.raises(MsgAlreadyAckdError):
        msg.ack()
    with pytest.raises(MsgAlreadyAckdError):
        msg.nak()
    sub = nc.subscribe("plain.x")
    nc.publish("plain.x", b"hi")
    plain = sub.next_msg(timeout=2)
    with pytest.raises(NotJSMessageError):
        plain.ack()
    with pytest.raises(NotJSMessageError):
        _ = plain.metadata


def test_nak_redelivers_and_nak_delay_waits(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"job")
    cons = stream.create_consumer(durable_name="NK", ack_wait=30.0)
    first = cons.next(timeout=2)
    first.nak()
    again = cons.next(timeout=2)
    assert again.metadata.num_delivered == 2
    t0 = time.monotonic()
    # 1.5 s: a pull of 0.3 s sent late (the test thread stalled on a loaded machine) still ends
    # long before the delay does.
    again.nak(delay=1.5)
    with pytest.raises(nats.TimeoutError):
        cons.next(timeout=0.3)
    third = cons.next(timeout=5)
    assert time.monotonic() - t0 >= 1.45
    assert third.metadata.num_delivered == 3
    third.ack_sync()
    assert cons.info().num_ack_pending == 0


def test_term_stops_redelivery(nc: nats.Client, js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"poison")
    # term() is fire-and-forget: the ack wait must outlast its way to the server
    # on a loaded machine (at 0.5 s a stall redelivered before the term landed).
    ack_wait = 2.0
    cons = stream.create_consumer(durable_name="TM", ack_wait=ack_wait)
    cons.next(timeout=5).term(reason="cannot parse")
    nc.flush(timeout=5)  # the term is at the server
    with pytest.raises(nats.TimeoutError):
        cons.next(timeout=2 * ack_wait)  # twice the ack wait: no redelivery
    assert cons.info().ack_floor.stream_seq == 1


def test_in_progress_extends_ack_wait(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"slow")
    # Each in_progress comes a quarter of the ack wait after the last, leaving
    # 1.5 s for a loaded machine's stalls (at 0.6 s, with 0.2 s steps, a 0.4 s
    # stall was a redelivery).
    ack_wait, step = 2.0, 0.5
    cons = stream.create_consumer(durable_name="WP", ack_wait=ack_wait)
    msg = cons.next(timeout=5)
    # Keep telling the server we work for more than twice the ack wait: it never redelivers.
    for _ in range(9):
        msg.in_progress()
        with pytest.raises(nats.TimeoutError):
            cons.next(timeout=step)
    msg.ack_sync()
    with pytest.raises(nats.TimeoutError):
        cons.next(timeout=ack_wait + 0.5)


def test_unacked_messages_are_redelivered(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"lost")
    cons = stream.create_consumer(durable_name="RD", ack_wait=0.4)
    first = cons.next(timeout=2)
    second = cons.next(timeout=3)
    assert first.data == second.data == b"lost"
    assert second.metadata.num_delivered == 2
