"""NATS over WebSocket (RFC 6455), without I/O: the upgrade request and the frames.

The NATS protocol rides in binary frames as a plain byte stream (frame
boundaries mean nothing to it). The client masks every frame it sends; the
server's frames are unmasked. Control frames: a PING is answered with a PONG
carrying the same payload, a CLOSE ends the stream.

Compression (RFC 7692's permessage-deflate) is offered when asked for, without
context takeover either way (as nats.go and the server do): each message is
deflated and inflated on its own, so a lost frame never poisons the next one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import zlib
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
_RSV1 = 0x40  # RFC 7692: the message is compressed
_MASK = 0x80
#: What we offer for compression: a fresh deflate stream per message, both ways.
PERMESSAGE_DEFLATE = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
#: RFC 7692 7.2.1: the empty stored block a sender strips off each message's end.
_DEFLATE_TAIL = b"\x00\x00\xff\xff"
#: The largest frame payload a server may send us before we call it an attack.
MAX_FRAME = 64 * 1024 * 1024 + 64 * 1024


def new_key() -> str:
    """A random ``Sec-WebSocket-Key``."""
    return base64.b64encode(os.urandom(16)).decode()


def accept_for(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key``."""
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def upgrade_request(host: str, port: int, path: str, key: str, tls: bool,
                    extra_headers: Mapping[str, str] | None = None, compression: bool = False) -> bytes:
    """The HTTP/1.1 request that asks the server to switch to WebSocket (offering
    permessage-deflate when ``compression``)."""
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
    if compression:
        lines.append(f"Sec-WebSocket-Extensions: {PERMESSAGE_DEFLATE}")
    for name, value in (extra_headers or {}).items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r} contains CR or LF")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def check_upgrade_response(head: bytes, key: str, offered_compression: bool = False) -> bool:
    """Validate the server's answer (the bytes up to the blank line).

    Returns:
        Whether messages are compressed from now on: we offered permessage-deflate
        and the server accepted it (a server without compression turned on declines).

    Raises:
        ProtocolError: not a 101 with the right accept key, or an extension we did not offer.
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
    extensions = [e.split(";")[0].strip().lower() for e in headers.get("sec-websocket-extensions", "").split(",")]
    extensions = [e for e in extensions if e]
    if any(e != "permessage-deflate" for e in extensions) or (extensions and not offered_compression):
        raise ProtocolError(f"the server chose WebSocket extensions we did not offer: {', '.join(extensions)}")
    return bool(extensions)


def deflate(payload: bytes | bytearray | memoryview) -> bytes:
    """One message's payload compressed on its own (RFC 7692 7.2.1), its end marker stripped."""
    packer = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)  # level 1: as nats.go, speed first
    out = packer.compress(payload) + packer.flush(zlib.Z_SYNC_FLUSH)
    return out[:-4] if out.endswith(_DEFLATE_TAIL) else out


def inflate(payload: bytes, limit: int = 0) -> bytes:
    """One compressed message's payload (RFC 7692 7.2.2), at most ``limit`` bytes (0: any).

    Raises:
        ProtocolError: not deflate data, or it inflates past ``limit``.
    """
    unpacker = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(payload + _DEFLATE_TAIL, limit)
    except zlib.error as exc:
        raise ProtocolError(f"a compressed WebSocket message does not inflate: {exc}") from None
    if unpacker.unconsumed_tail:
        raise ProtocolError(f"a compressed WebSocket message inflates past {limit} bytes")
    return out


def _mask(payload: bytes | bytearray | memoryview, key: bytes) -> bytes:
    n = len(payload)
    if not n:
        return b""
    # One XOR of two big integers: C speed, no Python loop over the bytes.
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")


def frame(opcode: int, payload: bytes | bytearray | memoryview = b"", key: bytes | None = None,
          compressed: bool = False) -> bytes:
    """One final, masked frame (client to server); ``compressed``: the payload is
    :func:`deflate`'s (the RSV1 bit is set)."""
    key = key if key is not None else os.urandom(4)
    n = len(payload)
    b0 = _FIN | opcode | (_RSV1 if compressed else 0)
    if n < 126:
        head = struct.pack("!BB", b0, _MASK | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, _MASK | 126, n)
    else:
        head = struct.pack("!BBQ", b0, _MASK | 127, n)
    return head + key + _mask(payload, key)


class FrameReader:
    """Server frames in, NATS bytes and control actions out. Not thread-safe (one reader).

    :meth:`feed` returns the data bytes of every complete data frame (of every
    complete message, when compressed); PINGs to answer are kept in :attr:`pongs`
    (payloads), and :attr:`closed` is set by a CLOSE frame. With ``compression``
    (negotiated in the upgrade), a message whose first frame has RSV1 set is
    inflated once its last frame is in.
    """

    def __init__(self, compression: bool = False) -> None:
        self._compression = compression
        #: The frames so far of a compressed message not yet finished (None: none under way).
        self._deflated: list[bytes] | None = None
        self._deflated_size = 0  # their bytes
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
            if b0 & 0x70 and not (self._compression and b0 & 0x70 == _RSV1):
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
            if b0 & _RSV1 and opcode not in (OP_BINARY, OP_TEXT):
                raise ProtocolError("a WebSocket control or continuation frame with RSV1 set")
            if b0 & _RSV1 or (opcode == OP_CONTINUATION and self._deflated is not None):
                if opcode != OP_CONTINUATION or self._deflated is None:
                    self._deflated, self._deflated_size = [], 0
                parts = self._deflated
                parts.append(payload)
                self._deflated_size += len(payload)
                # Kept whole until its last frame: bounded as one frame is, or a server
                # sending continuations for ever would take all our memory.
                if self._deflated_size > MAX_FRAME:
                    raise ProtocolError(f"a compressed WebSocket message of more than {MAX_FRAME} bytes")
                if b0 & _FIN:
                    self._deflated = None
                    out += inflate(b"".join(parts), MAX_FRAME)
            elif opcode in (OP_BINARY, OP_TEXT, OP_CONTINUATION):
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
