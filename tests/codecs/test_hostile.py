"""Payloads built to break a decoder: each is a decode error like any other, never another exception."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync import Msg, PayloadDecodeError
from natsjs_sync.codecs import JSON, MSGPACK, Codec, TypedMsg
from natsjs_sync.errors import ServiceError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.micro import ServiceClient, add_service
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

# A few kilobytes: past msgspec's nesting limit, far under any max_payload. The
# nesting sits in a field the type does not have: msgspec still descends into it.
DEEP_JSON = b'{"id": 1, "item": "tea", "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"
DEEP_MSGPACK = b"\x83\xa2id\x01\xa4item\xa3tea\xa5extra" + b"\x91" * 5000 + b"\xc0"


class Order(msgspec.Struct):
    id: int
    item: str


class Picky(Codec):
    """A codec of the user's that says no with a plain ValueError, as its docs allow."""

    content_type = "text/x-picky"

    def encode(self, value: Any) -> bytes:
        return str(value).encode()

    def decode(self, data: bytes | bytearray | memoryview, type_: type) -> Any:
        if bytes(data) != b"ok":
            raise ValueError("picky says no")
        return "ok"


@pytest.mark.parametrize(("codec", "data"), [(JSON, DEEP_JSON), (MSGPACK, DEEP_MSGPACK)], ids=["json", "msgpack"])
def test_deep_nesting_is_a_decode_error(codec: Codec, data: bytes) -> None:
    with pytest.raises(PayloadDecodeError, match="nested too deeply"):
        codec.decode(data, Any)
    with pytest.raises(PayloadDecodeError):
        codec.decode(data, Order)


@pytest.mark.parametrize(("codec", "type_", "bad", "good", "value"),
                         [(JSON, Order, DEEP_JSON, b'{"id": 2, "item": "jam"}', Order(2, "jam")),
                          (MSGPACK, Order, DEEP_MSGPACK, MSGPACK.encode(Order(2, "jam")), Order(2, "jam")),
                          (Picky(), str, b"no", b"ok", "ok")],
                         ids=["deep-json", "deep-msgpack", "user-codec-valueerror"])
def test_dead_letter_callback_gets_every_bad_payload(nc: nats.Client, codec: Codec, type_: type, bad: bytes,
                                                     good: bytes, value: object) -> None:
    subject = "hostile." + next_nuid()
    dead: list[bytes] = []
    sub = nc.subscribe(subject).typed(type_, codec=codec, on_decode_error=lambda m, e: dead.append(m.data))
    nc.publish(subject, bad)
    nc.publish(subject, bad)
    nc.publish(subject, good)
    assert sub.next_msg(5).value == value
    assert dead == [bad, bad]


def test_jetstream_fetch_sends_a_deep_payload_to_the_callback(js: JetStream, stream: Stream) -> None:
    subject = f"{stream.name}.deep"
    js.publish(subject, DEEP_JSON)
    js.publish(subject, JSON.encode(Order(2, "jam")))
    dead: list[int] = []

    def dead_letter(msg: Msg, exc: PayloadDecodeError) -> None:
        dead.append(exc.stream_sequence or 0)
        msg.term()

    consumer = stream.create_consumer(durable_name="deep", ack_policy="explicit").typed(
        Order, on_decode_error=dead_letter)
    got = [t.value for t in consumer.fetch(2, max_wait=5)]
    assert got == [Order(2, "jam")]
    assert dead == [1]


def test_typed_endpoint_answers_400_for_a_deep_payload(nc: nats.Client) -> None:
    service = add_service(nc, name="hostile", version="1.0.0")
    try:
        service.add_endpoint("deep", lambda o: o, request_type=Order, response_type=Order)
        nc.flush()
        with pytest.raises(ServiceError) as info:
            ServiceClient(nc).request("deep", DEEP_JSON)
        assert info.value.code == "400"
    finally:
        service.stop()


def test_typed_msg_keeps_working_after_a_dead_letter(nc: nats.Client) -> None:
    subject = "hostile." + next_nuid()
    typed = nc.typed(subject, Order)
    seen: list[TypedMsg[Order]] = []
    sub = typed.subscribe(on_decode_error=lambda m, e: None, max_msgs=3)
    nc.publish(subject, DEEP_JSON)
    typed.publish(Order(1, "a"))
    typed.publish(Order(2, "b"))
    seen.extend(sub)
    assert [m.value.id for m in seen] == [1, 2]


def test_a_poll_past_a_dead_letter_returns_the_message_already_there(nc: nats.Client) -> None:
    """next_msg(0) returns a pending message untyped; typed, a dead letter in front of it does not hide it."""
    subject = "hostile." + next_nuid()
    dead: list[bytes] = []
    sub = nc.subscribe(subject)
    typed = sub.typed(Order, on_decode_error=lambda m, e: dead.append(m.data))
    fence = nc.subscribe(subject + ".fence")
    nc.publish(subject, b"bad")
    nc.publish(subject, b"worse")
    nc.publish(subject, JSON.encode(Order(1, "tea")))
    nc.publish(subject + ".fence", b"")
    fence.next_msg(5)  # sent after the three on one connection: they were delivered before it
    assert typed.next_msg(0).value == Order(1, "tea")
    assert dead == [b"bad", b"worse"]
    with pytest.raises(nats.TimeoutError):
        typed.next_msg(0)  # nothing left: no wait, and no spin


def test_a_header_block_that_does_not_parse_is_a_dead_letter(nc: nats.Client, shared_server: NatsServer) -> None:
    """The server passes any publisher's header block on as sent; one that does not parse is a bad message."""
    subject = "hostile." + next_nuid()
    dead: list[PayloadDecodeError] = []
    typed = nc.subscribe(subject).typed(Order, on_decode_error=lambda m, e: dead.append(e))
    nc.flush()
    block = b"NATS/1.0\r\nno colon here\r\n\r\n"
    body = JSON.encode(Order(1, "tea"))
    host, port = shared_server.url.removeprefix("nats://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.recv(4096)  # INFO
        raw.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nHPUB %b %d %d\r\n%b%b\r\nPUB %b %d\r\n%b\r\nPING\r\n'
                    % (subject.encode(), len(block), len(block) + len(body), block, body,
                       subject.encode(), len(body), body))
        assert raw.recv(4096).endswith(b"PONG\r\n")
    assert typed.next_msg(5).value == Order(1, "tea")  # the second one
    assert len(dead) == 1 and "header block" in dead[0].reason and dead[0].subject == subject
    with pytest.raises(PayloadDecodeError, match="header block"):
        nats.Msg(subject, 1, "", block, body).decode(Order)


def test_a_late_dead_letter_does_not_stretch_the_timeout_of_next_msg(nc: nats.Client) -> None:
    """The timeout counts from the call: a dead letter at its end leaves no new budget to wait in."""
    subject = f"late.{next_nuid()}"
    sub = nc.subscribe(subject)
    nc.flush()
    dead: list[bytes] = []
    view = sub.typed(Order, on_decode_error=lambda msg, exc: dead.append(msg.data))
    # The dead letter comes 2 s into a 2.5 s wait: a timeout started again there ends 4.5 s after
    # the call at the earliest, the right one at 2.5 s; the bound between them leaves a loaded
    # machine 1.5 s to be late in.
    sender = threading.Timer(2.0, lambda: nc.publish(subject, b"not json"))
    sender.start()
    started = time.monotonic()
    with pytest.raises(nats.TimeoutError):
        view.next_msg(2.5)
    took = time.monotonic() - started
    sender.join()
    assert dead in ([b"not json"], [])  # (none when a loaded machine ran the timer late)
    assert took < 4.0, took
