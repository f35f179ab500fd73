"""NATS over WebSocket (RFC 6455), without I/O: the upgrade request and the frames.

The NATS protocol rides in binary frames as a plain byte stream (frame
boundaries mean nothing to it). The client masks every frame it sends; the
server's frames are unmasked. Control frames: a PING is answered with a PONG
carrying the same payload, a CLOSE ends the stream. No extension (compression)
is negotiated.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from collections.abc import Mapping

from ..errors import ProtocolError

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

_FIN = 0x80
_MASK = 0x80
#: The largest frame payload a server may send us before we call it an attack.
MAX_FRAME = 64 * 1024 * 1024 + 64 * 1024


def new_key() -> str:
    """A random ``Sec-WebSocket-Key``."""
    return base64.b64encode(os.urandom(16)).decode()


def accept_for(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key``."""
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def upgrade_request(host: str, port: int, path: str, key: str, tls: bool,
                    extra_headers: Mapping[str, str] | None = None) -> bytes:
    """The HTTP/1.1 request that asks the server to switch to WebSocket."""
    default_port = 443 if tls else 80
    host_header = host if port == default_port else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" + ("" if port == default_port else f":{port}")
    lines = [
        f"GET {path or '/'} HTTP/1.1",
        f"Host: {host_header}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    for name, value in (extra_headers or {}).items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r} contains CR or LF")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def check_upgrade_response(head: bytes, key: str) -> None:
    """Validate the server's answer (the bytes up to the blank line).

    Raises:
        ProtocolError: not a 101 with the right accept key.
    """
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[1] != "101":
        raise ProtocolError(f"the server refused the WebSocket upgrade: {lines[0][:120]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in headers.get("connection", "").lower():
        raise ProtocolError("the server's answer is not a WebSocket upgrade")
    if headers.get("sec-websocket-accept") != accept_for(key):
        raise ProtocolError("the server's Sec-WebSocket-Accept does not match our key")


def _mask(payload: bytes | bytearray | memoryview, key: bytes) -> bytes:
    n = len(payload)
    if not n:
        return b""
    # One XOR of two big integers: C speed, no Python loop over the bytes.
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")


def frame(opcode: int, payload: bytes | bytearray | memoryview = b"", key: bytes | None = None) -> bytes:
    """One final, masked frame (client to server)."""
    key = key if key is not None else os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", _FIN | opcode, _MASK | n)
    elif n < 65536:
        head = struct.pack("!BBH", _FIN | opcode, _MASK | 126, n)
    else:
        head = struct.pack("!BBQ", _FIN | opcode, _MASK | 127, n)
    return head + key + _mask(payload, key)


class FrameReader:
    """Server frames in, NATS bytes and control actions out. Not thread-safe (one reader).

    :meth:`feed` returns the data bytes of every complete data frame; PINGs
    to answer are kept in :attr:`pongs` (payloads), and :attr:`closed` is set
    by a CLOSE frame.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.pongs: list[bytes] = []
        self.closed = False
        self.close_reason = ""

    def feed(self, data: bytes) -> bytes:
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        n = len(buf)
        while n - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            if b0 & 0x70:
                raise ProtocolError("WebSocket frame with RSV bits set (no extension was negotiated)")
            opcode = b0 & 0x0F
            masked = b1 & _MASK
            length = b1 & 0x7F
            head = 2
            if length == 126:
                if n - pos < 4:
                    break
                length = struct.unpack_from("!H", buf, pos + 2)[0]
                head = 4
            elif length == 127:
                if n - pos < 10:
                    break
                length = struct.unpack_from("!Q", buf, pos + 2)[0]
                head = 10
            if length > MAX_FRAME:
                raise ProtocolError(f"WebSocket frame of {length} bytes is too large")
            key = b""
            if masked:  # servers must not mask; accept it anyway
                if n - pos < head + 4:
                    break
                key = bytes(buf[pos + head : pos + head + 4])
                head += 4
            if n - pos < head + length:
                break
            payload = bytes(buf[pos + head : pos + head + length])
            if key:
                payload = _mask(payload, key)
            pos += head + length
            if opcode in (OP_BINARY, OP_TEXT, OP_CONTINUATION):
                out += payload
            elif opcode == OP_PING:
                self.pongs.append(payload)
            elif opcode == OP_CLOSE:
                self.closed = True
                self.close_reason = payload[2:].decode("utf-8", "replace") if len(payload) > 2 else ""
                break
            elif opcode != OP_PONG:
                raise ProtocolError(f"unknown WebSocket opcode {opcode}")
        del buf[:pos]
        return bytes(out)
