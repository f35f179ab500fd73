"""Encoders for the commands a client sends (no I/O): commands in, bytes out.

Subjects are passed in already validated (see :mod:`.subjects`); these
functions only lay out bytes. Payloads may be any bytes-like object.
"""

from __future__ import annotations

from typing import Any

import msgspec

PING = b"PING\r\n"
PONG = b"PONG\r\n"

_json = msgspec.json.Encoder()


def connect(options: dict[str, Any]) -> bytes:
    """``CONNECT {json}``. ``None`` values are left out."""
    body = {k: v for k, v in options.items() if v is not None}
    return b"CONNECT " + _json.encode(body) + b"\r\n"


def pub(subject: bytes, payload: bytes | bytearray | memoryview, reply: bytes | None = None) -> bytes:
    """``PUB <subject> [reply] <size>`` and the payload."""
    if reply:
        return b"PUB %b %b %d\r\n%b\r\n" % (subject, reply, len(payload), payload)  # type: ignore[str-format]
    return b"PUB %b %d\r\n%b\r\n" % (subject, len(payload), payload)  # type: ignore[str-format]


def hpub(
    subject: bytes,
    headers: bytes,
    payload: bytes | bytearray | memoryview,
    reply: bytes | None = None,
) -> bytes:
    """``HPUB <subject> [reply] <header size> <total size>``, headers, payload."""
    hlen = len(headers)
    total = hlen + len(payload)
    if reply:
        return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (subject, reply, hlen, total, headers, payload)  # type: ignore[str-format]
    return b"HPUB %b %d %d\r\n%b%b\r\n" % (subject, hlen, total, headers, payload)  # type: ignore[str-format]


def sub(subject: bytes, sid: int, queue: bytes | None = None) -> bytes:
    """``SUB <subject> [queue] <sid>``."""
    if queue:
        return b"SUB %b %b %d\r\n" % (subject, queue, sid)
    return b"SUB %b %d\r\n" % (subject, sid)


def unsub(sid: int, max_msgs: int | None = None) -> bytes:
    """``UNSUB <sid> [max]``: with ``max_msgs`` the server stops after that many."""
    if max_msgs:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid
