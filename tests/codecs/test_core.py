"""Typed publish, request/reply and subscribe on core NATS, against a real server."""

from __future__ import annotations

import threading

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync import PayloadDecodeError
from natsjs_sync.codecs import JSON, MSGPACK, TypedMsg
from natsjs_sync.protocol.nuid import next_nuid


class Order(msgspec.Struct):
    id: int
    item: str


class Receipt(msgspec.Struct):
    order_id: int
    total: float


def test_publish_carries_the_content_type_and_decodes(nc: nats.Client) -> None:
    subject = "orders." + next_nuid()
    raw = nc.subscribe(subject)
    typed = nc.typed(subject, Order).subscribe()
    nc.typed(subject, Order).publish(Order(1, "tea"))
    nc.typed(subject, Order, codec=MSGPACK).publish(Order(2, "cake"), headers={"X-Trace": "t1"})
    first, second = raw.next_msg(5), raw.next_msg(5)
    assert first.headers == {"content-type": "application/json"}
    assert first.data == b'{"id":1,"item":"tea"}'
    assert second.headers == {"X-Trace": "t1", "content-type": "application/msgpack"}
    assert first.decode(Order) == Order(1, "tea")
    assert second.decode(Order) == Order(2, "cake")  # by its header, though JSON is the default
    got = [typed.next_msg(5), typed.next_msg(5)]
    assert [m.value for m in got] == [Order(1, "tea"), Order(2, "cake")]
    assert all(isinstance(m, TypedMsg) and m.subject == subject for m in got)


def test_untyped_publish_decodes_as_the_caller_says(nc: nats.Client) -> None:
    subject = "plain." + next_nuid()
    sub = nc.subscribe(subject)
    nc.publish(subject, msgspec.msgpack.encode({"id": 3, "item": "jam"}))
    msg = sub.next_msg(5)
    assert msg.headers is None
    assert msg.decode(Order, MSGPACK) == Order(3, "jam")
    with pytest.raises(PayloadDecodeError):
        msg.decode(Order)  # JSON by default: these bytes are not JSON


def test_typed_request_and_reply(nc: nats.Client) -> None:
    subject = "price." + next_nuid()

    def price(req: TypedMsg[Order]) -> None:
        req.respond(Receipt(req.value.id, 2.5))

    nc.typed(subject, Order).subscribe(price)
    nc.flush()
    reply = nc.typed(subject, Order, reply_type=Receipt).request(Order(7, "tea"), timeout=5)
    assert reply.value == Receipt(7, 2.5)
    assert reply.headers == {"content-type": "application/json"}
    # a reply type per call
    assert nc.typed(subject, Order).request(Order(8, "tea"), timeout=5, reply_type=Receipt).value == Receipt(8, 2.5)
    assert nc.typed(subject, Order).request(Order(8, "tea"), timeout=5).value == {"order_id": 8, "total": 2.5}


def test_a_bad_payload_raises_naming_subject_type_and_field(nc: nats.Client) -> None:
    subject = "bad." + next_nuid()
    sub = nc.typed(subject, Order).subscribe()
    nc.publish(subject, b'{"id": "one", "item": "tea"}', headers={"content-type": "application/json"})
    with pytest.raises(PayloadDecodeError) as info:
        sub.next_msg(5)
    exc = info.value
    assert (exc.subject, exc.type, exc.field, exc.stream_sequence) == (subject, Order, "$.id", None)
    assert subject in str(exc) and "Order" in str(exc) and "$.id" in str(exc)


def test_dead_letters_go_to_the_callback_and_the_loop_goes_on(nc: nats.Client) -> None:
    subject = "dl." + next_nuid()
    dead: list[tuple[bytes, str | None]] = []
    good: list[Order] = []
    done = threading.Event()

    def on_order(m: TypedMsg[Order]) -> None:
        good.append(m.value)
        if len(good) == 2:
            done.set()

    nc.typed(subject, Order).subscribe(on_order, on_decode_error=lambda m, e: dead.append((m.data, e.field)))
    iterated = nc.typed(subject, Order).subscribe(on_decode_error=lambda m, e: dead.append((m.data, e.field)),
                                                  max_msgs=3)
    nc.flush()
    nc.typed(subject, Order).publish(Order(1, "a"))
    nc.publish(subject, b'{"id": 2}')
    nc.typed(subject, Order).publish(Order(3, "c"))
    assert done.wait(10)
    assert good == [Order(1, "a"), Order(3, "c")]
    assert [m.value.id for m in iterated] == [1, 3]  # the iteration skipped the bad one and ended at max_msgs
    assert dead == [(b'{"id": 2}', "$.item")] * 2


def test_a_failing_handler_is_reported_not_fatal(nc: nats.Client) -> None:
    """Without a dead-letter callback the decode error goes where callback errors go; later messages still come."""
    subject = "cb." + next_nuid()
    got = threading.Event()
    values: list[int] = []

    def on_order(m: TypedMsg[Order]) -> None:
        values.append(m.value.id)
        got.set()

    nc.typed(subject, Order, codec=JSON).subscribe(on_order)
    nc.flush()
    nc.publish(subject, b"not json")
    nc.typed(subject, Order).publish(Order(5, "e"))
    assert got.wait(10)
    assert values == [5]


def test_typed_publish_takes_the_general_path_when_the_outlet_declines(nc: nats.Client) -> None:
    """A subject gone from the validated-subject cache, a payload past max_payload: same frame, or the error."""
    from natsjs_sync.protocol import subjects

    subject = "general." + next_nuid()
    view = nc.typed(subject, Order)
    sub = nc.subscribe(subject)
    subjects.PUB_SUBJECTS.pop(subject, None)  # as when the cache was cleared for being full
    view.publish(Order(1, "tea"))
    msg = sub.next_msg(5)
    assert (msg.headers, msg.decode(Order)) == ({"content-type": "application/json"}, Order(1, "tea"))
    with pytest.raises(nats.MaxPayloadError):
        view.publish(Order(2, "x" * nc.max_payload))
    with pytest.raises(nats.BadSubjectError):
        nc.typed("bad subject", Order)  # checked when the view is made
