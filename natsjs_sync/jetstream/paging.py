"""Reading a range of a stream's sequences page by page: the one paging rule.

**A read continues after the last message it received, never after the one it
asked for.** A server ends a page early whenever a limit is reached: a batched
direct get (ADR-31) stops at ``max_bytes`` (the server's ``max_pending``, 64 MiB
by default, when the request gives none) and answers the end of the batch
(status 204 ``EOB``, with ``Nats-Num-Pending`` and ``Nats-Last-Sequence``) with
messages still pending. A page cut short is the normal case, not an error, so
the next page starts after the last sequence that came back. With a subject
filter "the first sequence plus the count asked for" skips every matching
message the page did not return, silently; this module is the one place that
reads a range, for every caller that pages (Spark's batch and streaming reads,
the consumer-group source).

:func:`read_range_rows` reads ``start..end`` (optionally only some subjects) and
yields plain row tuples in sequence order:

- by batched direct get (servers 2.11 and newer, streams with ``allow_direct``):
  no consumer, any replica answers. Each page asks for at most
  :func:`page_bytes` bytes, so an answer never passes the server's pending
  limit for the connection (past it the server disconnects the client as a
  slow consumer). With a filter one page is in flight, starting after the
  last message received; several filters are read side by side and merged.
  Unfiltered, the range is asked for in windows of ``batch`` sequences, two
  in flight, and a window cut short is asked for again from after its last
  message received before the next window's answers are read. Unfiltered
  pages ask with the filter ``>``, which steps over deleted messages on every
  server: 2.11.0 to 2.11.9 answer a plain batch whose first sequence is
  deleted with 404.
- through an ephemeral consumer otherwise (2.10, or no ``allow_direct``): the
  consumer keeps the position on the server, each message is checked in order
  by its consumer sequence, and one pull of at most :func:`pull_bytes` is
  outstanding at a time.

(Key-value and object-store listings read with ordered consumers, which keep
their position on the server and start again after the last message received
when they heal: they do not page by sequence and do not use this module.)

What the server does with a batched direct get, checked against its code from
2.11.0 to 2.15: the message that reaches ``max_bytes`` (counted as subject,
stored headers and data) is still sent, so every page holds at least one
message and a message larger than the limit never stalls a read; a page whose
first lookup finds nothing answers 404 instead of a batch; the end-of-batch
``Nats-Num-Pending`` counts the matching messages after the last one sent (the
per-message count is off by one before 2.12, so only the end of batch's is
used). A read that ends before ``end`` asks the stream's leader whether a
message of the range is stored past it (a replica may lag the leader that
fixed ``end``); if one is, the read goes on from there.

A failure the server gets over (:func:`transient`: a restart, a leader
election, a lost connection) is ridden out for ``retry_timeout`` seconds,
going on from the first sequence not yet given. Nothing is left behind on the
server and a repeat gives the same rows.
"""

from __future__ import annotations

import calendar
import collections
import contextlib
import datetime
import heapq
import itertools
import re
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import msgspec

from .._backoff import Backoff
from .._core.spi import CoreLink, link
from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    JetStreamError,
    MsgNotFoundError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    TimeoutError,
    jetstream_error,
)
from ..msg import Msg
from ..protocol.headers import Headers
from ..protocol.jetstream.ackreply import sequences
from ..protocol.jetstream.status import Kind, classify
from ..protocol.subjects import subject_covers, subject_matches, subjects_collide
from .pull import pull_request, server_expiry

if TYPE_CHECKING:
    from .context import JetStream
    from .stream_config import StreamInfo

__all__ = ["ReadGap", "Removed", "Row", "page_bytes", "pull_bytes", "read_range_rows", "reads_directly", "ride_out",
           "transient"]

#: A row of a range: ``(subject, sequence, time in µs since the epoch, headers, data)``. The headers
#: are None, a :class:`Headers`, or the header block as received (``bytes``, not parsed).
Row = tuple[str, int, int, "Headers | bytes | None", bytes]
#: Told the first sequence not yet given when messages a read was still to give were removed meanwhile.
Removed = Callable[[int], None]
T = TypeVar("T")

_RIDE_OUT = Backoff(0.2, 2.0, jitter=0.2)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
#: The most a page of a direct get asks for, in bytes (the server's max_payload when that is less).
_PAGE_BYTES = 8 * 1024 * 1024
_CONTROL_LINE = 4096  # the server's default max_control_line: a subject is no longer


class ReadGap(NatsError):
    """A message of the range went missing on the way (a consumer sequence skipped, a replica
    behind the leader): the read goes on from the first sequence not yet given."""


def transient(exc: BaseException) -> bool:
    """Would the same call succeed once the server is back (a restart, a leader election)?"""
    if isinstance(exc, (AuthorizationError, ConnectionClosedError)):
        return False
    if isinstance(exc, (TimeoutError, NoRespondersError, NatsConnectionError, ReadGap)):
        return True
    return isinstance(exc, JetStreamError) and exc.code == 503


def ride_out(retry_timeout: float, call: Callable[[], T]) -> T:
    """``call()``, tried again while it fails with a :func:`transient` error.

    Args:
        retry_timeout: seconds to keep trying; then the last error is raised.
        call: what to do.

    Returns:
        What ``call`` returned.

    Raises:
        NatsError: a failure that is not transient, or the last one once the time is up.
    """
    until = time.monotonic() + retry_timeout
    attempt = 0
    while True:
        try:
            return call()
        except NatsError as exc:
            attempt += 1
            wait = _RIDE_OUT.delay(attempt)
            if not transient(exc) or time.monotonic() + wait > until:
                raise
        time.sleep(wait)


def reads_directly(js: JetStream, info: StreamInfo) -> bool:
    """Does a range read of the stream with this info go by batched direct get (no consumer)?

    It does when the stream allows direct get and the server answers batched
    direct gets (2.11 and newer); otherwise it reads through an ephemeral consumer.
    """
    return bool(info.config.allow_direct) and bool(js.supports("direct_get_batch"))


def page_bytes(core: CoreLink) -> int:
    """The bytes one page of a direct get asks for: the server's ``max_payload``, at most 8 MiB.

    The server sends a page without flow control and disconnects a client
    whose pending bytes pass its ``max_pending``; that limit is never below
    ``max_payload`` (the server refuses such a configuration), so a page of
    ``max_payload`` bytes, plus the one message that crosses it, stays clear
    of it on any server.
    """
    try:
        limit = int(core.max_payload)
    except (TypeError, ValueError):
        limit = 0
    return min(_PAGE_BYTES, limit) if limit > 0 else _PAGE_BYTES


def pull_bytes(core: CoreLink) -> int:
    """The bytes one pull through a consumer asks for: the server's ``max_payload`` (8 MiB when
    unknown), plus room for the subject and reply subject the server counts with each message, so
    that any message the stream holds fits in one pull (a pull too small for the next message ends
    with nothing, and asking again would be refused the same way for ever).

    Unlike :func:`page_bytes` it is not capped at 8 MiB: a server may take messages larger than that.
    """
    try:
        limit = int(core.max_payload)
    except (TypeError, ValueError):
        limit = 0
    return (limit if limit > 0 else _PAGE_BYTES) + 2 * _CONTROL_LINE


def read_range_rows(js: JetStream, stream: str, start: int = 1, end: int | None = None,
                    subjects: Sequence[str] | None = None, *, batch: int = 500, timeout: float = 10.0,
                    retry_timeout: float = 60.0, direct: bool | None = None,
                    removed: Removed | None = None) -> Iterator[Row]:
    """The stream's messages with ``start <= seq <= end`` (to the current end when ``end``
    is None), optionally only on ``subjects``, in order, page by page (see the module).

    Args:
        js: the JetStream context to read with.
        stream: the stream's name.
        start, end: the range (both included).
        subjects: filters (wildcards allowed); a message matching several is given once.
        batch: messages asked for per page at most.
        timeout: seconds to wait for each answer.
        retry_timeout: seconds a :func:`transient` failure is ridden out, going on from
            the first sequence not yet given.
        direct: read by batched direct get (True) or through a consumer (False), as the
            caller already knows from the stream's info (:func:`reads_directly`); None asks
            the stream's leader. With it and ``end``, a read makes no request to the leader
            at all (a thousand tasks asking at once queue on its JetStream API). After a
            failure the next attempt asks the leader again.
        removed: called with the first sequence not yet given when messages the read was still to
            give were removed while it read (a purge, deletes, expiry: the server's count of the
            messages pending after the last one given fell by more than the messages given since,
            or the read ended while it said some were pending). It may raise to fail the read;
            a count lowered by the removal of messages past ``end`` calls it too.

    Returns:
        Rows ``(subject, seq, time in µs, headers, data)``, the message's own header
        block as received (``bytes``, not parsed) or None.

    Raises:
        NatsError: a failure that is not transient, or one that lasted ``retry_timeout``.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch!r}")
    if end is None or direct is None:
        info = ride_out(retry_timeout, lambda: js.stream(stream)).cached_info
        direct = reads_directly(js, info)
        end = info.state.last_seq if end is None else end
    filters, filter_here = _read_filters(subjects or ())
    nxt = start
    until: float | None = None  # the end of the ride-out budget, while the server is away
    attempt = 0
    while nxt <= end:
        try:
            if direct is None:  # after a failure: the stream may have changed (allow_direct turned off)
                direct = ride_out(retry_timeout, lambda: reads_directly(js, js.stream(stream).cached_info))
            for item in _attempt(js, stream, nxt, end, filters, filter_here, direct, batch, timeout, removed):
                nxt = item[1] + 1
                until, attempt = None, 0
                yield item
            return
        except NatsError as exc:
            # Go on from the first sequence not yet given, once the server is back.
            now = time.monotonic()
            until = now + retry_timeout if until is None else until
            attempt += 1
            delay = _RIDE_OUT.delay(attempt)
            if not transient(exc) or now + delay > until:
                raise
            direct = None
            time.sleep(delay)


def _attempt(js: JetStream, stream: str, start: int, end: int, filters: list[str], filter_here: list[str] | None,
             direct: bool, batch: int, wait: float, removed: Removed | None) -> Iterator[Row]:
    """One attempt at ``start..end``, by direct get or through a consumer."""
    if direct:
        yield from _read_direct_subjects(js, stream, start, end, filters, batch, wait, removed)
    elif filter_here is None:
        yield from _read_pulled(js, stream, start, end, filters, batch, wait, removed)
    else:  # filters a consumer refuses together: read it all, keep what matches
        for item in _read_pulled(js, stream, start, end, [], batch, wait, removed):
            if any(subject_matches(p, item[0]) for p in filter_here):
                yield item


def _read_filters(subjects: Iterable[str]) -> tuple[list[str], list[str] | None]:
    """The subject filters of a range read, without those another one covers.

    A consumer refuses overlapping filters (``a.>`` beside ``a.b``), so a
    filter another one covers is dropped, as is a repeat. Filters that still
    overlap without either covering the other (``a.*.c`` and ``a.b.*``)
    cannot be given to a consumer at all: a consumer read then takes the
    whole range and keeps what matches. (A read by direct get asks per filter
    and merges, so it takes them as they are.)

    Returns:
        ``(filters, filter_here)``: the filters left, and the same list when a
        consumer read must apply them itself (None when the server can).
    """
    kept: list[str] = []
    for subject in dict.fromkeys(subjects):
        if not any(subject_covers(k, subject) for k in kept):
            kept = [k for k in kept if not subject_covers(subject, k)] + [subject]
    overlap = any(subjects_collide(a, b) for i, a in enumerate(kept) for b in kept[i + 1:])
    return kept, (kept if overlap else None)


def _collector() -> tuple[threading.Condition, list[list[Msg]], Callable[[Msg], None]]:
    """A box the reader thread fills and a read empties in bulk: (its condition, the box, the route).

    The route appends each message to the list in the box (the reader thread's
    only work: no user code); the read swaps the whole list out at once (one
    lock round per block of messages, not per message).
    """
    cond = threading.Condition(threading.Lock())
    box: list[list[Msg]] = [[]]

    def route(msg: Msg) -> None:  # reader thread: quick, no user code
        with cond:
            got = box[0]
            got.append(msg)
            if len(got) == 1:
                cond.notify()

    return cond, box, route


def _take(cond: threading.Condition, box: list[list[Msg]], wait: float, what: str) -> list[Msg]:
    """The messages delivered since the last take, waiting up to ``wait`` s for one.

    Raises:
        TimeoutError: nothing arrived.
    """
    with cond:
        if not box[0] and not cond.wait_for(lambda: box[0], wait):
            raise TimeoutError(f"{what}: nothing within {wait} s")
        got, box[0] = box[0], []
    return got


def _read_direct_subjects(js: JetStream, stream: str, start: int, end: int, subjects: list[str], batch: int,
                          wait: float, removed: Removed | None) -> Iterator[Row]:
    """The range by batched direct get: unfiltered, on one filter, or merged in order from several.

    A direct get takes one filter subject, so several are read side by side and
    merged by sequence (a message matching two filters is given once).
    """
    if len(subjects) <= 1:
        yield from _read_direct(js, stream, start, end, subjects[0] if subjects else None, batch, wait, removed)
        return
    with contextlib.ExitStack() as stack:
        reads = [stack.enter_context(contextlib.closing(
            _read_direct(js, stream, start, end, subject, batch, wait, removed))) for subject in subjects]
        last = start - 1
        for item in heapq.merge(*reads, key=lambda row: row[1]):
            if item[1] != last:
                last = item[1]
                yield item


def _read_direct(js: JetStream, stream: str, start: int, end: int, subject: str | None, batch: int,
                 wait: float, removed: Removed | None) -> Generator[Row, None, None]:
    """The range (optionally on one filter ``subject``) by batched direct get: no consumer.

    Each page has a reply subject of its own under one routed inbox, its
    answers taken in bulk (one lock round per block of messages). A read that
    ends before ``end`` (the replica had nothing more) asks the leader whether
    a message of the range is stored past it: a replica may be a moment behind
    the leader, which fixed ``end``. If one is, the read fails with
    :class:`ReadGap` and :func:`read_range_rows` goes on from there.

    The inbox is released when the generator ends; when it is closed earlier
    (by its caller, or by the garbage collector on any thread) the release is
    handed to the client's timer thread.

    Raises:
        TimeoutError: no answer within ``wait`` seconds.
        JetStreamError: the server refused a request.
    """
    core = link(js.nc)
    prefix = core.new_inbox()
    cond, box, route = _collector()
    handle = core.route_internal(prefix + ".*", route)
    with core.releasing(handle.cancel):
        pages = _Pages(core, f"{js.api_prefix}.DIRECT.GET.{stream}", stream, subject, batch, page_bytes(core),
                       wait, prefix, cond, box, removed)
        last = yield from pages.read(start, end)
        if last < end:  # the replica ran out first (a message past ``end`` would have shown it had all)
            after = _next_stored(js, stream, last + 1, subject, wait)
            if after is not None and after <= end:
                raise ReadGap(f"reading {stream!r}: the replica that answered ended at {last}, the leader "
                              f"stores {after}")


@dataclass
class _Ask:
    """One page in flight: its reply subject, first sequence, count asked for and answers so far."""

    reply: str
    first: int
    count: int
    got: list[Msg] = field(default_factory=list)
    answered: int = 0  #: messages of this page handled


class _Pages:
    """The pages of one direct-get read. Not thread-safe: one reading thread (the client's reader
    thread only fills the box).

    With a filter, one page is in flight and each starts after the last message
    received: where a page cut short ends is known only once it has ended.
    Unfiltered, the range is asked for in windows of ``batch`` sequences with
    two pages in flight, so the server prepares one while this thread reads the
    other; answers of the later one wait until the earlier one has ended, so
    rows come in order. A window cut short is asked for again from after its
    last message received, before the next window's answers are read; a
    sequence given twice (deleted messages made a page reach into the next
    window) is given once.
    """

    def __init__(self, core: CoreLink, api: str, stream: str, subject: str | None, batch: int, max_bytes: int,
                 wait: float, prefix: str, cond: threading.Condition, box: list[list[Msg]],
                 removed: Removed | None = None) -> None:
        self.core, self.api, self.stream, self.wait = core, api, stream, wait
        # ">" steps over deleted messages on every server (2.11.0-2.11.9 answer 404 for a plain
        # batch whose first sequence is deleted); it is what newer servers do unfiltered anyway.
        self.subject = subject or ">"
        self.windows = subject is None
        self.batch, self.max_bytes = batch, max_bytes
        self.prefix, self.cond, self.box = prefix, cond, box
        self.serial = itertools.count()
        self.asks: collections.deque[_Ask] = collections.deque()  # oldest first
        self.by_reply: dict[str, _Ask] = {}
        self.removed = removed
        #: The server's count of messages (on the filter) after the last one given, None before the first.
        self.pending: int | None = None

    def read(self, start: int, end: int) -> Generator[Row, None, int]:
        """Every page from ``start`` until ``end`` or the stream's end.

        Returns:
            ``end`` when the range is read to its end (its last sequence given,
            or a message past it answered); else the last sequence given, where
            the replica that answered had nothing more.
        """
        nxt = start  # windows: the first sequence not yet asked for
        last = start - 1  # the last sequence given
        while True:
            if self.windows:
                while len(self.asks) < 2 and nxt <= end:
                    count = min(self.batch, end - nxt + 1)
                    self._ask(nxt, count)
                    nxt += count
            elif not self.asks and last < end:
                self._ask(last + 1, min(self.batch, end - last))
            if not self.asks:
                return last
            front = self.asks[0]
            for msg in self._answers(front):
                hdr = msg.raw_headers
                assert hdr is not None  # _answers checked it
                if hdr[8:9] == b" ":  # a status line: the page ended
                    if not self._more(front, hdr, last):
                        if self.pending and self.removed is not None:  # some were pending after the last one
                            self.removed(last + 1)
                        return last
                    break
                front.answered += 1
                subj, seq, ts_us, own, left = _direct_fields(hdr, self.stream)
                if seq <= last:
                    continue  # also in the window before (deleted messages made that page reach into this one)
                if seq > end:
                    return end
                if self.removed is not None and left is not None:
                    # Each count is the page's own (taken when the server began it): between pages it falls
                    # by one a message given, and by more when messages still to give were removed.
                    if self.pending is not None and left < self.pending - 1:
                        self.removed(last + 1)
                    self.pending = left
                yield subj, seq, ts_us, own, msg.data
                last = seq
                if seq >= end:
                    return end

    def _ask(self, first: int, count: int, front: bool = False) -> None:
        a = _Ask(f"{self.prefix}.{next(self.serial)}", first, count)
        self.by_reply[a.reply] = a
        if front:
            self.asks.appendleft(a)
        else:
            self.asks.append(a)
        body = {"seq": first, "batch": count, "next_by_subj": self.subject, "max_bytes": self.max_bytes}
        self.core.publish(self.api, msgspec.json.encode(body), reply=a.reply)

    def _answers(self, front: _Ask) -> Iterator[Msg]:
        """The answers to the oldest page, up to its status line (the end of the page); the answers
        to later pages that come meanwhile are kept for them."""
        what = f"reading {self.stream!r} from {front.first}"
        while True:
            if not front.got:
                for msg in _take(self.cond, self.box, self.wait, what):
                    a = self.by_reply.get(msg.subject)
                    if a is not None:  # else: an answer to a page given up on
                        a.got.append(msg)
                continue
            got, front.got = front.got, []
            for msg in got:
                hdr = msg.raw_headers
                if hdr is None:
                    raise JetStreamError(f"reading {self.stream!r}: a direct get answer without headers")
                yield msg
                if hdr[8:9] == b" ":
                    return

    def _more(self, front: _Ask, hdr: bytes, last: int) -> bool:
        """After the oldest page's status line: is there more to read? (Asks for the rest of a
        window cut short.)

        Raises:
            JetStreamError: the server refused the page.
            ReadGap: an empty page said messages were pending (asking again would repeat it).
        """
        self.asks.popleft()
        del self.by_reply[front.reply]
        code = int(hdr[9:12])
        if code == 404:
            return False  # nothing (matching) stored from the page's first sequence on
        if code != 204:
            status = hdr[9:hdr.find(b"\r")].decode("utf-8", "replace")
            raise JetStreamError(f"reading {self.stream!r}: {status}", code=code, stream=self.stream)
        if _header_int(hdr, b"Nats-Num-Pending") == 0:
            return False  # nothing stored after the page's last message
        if front.answered == 0:
            raise ReadGap(f"reading {self.stream!r}: an empty page from {front.first} with messages pending")
        window_end = front.first + front.count - 1
        if self.windows and last < window_end:  # cut short: the rest of its window before the next one
            self._ask(last + 1, window_end - last, front=True)
        return True


def _next_stored(js: JetStream, stream: str, seq: int, subject: str | None, wait: float) -> int | None:
    """The first sequence at or after ``seq`` (on ``subject``) stored on the stream's leader; None when none.

    Asked of the leader (``STREAM.MSG.GET``), not by direct get, which any replica may answer.

    Raises:
        NatsError: the server's error, or no answer.
    """
    body = msgspec.json.encode({"seq": seq, "next_by_subj": subject or ">"})
    msg = js.nc.request(f"{js.api_prefix}.STREAM.MSG.GET.{stream}", body, timeout=wait)
    try:
        resp = msgspec.json.decode(msg.data)
        err = resp.get("error")
        if err:
            exc = jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""), stream)
            if isinstance(exc, MsgNotFoundError):
                return None
            raise exc
        return int(resp["message"]["seq"])
    except (msgspec.DecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise JetStreamError(f"stream {stream!r}: unexpected answer to a message get: {msg.data[:100]!r}") from exc


_META = b"\r\nNats-Stream:"
#: What the server appends to a message's own headers in a direct get answer, in the order every
#: server so far writes it (anything else goes through the general parser).
_DIRECT_META = re.compile(rb"\r\nNats-Stream: [^\r]*\r\nNats-Subject: ([^\r]*)\r\nNats-Sequence: (\d+)\r\n"
                          rb"Nats-Time-Stamp: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z\r\n"
                          rb"Nats-Num-Pending: (\d+)\r\n")


def _header_int(hdr: bytes, key: bytes) -> int | None:
    i = hdr.find(b"\r\n" + key + b":")
    if i < 0:
        return None
    j = hdr.find(b"\r\n", i + 3 + len(key))
    return int(hdr[i + 3 + len(key):j])


def _direct_fields(hdr: bytes, stream: str) -> tuple[str, int, int, bytes | None, int | None]:
    """A direct get answer's header block as (subject, sequence, time in µs, the message's
    own header block or None, messages pending after it).

    The server appends what it adds (``Nats-Stream``, ``Nats-Subject``, ...)
    after the message's own headers; those are given back as a block of their own.

    Raises:
        JetStreamError: the block lacks the sequence or the subject.
    """
    m = _DIRECT_META.search(hdr)
    if m is not None:  # one C call: the common case
        subject, seq, whole, frac, pending = m.groups()
        base = _SECONDS.get(whole)
        if base is None:
            base = _second(whole)
        i = m.start()
        return (subject.decode(), int(seq), base * 1_000_000 + (int((frac + b"00000")[:6]) if frac else 0),
                hdr[:i + 2] + b"\r\n" if i > 8 else None, int(pending))  # i == 8: right after the status line
    i = hdr.rfind(_META)
    if i < 0:
        raise JetStreamError(f"reading {stream!r}: a direct get answer without its Nats-Stream header")
    own = hdr[:i + 2] + b"\r\n" if i > 8 else None
    subject_text: str | None = None
    seq_no: int | None = None
    ts_us = 0
    left: int | None = None
    for line in hdr[i + 2:].split(b"\r\n"):
        key, _, value = line.partition(b":")
        if key == b"Nats-Subject":
            subject_text = value.strip().decode()
        elif key == b"Nats-Sequence":
            seq_no = int(value)
        elif key == b"Nats-Time-Stamp":
            ts_us = _time_us(value.strip())
        elif key == b"Nats-Num-Pending":
            left = int(value)
    if seq_no is None or subject_text is None:
        raise JetStreamError(f"reading {stream!r}: a direct get answer without its sequence or subject")
    return subject_text, seq_no, ts_us, own, left


_SECONDS: dict[bytes, int] = {}  # "YYYY-MM-DDTHH:MM:SS" -> seconds since the epoch


def _second(whole: bytes) -> int:
    """Seconds since the epoch of a UTC ``YYYY-MM-DDTHH:MM:SS``, remembered (a range's messages share few)."""
    if len(_SECONDS) > 4096:
        _SECONDS.clear()
    base = _SECONDS[whole] = calendar.timegm(time.strptime(whole.decode(), "%Y-%m-%dT%H:%M:%S"))
    return base


def _time_us(value: bytes) -> int:
    """An RFC 3339 time as the server writes it (UTC, up to nanoseconds) in µs since the epoch.

    The whole seconds are looked up once per distinct second (a range's
    messages share few), the fraction is read as digits.
    """
    head, rest = value[:19], value[19:]
    base = _SECONDS.get(head)
    if base is None:
        base = _second(head)
    if rest == b"Z":
        return base * 1_000_000
    if rest[:1] == b"." and rest[-1:] == b"Z" and rest[1:-1].isdigit():
        return base * 1_000_000 + int((rest[1:-1] + b"00000")[:6])
    # Another offset: rare; the general parser (fraction cut to microseconds).
    text = value.decode().replace("Z", "+00:00")
    dot = text.find(".", 19)
    if dot > 0:
        tz = max(text.find("+", dot), text.find("-", dot))
        frac_end = tz if tz > 0 else len(text)
        text = text[:dot] + text[dot:frac_end][:7] + text[frac_end:]
    t = datetime.datetime.fromisoformat(text)
    return (t - _EPOCH) // datetime.timedelta(microseconds=1)


def _request_ended(hdr: bytes, reply: str | None, stream: str, budget: int) -> bool:
    """A status message of a pull of ``budget`` bytes: True when its request ended early (ask
    again), False for a heartbeat.

    Raises:
        JetStreamError: the pull took nothing, the next message being larger than a whole pull
            (asking again would be refused the same way at once, for ever).
        NatsError: the error the status stands for (a gap when it has none).
    """
    st = classify(hdr, reply)
    if st.too_large and st.pending_bytes >= budget:
        raise JetStreamError(f"reading {stream!r}: the next message is larger than a pull of {budget} bytes",
                             code=409, stream=stream)
    if st.kind in (Kind.REQUEST_ENDED, Kind.LIMIT, Kind.RESET):
        return True
    if st.kind is Kind.HEARTBEAT:
        return False
    err = st.error()
    raise err if err is not None else ReadGap(f"reading {stream!r}: status {st.code}")


def _reply_sequences(reply: str, stream: str) -> tuple[int, int, int, int]:
    """Stream sequence, consumer sequence, timestamp (ns) and pending count from an ack subject."""
    if reply.count(".") == 8:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>: fast
        _, sseq, cseq, ts, left = reply.rsplit(".", 4)
        return int(sseq), int(cseq), int(ts), int(left)
    seqs = sequences(reply)
    if seqs is None:
        raise ReadGap(f"reading {stream!r}: a message without its sequences ({reply!r})")
    return seqs.stream_seq, seqs.consumer_seq, seqs.timestamp_ns, seqs.pending


def _read_pulled(js: JetStream, stream: str, start: int, end: int, subjects: list[str], batch: int,
                 wait: float, removed: Removed | None) -> Iterator[Row]:
    """The range through an ephemeral consumer whose messages are taken in bulk.

    The client's reader thread appends each delivered message to a list; this
    thread takes the whole list at once (one lock round per block, not per
    message). Every message is checked
    in order by its consumer sequence (a skip raises :class:`ReadGap`, and the
    caller reads again from the first sequence not yet given, as an ordered
    consumer would); the server's statuses are read by the one classifier.

    The consumer is deleted (waiting for the answer) when the range is read or
    the read fails. A generator closed before its end, by its caller or by the
    garbage collector on whatever thread it runs, hands the release to the
    client's timer thread (:meth:`CoreLink.releasing`), which unsubscribes and
    asks for the delete without waiting.
    """
    core = link(js.nc)
    inbox = core.new_inbox()
    cond, box, route = _collector()
    handle = core.route_internal(inbox, route)
    made: list[str] = []  # the consumer's name, until it is deleted

    def release() -> None:
        # Waits for nothing: when the generator is closed by the garbage
        # collector this runs on the client's timer thread (the collecting
        # thread may hold the connection's lock, which cancel() takes).
        handle.cancel()
        if made:  # not deleted yet: ask the server to, without waiting for its answer
            core.publish(f"{js.api_prefix}.CONSUMER.DELETE.{stream}.{made.pop()}", b"", reply=core.new_inbox())

    with core.releasing(release):
        yield from _pulled(core, js, stream, start, end, subjects, batch, wait, inbox, cond, box, made, removed)
        _delete_consumer(js, stream, made, wait)


def _drained(js: JetStream, stream: str, consumer: str, received: int, wait: float) -> bool:
    """Has a range read's consumer nothing left to give (asked when a pull ended, or idled, with nothing)?

    The rest of the range may be gone: purged, deleted or expired after the
    last message came, which said more were pending. Nothing can be added at
    or before the range's end, so a consumer with none pending that has
    delivered only the ``received`` messages (none still on the way) is done.
    """
    info = js.consumer(stream, consumer, timeout=wait).cached_info
    return info.num_pending == 0 and info.delivered.consumer_seq <= received


def _delete_consumer(js: JetStream, stream: str, made: list[str], wait: float) -> None:
    """Delete the read's consumer and wait for the answer (the task's end must not leave it behind)."""
    if made:
        try:
            js.delete_consumer(stream, made[0], timeout=wait)
        except NatsError:
            pass  # the server removes it after inactive_threshold
        made.clear()


def _pulled(core: CoreLink, js: JetStream, stream: str, start: int, end: int, subjects: list[str], batch: int,
            wait: float, inbox: str, cond: threading.Condition, box: list[list[Msg]], made: list[str],
            removed: Removed | None) -> Iterator[Row]:
    """The body of :func:`_read_pulled`: creates the consumer (named in ``made``) and reads it.

    One pull is outstanding at a time, asking for at most ``batch`` messages
    and :func:`pull_bytes` bytes: the server sends a pull's messages at once,
    and more than its ``max_pending`` bytes queued for a client disconnect it
    as a slow consumer. The next pull goes out when the server ended the last
    one (a status), or when it has sent the pull's messages or bytes (counted
    as the server counts them, which ends such a pull without a status).
    A pull that ends or idles with nothing asks whether the consumer is
    drained (:func:`_drained`): the rest of the range may have been removed
    after the last message said more were pending.
    """
    try:
        consumer = js.create_consumer(
            stream, deliver_policy="by_start_sequence", opt_start_seq=start, ack_policy="none",
            filter_subjects=subjects or None, inactive_threshold=60.0, mem_storage=True, num_replicas=1,
            max_waiting=16)
        made.append(consumer.name)
        if consumer.cached_info.num_pending == 0:
            return
        budget = pull_bytes(core)
        body = pull_request(batch, server_expiry(wait), heartbeat=min(5.0, wait / 4), max_bytes=budget)
        subject = consumer.next_subject
        core.publish(subject, body, reply=inbox)
        expected = 1  # the next consumer sequence
        served = served_bytes = 0  # what came since the last pull went out
        last, left = start - 1, None  # the last sequence given and the consumer's count pending after it
        while True:
            for msg in _take(cond, box, wait, f"reading {stream!r} from {start}"):
                hdr = msg.raw_headers
                if hdr is not None and hdr[8:9] == b" ":  # a status line: the server speaking
                    ended = _request_ended(hdr, msg.reply, stream, budget)
                    if served == 0 and _drained(js, stream, made[0], expected - 1, wait):
                        if left and removed is not None:  # some were pending after the last one
                            removed(last + 1)
                        return
                    if ended:
                        served = served_bytes = 0
                        core.publish(subject, body, reply=inbox)  # the pull ended early: ask again
                    continue
                reply = msg.reply or ""
                seq, cons, ts_ns, pending = _reply_sequences(reply, stream)
                if cons != expected:
                    raise ReadGap(f"reading {stream!r}: consumer sequence {cons}, expected {expected}")
                expected += 1
                if seq > end:
                    return
                if removed is not None and left is not None and pending < left - 1:
                    removed(last + 1)  # the consumer's count fell by more than this message
                last, left = seq, pending
                yield msg.subject, seq, ts_ns // 1000, hdr, msg.data
                if seq >= end or pending == 0:
                    return
                served += 1
                # As the server counts a message against a pull's max_bytes.
                served_bytes += len(msg.subject) + len(reply) + len(hdr or b"") + len(msg.data)
                if served == batch or served_bytes >= budget:  # the pull is served: the next one
                    served = served_bytes = 0
                    core.publish(subject, body, reply=inbox)
    except NatsError:
        _delete_consumer(js, stream, made, wait)  # a failure on this thread: delete it before it is raised
        raise
