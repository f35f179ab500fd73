"""The sans-IO SOCKS5 client (RFC 1928/1929) and WebSocket permessage-deflate (RFC 7692),
driven byte by byte: every split of the proxy's answers, every split of compressed frames."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsjs_sync.errors import NatsConnectionError, ProtocolError
from natsjs_sync.protocol import websocket as ws
from natsjs_sync.protocol.socks5 import Socks5Handshake, connect_request

_OK_V4 = b"\x05\x00\x00\x01" + bytes([10, 0, 0, 1]) + struct.pack("!H", 4222)


def _drive(hs: Socks5Handshake, answers: bytes, split: int) -> list[bytes]:
    """Feed ``answers`` in pieces of ``split`` bytes, never more than ``needed``; returns what was sent."""
    sent = [hs.start()]
    pos = 0
    while not hs.done:
        take = min(split, hs.needed)
        assert take > 0
        out = hs.receive(answers[pos:pos + take])
        pos += take
        if out:
            sent.append(out)
    assert pos == len(answers)
    return sent


@pytest.mark.parametrize("split", [1, 2, 3, 7, 100])
def test_no_auth_connect_by_name(split: int) -> None:
    hs = Socks5Handshake("nats.internal", 4222)
    sent = _drive(hs, b"\x05\x00" + _OK_V4, split)
    assert sent == [b"\x05\x01\x00", b"\x05\x01\x00\x03\x0dnats.internal" + struct.pack("!H", 4222)]


@pytest.mark.parametrize("split", [1, 4, 100])
def test_user_password_then_a_domain_reply(split: int) -> None:
    hs = Socks5Handshake("10.1.2.3", 4222, "alice", "s3cret")
    reply = b"\x05\x00\x00\x03\x05proxy" + struct.pack("!H", 1)
    sent = _drive(hs, b"\x05\x02" + b"\x01\x00" + reply, split)
    assert sent == [b"\x05\x02\x00\x02", b"\x01\x05alice\x06s3cret",
                    b"\x05\x01\x00\x01" + bytes([10, 1, 2, 3]) + struct.pack("!H", 4222)]


def test_ipv6_literal_is_sent_as_an_address() -> None:
    assert connect_request("[::1]", 80) == b"\x05\x01\x00\x04" + bytes(15) + b"\x01" + struct.pack("!H", 80)


@pytest.mark.parametrize(("answers", "error", "match"), [
    (b"\x05\xff", NatsConnectionError, "accepts none of the methods"),
    (b"\x04\x00", ProtocolError, "does not speak SOCKS5"),
    (b"\x05\x00\x05\x05\x00\x01", NatsConnectionError, "connection refused"),
    (b"\x05\x00\x05\x09\x00\x01", NatsConnectionError, "reply code 9"),
    (b"\x05\x00\x05\x00\x00\x07\x00", ProtocolError, "unknown address type"),
])
def test_refusals_are_named(answers: bytes, error: type[Exception], match: str) -> None:
    hs = Socks5Handshake("h", 1)
    hs.start()
    with pytest.raises(error, match=match):
        hs.receive(answers)


def test_bad_credentials_and_methods_not_offered() -> None:
    hs = Socks5Handshake("h", 1, "u", "p")
    hs.start()
    with pytest.raises(NatsConnectionError, match="refused the user name and password"):
        hs.receive(b"\x05\x02\x01\x01")
    hs = Socks5Handshake("h", 1)
    hs.start()
    with pytest.raises(NatsConnectionError, match="accepts none"):
        hs.receive(b"\x05\x02")  # password asked of a client that has none
    with pytest.raises(ValueError, match="needs a password"):
        Socks5Handshake("h", 1, "u", None)
    with pytest.raises(ValueError, match="255 bytes"):
        Socks5Handshake("x" * 256, 1)


# ---------------------------------------------------------------------------- permessage-deflate


def _server_frame(opcode: int, payload: bytes, fin: bool = True, rsv1: bool = False) -> bytes:
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 126, n)
    else:
        head = struct.pack("!BBQ", b0, 127, n)
    return head + payload


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=3000), cuts=st.lists(st.integers(1, 50), min_size=1, max_size=5),
       pieces=st.integers(1, 4))
def test_compressed_messages_in_fragments_at_every_split(data: bytes, cuts: list[int], pieces: int) -> None:
    packed = ws.deflate(data)
    step = max(1, len(packed) // pieces + 1)
    parts = [packed[i:i + step] for i in range(0, len(packed), step)] or [b""]
    wire = b""
    for i, part in enumerate(parts):
        wire += _server_frame(ws.OP_BINARY if i == 0 else ws.OP_CONTINUATION, part,
                              fin=i == len(parts) - 1, rsv1=i == 0)
        if i == 0:
            wire += _server_frame(ws.OP_PING, b"mid")  # control frames may sit between fragments
    wire += _server_frame(ws.OP_BINARY, b"plain after")
    reader = ws.FrameReader(compression=True)
    out = b""
    pos = 0
    k = 0
    while pos < len(wire):
        size = cuts[k % len(cuts)]
        out += reader.feed(wire[pos:pos + size])
        pos += size
        k += 1
    assert out == data + b"plain after"
    assert reader.pongs == [b"mid"]


def test_rsv1_without_negotiated_compression_is_refused() -> None:
    with pytest.raises(ProtocolError, match="RSV bits"):
        ws.FrameReader().feed(_server_frame(ws.OP_BINARY, ws.deflate(b"x"), rsv1=True))
    with pytest.raises(ProtocolError, match="RSV1"):
        ws.FrameReader(compression=True).feed(_server_frame(ws.OP_PING, b"", rsv1=True))


def test_a_message_that_inflates_too_far_or_is_no_deflate_is_refused() -> None:
    with pytest.raises(ProtocolError, match="past 10 bytes"):
        ws.inflate(ws.deflate(b"a" * 1000), 10)
    with pytest.raises(ProtocolError, match="does not inflate"):
        ws.FrameReader(compression=True).feed(_server_frame(ws.OP_BINARY, b"\xff\xff\xff\xff", rsv1=True))


def test_a_compressed_message_in_fragments_is_bounded_as_one_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each fragment is small; together they pass the frame limit before the last one.
    monkeypatch.setattr(ws, "MAX_FRAME", 1000)
    reader = ws.FrameReader(compression=True)
    reader.feed(_server_frame(ws.OP_BINARY, b"\x00" * 400, fin=False, rsv1=True))
    reader.feed(_server_frame(ws.OP_CONTINUATION, b"\x00" * 400, fin=False))
    with pytest.raises(ProtocolError, match="more than 1000 bytes"):
        reader.feed(_server_frame(ws.OP_CONTINUATION, b"\x00" * 400, fin=False))


def test_client_frames_set_rsv1_and_the_offer_is_checked() -> None:
    assert ws.frame(ws.OP_BINARY, ws.deflate(b"hi"), compressed=True)[0] == 0x80 | 0x40 | ws.OP_BINARY
    key = ws.new_key()
    head = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {ws.accept_for(key)}\r\n")
    ext = "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover"
    assert ws.check_upgrade_response(head.encode(), key, True) is False  # the server declined
    assert ws.check_upgrade_response((head + ext).encode(), key, True) is True
    with pytest.raises(ProtocolError, match="did not offer"):
        ws.check_upgrade_response((head + ext).encode(), key, False)
    with pytest.raises(ProtocolError, match="did not offer"):
        ws.check_upgrade_response((head + "Sec-WebSocket-Extensions: x-other").encode(), key, True)
