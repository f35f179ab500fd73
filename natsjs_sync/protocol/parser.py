"""The NATS protocol parser: bytes in, events out (no I/O).

Feed it whatever the socket returned, split anywhere, and it returns complete
events: :class:`Info`, :class:`MsgEvent` (for both MSG and HMSG), :data:`PING`,
:data:`PONG`, :data:`OK` and :class:`Err`.

Memory is bounded: a control line longer than ``max_control_line`` or a
payload larger than ``max_payload`` raises :class:`ProtocolError` at once, so
the buffer never holds more than one control line, one payload and one read.
After a ProtocolError the parser stays broken; the connection must be dropped.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from types import ModuleType
from typing import Any, Union

import msgspec

from ..errors import ProtocolError
from . import _compiled

DEFAULT_MAX_CONTROL_LINE = 16 * 1024
DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024 + 64 * 1024  # the server's hard limit plus headers


class Info:
    """The server's ``INFO`` options (a dict decoded from its JSON)."""

    __slots__ = ("options",)

    def __init__(self, options: dict[str, Any]):
        self.options = options

    def __repr__(self) -> str:
        return f"Info({self.options!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Info) and other.options == self.options


class Err:
    """A ``-ERR`` line; ``text`` has the surrounding quotes removed."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Err({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Err) and other.text == self.text


class _Token:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


PING = _Token("PING")
PONG = _Token("PONG")
OK = _Token("OK")
#: Returned by :meth:`Parser.next_event` when more bytes are needed.
NEED_DATA = _Token("NEED_DATA")


class MsgEvent:
    """A delivered message (``MSG`` or ``HMSG``). ``headers`` is the raw block or None."""

    __slots__ = ("headers", "payload", "reply", "sid", "subject")

    def __init__(self, subject: str, sid: int, reply: str | None, headers: bytes | None, payload: bytes):
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self.headers = headers
        self.payload = payload

    def __repr__(self) -> str:
        return (
            f"MsgEvent(subject={self.subject!r}, sid={self.sid}, reply={self.reply!r}, "
            f"headers={self.headers!r}, payload={self.payload!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MsgEvent) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )


Event = Union[Info, Err, MsgEvent, _Token, Any]
MsgFactory = Callable[[str, int, str | None, bytes | None, bytes], Any]

_json_decode = msgspec.json.decode

# The compiled fast path, when it was built (setup.py); the Python path below is the reference.
_speedups: ModuleType | None = _compiled.speedups

# MSG <subject> <sid> [reply] <size>\r\n. Anything it does not match (HMSG,
# other operations, malformed lines) takes the general path, which validates.
_MSG_RE = re.compile(rb"MSG[ \t]+([^ \t\r\n]+)[ \t]+(\d+)[ \t]+(?:([^ \t\r\n]+)[ \t]+)?(\d+)\r\n")

# The arguments of a MSG/HMSG line. Spaces and tabs are the only separators, as
# nats-server and nats.go split a control line; the server accepts every other
# byte but CR and LF in a subject (a vertical tab, a form feed, a NUL), so
# those belong to the token. The compiled scanner follows the same rule.
_ARG = re.compile(rb"[^ \t]+")
_MSG_OPS = (b"MSG ", b"MSG\t")
_HMSG_OPS = (b"HMSG ", b"HMSG\t")


class Parser:
    """Incremental NATS protocol parser. Not thread-safe: one reader feeds it.

    Args:
        max_control_line: the longest control line accepted, in bytes.
        max_payload: the largest MSG/HMSG payload (headers included) accepted.
        msg_factory: builds the object returned for each message from
            ``(subject, sid, reply, headers, payload)``; :class:`MsgEvent` by default.
    """

    __slots__ = ("_before_error", "_broken", "_buf", "_factory", "_max_cl", "_max_payload", "_pending", "_ready",
                 "_scan")

    def __init__(
        self,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        msg_factory: MsgFactory | None = None,
    ):
        self._buf = bytearray()
        self._max_cl = max_control_line
        self._max_payload = max_payload
        self._factory: MsgFactory = msg_factory or MsgEvent
        # (subject, sid, reply, header_len, total_len) of a message whose payload
        # has not fully arrived; the buffer then starts at the payload.
        self._pending: tuple[str, int, str | None, int, int] | None = None
        self._ready: deque[Event] = deque()
        self._broken: ProtocolError | None = None
        self._before_error: list[Event] = []
        # The compiled scanner builds natsjs_sync.msg.Msg subclasses (registered by that module).
        self._scan = _speedups.scan if _speedups is not None and _speedups.accepts(self._factory) else None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._buf)

    # -- h11-style interface -------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Add bytes received from the peer."""
        self._ready.extend(self.feed(data))

    def next_event(self) -> Event:
        """The next complete event, or :data:`NEED_DATA`."""
        if self._ready:
            return self._ready.popleft()
        return NEED_DATA

    # -- fast interface --------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Add bytes and return every event they complete, in order.

        Raises:
            ProtocolError: the input is not NATS protocol (the parser stays broken).
        """
        if self._broken is not None:
            raise self._broken
        buf = self._buf
        if buf:
            buf += data
            pending = self._pending
            if pending is not None and len(buf) < pending[4] + 2:
                # Still inside a large payload: only count, never rescan or copy.
                return []
            work = bytes(buf)
            buf.clear()
        else:
            # The common case: nothing left over, parse the read itself.
            work = data if data.__class__ is bytes else bytes(data)
        scan = self._scan
        if scan is not None and self._pending is None:
            # A read of whole messages only (nearly every read) in one C call;
            # anything after them goes on in _parse().
            out, pos = scan(work, 0, self._factory, self._max_payload, self._max_cl)
            if pos == len(work):
                return out  # type: ignore[no-any-return]
            return self._parse_rest(work, out, pos)
        return self._parse_rest(work, [], 0)

    def _parse_rest(self, work: bytes, out: list[Event], pos: int) -> list[Event]:
        """:meth:`feed` from ``pos`` of ``work`` on (``out``: the events before it); what is
        left of an incomplete frame stays in the buffer. The compiled feed's rest too."""
        try:
            pos = self._parse(work, out, pos)
        except ProtocolError as exc:
            self._broken = exc
            self._pending = None
            self._before_error = out
            raise
        if pos < len(work):
            self._buf += work[pos:] if pos else work
        return out

    def reader_feed(self) -> Callable[[bytes], list[Event]]:
        """:meth:`feed` for a reader to keep and call for every read: in one compiled call
        when the read holds whole messages only and nothing is left over (nearly every
        read), else :meth:`feed` itself. The parser does not hold it (no reference cycle)."""
        if self._scan is not None and _speedups is not None:
            feed: Callable[[bytes], list[Event]] = _speedups.Feed(self, self._buf, self._factory,
                                                                   self._max_payload, self._max_cl)
            return feed
        return self.feed

    def parsed_before_error(self) -> list[Event]:
        """The events the ``feed()`` that raised :class:`ProtocolError` completed
        before the error (once; empty afterwards): valid messages of the same
        read, which a reader delivers before it drops the connection."""
        events, self._before_error = self._before_error, []
        return events

    def _parse(self, buf: bytes, out: list[Event], pos: int = 0) -> int:
        n = len(buf)
        factory = self._factory
        max_cl = self._max_cl
        max_payload = self._max_payload
        find = buf.find
        startswith = buf.startswith
        match_msg = _MSG_RE.match
        scan = self._scan
        while True:
            if scan is not None and self._pending is None:
                # A run of complete MSG/HMSG frames in one C call; it stops at
                # anything else, which the code below handles (and raises for).
                msgs, pos = scan(buf, pos, factory, max_payload, max_cl)
                if msgs:
                    out.extend(msgs)
                    if pos == n:
                        return n  # the common read: whole messages only
            if self._pending is not None:
                after = self._finish_pending(buf, pos, out)
                if after < 0:
                    return pos
                pos = after
                continue

            m = match_msg(buf, pos)
            if m is not None and m.end() - pos <= max_cl:
                # Hot path: a plain MSG whose payload is all here, in one C-level match.
                subj_b, sid_b, reply_b, size_b = m.groups()
                size = int(size_b)
                if size > max_payload:
                    raise ProtocolError(f"payload of {size} bytes exceeds the limit of {max_payload}")
                start = m.end()
                end = start + size
                if end + 2 <= n:
                    if not startswith(b"\r\n", end):
                        raise ProtocolError("message payload not followed by CRLF")
                    if reply_b is not None:
                        reply_b = reply_b.decode() if reply_b.isascii() else self._decode(reply_b)
                    subject = subj_b.decode() if subj_b.isascii() else self._decode(subj_b)
                    out.append(factory(subject, int(sid_b), reply_b, None, buf[start:end]))
                    pos = end + 2
                    continue

            idx = find(b"\r\n", pos)
            if idx < 0:
                # A line of max_cl bytes may have its CR here and its LF still to come.
                if n - pos > max_cl + 1:
                    raise ProtocolError(f"control line longer than {max_cl} bytes")
                return pos
            if idx - pos > max_cl:
                raise ProtocolError(f"control line longer than {max_cl} bytes")

            # The operation ends at a space or a tab (the separators of every control line).
            if startswith(_MSG_OPS, pos):
                self._pending = self._msg_args(buf[pos + 4 : idx], False)
                pos = idx + 2
                continue
            if startswith(_HMSG_OPS, pos):
                self._pending = self._msg_args(buf[pos + 5 : idx], True)
            else:
                out.append(self._control(buf[pos:idx]))
            pos = idx + 2

    def _finish_pending(self, buf: bytes, pos: int, out: list[Event]) -> int:
        """The payload of the MSG/HMSG whose control line was read: where
        parsing goes on after it, or -1 while it is not all here."""
        assert self._pending is not None
        subject, sid, reply, hlen, total = self._pending
        end = pos + total
        if end + 2 > len(buf):
            return -1
        if not buf.startswith(b"\r\n", end):
            raise ProtocolError("message payload not followed by CRLF")
        if hlen:
            out.append(self._factory(subject, sid, reply, buf[pos : pos + hlen], buf[pos + hlen : end]))
        else:
            out.append(self._factory(subject, sid, reply, None, buf[pos:end]))
        self._pending = None
        return end + 2

    @staticmethod
    def _decode(raw: bytes) -> str:
        # The server takes any bytes but separators in a subject, so any
        # publisher can send one that is not UTF-8. Undecodable bytes become
        # lone surrogates (PEP 383) that encode back to the same bytes, so the
        # message is delivered and its reply subject can still be answered.
        return raw.decode("utf-8", "surrogateescape")

    def _msg_args(self, line: bytes, with_headers: bool) -> tuple[str, int, str | None, int, int]:
        args = line.split()
        if b" ".join(args) != line:
            # Not the server's own layout (one space between arguments): split()
            # also cut at other whitespace, so apply the rule itself.
            if b"\r" in line or b"\n" in line:
                # The server ends a line at LF and splits on CR: it never sends either in a token.
                raise ProtocolError(f"bare CR or LF in a message's control line: {bytes(line)[:80]!r}")
            args = _ARG.findall(line)
        nargs = len(args)
        reply: str | None = None
        if with_headers:
            if nargs == 5:
                reply = self._decode(args[2])
            elif nargs != 4:
                raise ProtocolError(f"HMSG needs 4 or 5 arguments: {bytes(line)[:80]!r}")
            hraw, traw = args[-2], args[-1]
            if not (hraw.isdigit() and traw.isdigit()):
                raise ProtocolError(f"HMSG sizes are not numbers: {bytes(line)[:80]!r}")
            hlen, total = int(hraw), int(traw)
            if hlen > total:
                raise ProtocolError(f"HMSG header size {hlen} invalid for total {total}")
            # A header block too short to be one ("HPUB s 2 5" from any publisher: the
            # server passes it on) still frames the message: it is delivered, and
            # only reading its headers fails (Msg.headers raises ProtocolError).
        else:
            if nargs == 4:
                reply = self._decode(args[2])
            elif nargs != 3:
                raise ProtocolError(f"MSG needs 3 or 4 arguments: {bytes(line)[:80]!r}")
            traw = args[-1]
            if not traw.isdigit():
                raise ProtocolError(f"MSG size is not a number: {bytes(line)[:80]!r}")
            hlen, total = 0, int(traw)
        sid_raw = args[1]
        if not sid_raw.isdigit():
            raise ProtocolError(f"subscription id is not a number: {bytes(sid_raw)[:32]!r}")
        subject = self._decode(args[0])
        if total > self._max_payload:
            raise ProtocolError(f"payload of {total} bytes exceeds the limit of {self._max_payload}")
        return subject, int(sid_raw), reply, hlen, total

    def _control(self, line: bytes) -> Event:
        op, _, rest = line.partition(b" ")
        if not rest:
            # Tabs are legal separators too.
            op, _, rest = line.partition(b"\t")
        op = op.upper()
        if op == b"PING" and not rest.strip():
            return PING
        if op == b"PONG" and not rest.strip():
            return PONG
        if op == b"+OK" and not rest.strip():
            return OK
        if op == b"-ERR":
            text = rest.strip().decode("utf-8", errors="replace")
            if len(text) >= 2 and text[0] == text[-1] == "'":
                text = text[1:-1]
            return Err(text)
        if op == b"INFO":
            try:
                options = _json_decode(rest)
            except (msgspec.DecodeError, ValueError) as exc:
                raise ProtocolError(f"INFO is not valid JSON: {rest[:80]!r}") from exc
            if not isinstance(options, dict):
                raise ProtocolError("INFO is not a JSON object")
            return Info(options)
        raise ProtocolError(f"unknown protocol operation: {line[:80]!r}")
