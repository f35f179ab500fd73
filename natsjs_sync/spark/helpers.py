"""Partition helpers: publish a partition's rows, read a range of a stream.

Both run on executors with the process's shared client (``cfg.client()``) and
finish their work before returning: Spark's Python workers may leave with
``os._exit``, so nothing may be left for atexit or ``__del__``.
"""

from __future__ import annotations

import calendar
import collections
import contextlib
import datetime
import decimal
import heapq
import itertools
import re
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from .._backoff import Backoff
from .._core.spi import link
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
from ..jetstream import PubAck, RawStreamMsg
from ..jetstream.pull import pull_request, server_expiry
from ..msg import Msg
from ..protocol.headers import Headers, parse_headers
from ..protocol.jetstream.ackreply import sequences
from ..protocol.jetstream.status import Kind, classify
from ..protocol.subjects import subject_covers, subject_matches, subjects_collide
from .config import NatsConfig

RowFn = Callable[[Any], Any]
T = TypeVar("T")

_RIDE_OUT = Backoff(0.2, 2.0, jitter=0.2)


def transient(exc: BaseException) -> bool:
    """Would the same call succeed once the server is back (a restart, a leader election)?"""
    if isinstance(exc, (AuthorizationError, ConnectionClosedError)):
        return False
    if isinstance(exc, (TimeoutError, NoRespondersError, NatsConnectionError, _Gap)):
        return True
    return isinstance(exc, JetStreamError) and exc.code == 503


def ride_out(cfg: NatsConfig, call: Callable[[], T]) -> T:
    """``call()``, tried again while it fails with a :func:`transient` error,
    for at most ``cfg.retry_timeout`` seconds (then the last error is raised)."""
    until = time.monotonic() + cfg.retry_timeout
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


@dataclass(frozen=True)
class PublishResult:
    """What :func:`publish_partition` did: messages stored, and repeats the
    stream recognised by their msg id (a retried task) and did not store again."""

    published: int = 0
    duplicates: int = 0

    def __add__(self, other: PublishResult) -> PublishResult:
        return PublishResult(self.published + other.published, self.duplicates + other.duplicates)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (datetime.datetime, datetime.date)):
        return obj.isoformat()
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).hex()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


_json = msgspec.json.Encoder(enc_hook=_json_default)


def _as_dict(row: Any) -> Mapping[str, Any] | None:
    if isinstance(row, Mapping):
        return row
    as_dict = getattr(row, "asDict", None)
    if as_dict is not None:
        return as_dict(recursive=True)  # type: ignore[no-any-return]
    return None


def row_payload(row: Any) -> bytes:
    """The message body for a row: bytes or str as they are; a row (or dict)
    with a ``data`` field, that field; any other row, its JSON."""
    if isinstance(row, (bytes, bytearray, memoryview)):
        return bytes(row)
    if isinstance(row, str):
        return row.encode()
    d = _as_dict(row)
    if d is None:
        raise TypeError(f"cannot publish a {type(row).__name__}: give bytes, str, a Row or a dict")
    if "data" in d:
        data = d["data"]
        if data is None:
            return b""
        return data.encode() if isinstance(data, str) else bytes(data)
    return _json.encode(d)


def _field(spec: str | RowFn | None, row: Any) -> Any:
    if spec is None:
        return None
    if callable(spec):
        return spec(row)
    d = _as_dict(row)
    if d is None:
        raise TypeError(f"cannot take column {spec!r} from a {type(row).__name__}")
    return d[spec]


def publish_partition(
    cfg: NatsConfig,
    subject: str | RowFn,
    rows: Iterable[Any],
    msg_id: str | RowFn | None = None,
    headers: Mapping[str, str] | RowFn | None = None,
    data: str | RowFn | None = None,
    window: int = 2000,
    timeout: float | None = None,
) -> PublishResult:
    """Publish every row of a partition to JetStream and wait for every ack.

    For ``df.foreachPartition(lambda rows: publish_partition(cfg, "orders.new", rows, msg_id=...))``.

    Args:
        subject: a subject, or ``row -> subject``.
        msg_id: a column name or ``row -> id``; with it a retried task stores
            nothing twice (within the stream's duplicate window).
        headers: a mapping, or ``row -> mapping``.
        data: a column name or ``row -> bytes``; default :func:`row_payload`.
        window: publishes in flight at most.

    Raises:
        NatsError: the first failure, after every other publish finished (so
            Spark can retry the task; msg ids keep the retry from duplicating).
    """
    js = cfg.jetstream()
    wait = cfg.timeout if timeout is None else timeout
    inflight: collections.deque[Future[PubAck]] = collections.deque()
    published = duplicates = 0
    first_error: BaseException | None = None

    def settle(fut: Future[PubAck]) -> None:
        nonlocal published, duplicates, first_error
        try:
            ack = fut.result(timeout=wait)
        except BaseException as exc:  # kept, and raised after the rest finish
            if first_error is None:
                first_error = exc
            return
        if ack.duplicate:
            duplicates += 1
        else:
            published += 1

    for row in rows:
        subj = subject(row) if callable(subject) else subject
        payload = row_payload(row) if data is None else _field(data, row)
        if isinstance(payload, str):
            payload = payload.encode()
        mid = _field(msg_id, row)
        hdrs = headers(row) if callable(headers) else headers
        try:
            inflight.append(js.publish_async(subj, payload, headers=hdrs,
                                             msg_id=None if mid is None else str(mid)))
        except NatsError as exc:
            first_error = first_error or exc
            break
        if len(inflight) >= window:
            settle(inflight.popleft())
    while inflight:
        settle(inflight.popleft())
    if first_error is not None:
        raise first_error
    return PublishResult(published, duplicates)


def read_range(
    cfg: NatsConfig,
    stream: str,
    start_seq: int = 1,
    end_seq: int | None = None,
    subjects: Sequence[str] | None = None,
    batch: int = 500,
    timeout: float | None = None,
) -> Iterator[RawStreamMsg]:
    """The stream's messages with ``start_seq <= seq <= end_seq`` (to the current
    end when ``end_seq`` is None), optionally only on ``subjects``, in order.

    The range is read by batched direct get when the server (2.11 and newer)
    and the stream (``allow_direct``) allow it: no consumer, and any replica
    answers. Otherwise it is read with an ephemeral consumer whose messages are
    taken in bulk and checked in order. Either way nothing is left behind on
    the server and a repeat gives the same rows, which Spark's retries and
    speculative tasks need.
    """
    for subject, seq, ts_us, headers, data in iter_range(cfg, stream, start_seq, end_seq, subjects, batch, timeout):
        if isinstance(headers, bytes):
            headers = parse_headers(headers)[2]
        yield RawStreamMsg(subject=subject, seq=seq, data=data, headers=headers,
                           time=_EPOCH + datetime.timedelta(microseconds=ts_us), stream=stream)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def iter_range(
    cfg: NatsConfig,
    stream: str,
    start_seq: int = 1,
    end_seq: int | None = None,
    subjects: Sequence[str] | None = None,
    batch: int = 500,
    timeout: float | None = None,
    direct: bool | None = None,
) -> Iterator[tuple[str, int, int, Headers | bytes | None, bytes]]:
    """:func:`read_range` as plain tuples ``(subject, seq, time in µs since the
    epoch, headers, data)``: what the data source turns into columns. The
    headers are None, a :class:`Headers`, or the header block as received
    (``bytes``, not parsed: the caller parses what it needs).

    Args:
        direct: read by batched direct get (True) or through a consumer
            (False), as the caller already knows from the stream's info
            (:func:`reads_directly`); None asks the stream's leader. With it
            and ``end_seq``, a read makes no request to the leader at all
            (a thousand tasks asking at once queue on its JetStream API).
            After a failure the next attempt asks the leader again.
    """
    js = cfg.jetstream()
    wait = cfg.timeout if timeout is None else timeout
    if end_seq is None or direct is None:
        info = ride_out(cfg, lambda: js.stream(stream)).cached_info
        direct = reads_directly(js, info)
        end_seq = info.state.last_seq if end_seq is None else end_seq
    subjects, filter_here = _read_filters(subjects or ())
    nxt = start_seq
    until: float | None = None  # the end of the ride-out budget, while the server is away
    attempt = 0
    while nxt <= end_seq:
        try:
            if direct is None:  # after a failure: the stream may have changed (allow_direct turned off)
                direct = ride_out(cfg, lambda: reads_directly(js, js.stream(stream).cached_info))
            keep = None
            if direct:
                rows = _read_direct_subjects(cfg, js, stream, nxt, end_seq, subjects, batch, wait)
            elif filter_here is None:
                rows = _read_pulled(cfg, js, stream, nxt, end_seq, subjects, batch, wait)
            else:  # filters a consumer refuses together: read it all, keep what matches
                rows, keep = _read_pulled(cfg, js, stream, nxt, end_seq, [], batch, wait), filter_here
            for item in rows:
                nxt = item[1] + 1
                until, attempt = None, 0
                if keep is None or any(subject_matches(p, item[0]) for p in keep):
                    yield item
            return
        except NatsError as exc:
            # Go on from the first sequence not yet given, once the server is back.
            now = time.monotonic()
            until = now + cfg.retry_timeout if until is None else until
            attempt += 1
            delay = _RIDE_OUT.delay(attempt)
            if not transient(exc) or now + delay > until:
                raise
            direct = None
            time.sleep(delay)


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


def reads_directly(js: Any, info: Any) -> bool:
    """Does a range read of the stream with this info go by batched direct get (no consumer)?

    It does when the stream allows direct get and the server answers batched
    direct gets (2.11 and newer); otherwise it reads through an ephemeral consumer.
    """
    return bool(info.config.allow_direct) and bool(js.supports("direct_get_batch"))


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


def _read_direct_subjects(cfg: NatsConfig, js: Any, stream: str, start: int, end: int, subjects: list[str],
                          batch: int, wait: float) -> Iterator[tuple[str, int, int, bytes | None, bytes]]:
    """The range by batched direct get: unfiltered, on one filter, or merged in order from several.

    A direct get takes one filter subject, so several are read side by side and
    merged by sequence (a message matching two filters is given once).
    """
    if len(subjects) <= 1:
        yield from _read_direct(cfg, js, stream, start, end, subjects[0] if subjects else None, batch, wait)
        return
    with contextlib.ExitStack() as stack:
        reads = [stack.enter_context(contextlib.closing(
            _read_direct(cfg, js, stream, start, end, subject, batch, wait))) for subject in subjects]
        last = start - 1
        for item in heapq.merge(*reads, key=lambda row: row[1]):
            if item[1] != last:
                last = item[1]
                yield item


@dataclass
class _Ask:
    """One direct-get request in flight: its reply subject, first sequence and batch size."""

    reply: str
    first: int
    count: int
    got: int = 0  #: messages answered so far


def _read_direct(cfg: NatsConfig, js: Any, stream: str, start: int, end: int, subject: str | None, batch: int,
                 wait: float) -> Generator[tuple[str, int, int, bytes | None, bytes], None, None]:
    """The range (optionally on one filter ``subject``) by batched direct get: no consumer.

    Direct gets are answered by any replica of the stream, not only its
    leader. Each request has a reply subject of its own under one routed
    inbox, taken in bulk as :func:`_read_pulled` does. Unfiltered, the range is
    asked for in windows of ``batch`` sequences with two requests in flight
    (answers of the later one wait until the earlier one has ended, so rows
    come in order; a sequence given twice, where deleted messages made a batch
    reach into the next window, is given once). With a filter each request
    starts after the last message given.

    A read that ends before ``end`` (the replica had nothing more) asks the
    leader whether a message of the range is stored past it: a replica may be
    a moment behind the leader, which fixed ``end``. If one is, the read fails
    with :class:`_Gap` and :func:`iter_range` reads again from there.

    The inbox is released when the generator ends; when it is closed earlier
    (by its caller, or by the garbage collector on any thread) the release is
    handed to the client's timer thread.

    Raises:
        TimeoutError: no answer within ``wait`` seconds.
        JetStreamError: the server refused a request.
    """
    core = link(cfg.client())
    prefix = core.new_inbox()
    cond, box, route = _collector()
    handle = core.route_internal(prefix + ".*", route)
    with core.releasing(handle.cancel):
        last = yield from _direct(core, js, stream, start, end, subject, batch, wait, prefix, cond, box)
        if last < end:  # the replica ran out first (a message past ``end`` would have shown it had all)
            after = _next_stored(cfg, js, stream, last + 1, subject)
            if after is not None and after <= end:
                raise _Gap(f"reading {stream!r}: the replica that answered ended at {last}, the leader "
                           f"stores {after}")


def _direct(core: Any, js: Any, stream: str, start: int, end: int, subject: str | None, batch: int, wait: float,
            prefix: str, cond: threading.Condition, box: list[list[Msg]]
            ) -> Generator[tuple[str, int, int, bytes | None, bytes], None, int]:
    """The requests and answers of :func:`_read_direct`.

    Returns:
        ``end`` when the range is read to its end (its last sequence given, or
        a message past it answered); else the last sequence given, where the
        replica that answered had nothing more.
    """
    api = f"{js.api_prefix}.DIRECT.GET.{stream}"
    ahead = 2 if subject is None else 1  # requests in flight
    asks: collections.deque[_Ask] = collections.deque()  # oldest first
    answers: dict[str, list[Msg]] = {}
    serial = itertools.count()
    nxt = start  # the first sequence not yet asked for
    last = start - 1  # the last sequence given

    def ask(first: int, count: int, front: bool = False) -> None:
        req: dict[str, Any] = {"seq": first, "batch": count}
        if subject is not None:
            req["next_by_subj"] = subject
        a = _Ask(f"{prefix}.{next(serial)}", first, count)
        answers[a.reply] = []
        if front:
            asks.appendleft(a)
        else:
            asks.append(a)
        core.publish(api, msgspec.json.encode(req), reply=a.reply)

    while True:
        while len(asks) < ahead and nxt <= end:
            nxt = max(nxt, last + 1)
            count = min(batch, end - nxt + 1)
            ask(nxt, count)
            nxt += count
        if not asks:
            return last
        front = asks[0]
        got = answers[front.reply]
        while not got:
            for msg in _take(cond, box, wait, f"reading {stream!r} from {front.first}"):
                dest = answers.get(msg.subject)
                if dest is not None:  # else: an answer to a request given up on
                    dest.append(msg)
        answers[front.reply] = []
        for msg in got:
            hdr = msg.raw_headers
            if hdr is None:
                raise JetStreamError(f"reading {stream!r}: a direct get answer without headers")
            if hdr[8:9] == b" ":  # a status line: the request ended
                code = int(hdr[9:12])
                if code == 404:
                    return last  # nothing stored from its first sequence on
                if code != 204:
                    status = hdr[9:hdr.find(b"\r")].decode("utf-8", "replace")
                    raise JetStreamError(f"reading {stream!r}: {status}", code=code, stream=stream)
                asks.popleft()
                del answers[front.reply]
                if _header_int(hdr, b"Nats-Num-Pending") == 0:
                    return last  # nothing stored after this batch
                if ahead > 1 and front.got < front.count and last + 1 < front.first + front.count:
                    # Cut short (a size limit): ask for the rest of its window before the next one.
                    ask(last + 1, front.first + front.count - last - 1, front=True)
                elif front.got == 0:
                    raise _Gap(f"reading {stream!r}: an empty batch from {front.first} with messages pending")
                break
            front.got += 1
            subj, seq, ts_us, own, pending = _direct_fields(hdr, stream)
            if seq <= last:
                continue  # also in the window before (deleted messages made that batch reach into this one)
            if seq > end:
                return end
            yield subj, seq, ts_us, own, msg.data
            last = seq
            if seq >= end:
                return end
            if pending == 0:
                return last


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


def _next_stored(cfg: NatsConfig, js: Any, stream: str, seq: int, subject: str | None) -> int | None:
    """The first sequence at or after ``seq`` (on ``subject``) stored on the stream's leader; None when none.

    Asked of the leader (``STREAM.MSG.GET``), not by direct get, which any replica may answer.

    Raises:
        NatsError: the server's error, or no answer.
    """
    body = msgspec.json.encode({"seq": seq, "next_by_subj": subject or ">"})
    msg = cfg.client().request(f"{js.api_prefix}.STREAM.MSG.GET.{stream}", body, timeout=cfg.timeout)
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


class _Gap(NatsError):
    """A message of the range went missing on the way (a consumer sequence skipped): read again from it."""


def _request_ended(hdr: bytes, reply: str | None, stream: str) -> bool:
    """A status message of a pull: True when its request ended early (ask again), False for a heartbeat.

    Raises:
        NatsError: the error the status stands for (a gap when it has none).
    """
    st = classify(hdr, reply)
    if st.kind in (Kind.REQUEST_ENDED, Kind.LIMIT, Kind.RESET):
        return True
    if st.kind is Kind.HEARTBEAT:
        return False
    err = st.error()
    raise err if err is not None else _Gap(f"reading {stream!r}: status {st.code}")


def _reply_sequences(reply: str, stream: str) -> tuple[int, int, int, int]:
    """Stream sequence, consumer sequence, timestamp (ns) and pending count from an ack subject."""
    if reply.count(".") == 8:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>: fast
        _, sseq, cseq, ts, left = reply.rsplit(".", 4)
        return int(sseq), int(cseq), int(ts), int(left)
    seqs = sequences(reply)
    if seqs is None:
        raise _Gap(f"reading {stream!r}: a message without its sequences ({reply!r})")
    return seqs.stream_seq, seqs.consumer_seq, seqs.timestamp_ns, seqs.pending


def _read_pulled(cfg: NatsConfig, js: Any, stream: str, start: int, end: int, subjects: list[str], batch: int,
                 wait: float) -> Iterator[tuple[str, int, int, bytes | None, bytes]]:
    """The range through an ephemeral consumer whose messages are taken in bulk.

    The client's reader thread appends each delivered message to a list; this
    thread takes the whole list at once (one lock round per block, not per
    message). Two pull requests are kept outstanding. Every message is checked
    in order by its consumer sequence (a skip raises :class:`_Gap`, and the
    caller reads again from the first sequence not yet given, as an ordered
    consumer would); the server's statuses are read by the one classifier.

    The consumer is deleted (waiting for the answer) when the range is read or
    the read fails. A generator closed before its end, by its caller or by the
    garbage collector on whatever thread it runs, hands the release to the
    client's timer thread (:meth:`CoreLink.releasing`), which unsubscribes and
    asks for the delete without waiting.
    """
    core = link(cfg.client())
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
        yield from _pulled(core, js, stream, start, end, subjects, batch, wait, inbox, cond, box, made)
        _delete_consumer(js, stream, made, wait)


def _delete_consumer(js: Any, stream: str, made: list[str], wait: float) -> None:
    """Delete the read's consumer and wait for the answer (the task's end must not leave it behind)."""
    if made:
        try:
            js.delete_consumer(stream, made[0], timeout=wait)
        except NatsError:
            pass  # the server removes it after inactive_threshold
        made.clear()


def _pulled(core: Any, js: Any, stream: str, start: int, end: int, subjects: list[str], batch: int, wait: float,
            inbox: str, cond: threading.Condition, box: list[list[Msg]], made: list[str]
            ) -> Iterator[tuple[str, int, int, bytes | None, bytes]]:
    """The body of :func:`_read_pulled`: creates the consumer (named in ``made``) and reads it."""
    try:
        consumer = js.create_consumer(
            stream, deliver_policy="by_start_sequence", opt_start_seq=start, ack_policy="none",
            filter_subjects=subjects or None, inactive_threshold=60.0, mem_storage=True, num_replicas=1,
            max_waiting=16)
        made.append(consumer.name)
        if consumer.cached_info.num_pending == 0:
            return
        body = pull_request(batch, server_expiry(wait), heartbeat=min(5.0, wait / 4))
        subject = consumer.next_subject
        for _ in range(2):
            core.publish(subject, body, reply=inbox)
        expected = 1  # the next consumer sequence
        served = 0  # messages of the oldest outstanding request
        while True:
            for msg in _take(cond, box, wait, f"reading {stream!r} from {start}"):
                hdr = msg.raw_headers
                if hdr is not None and hdr[8:9] == b" ":  # a status line: the server speaking
                    if _request_ended(hdr, msg.reply, stream):
                        served = 0
                        core.publish(subject, body, reply=inbox)  # a request ended early: ask again
                    continue
                seq, cons, ts_ns, pending = _reply_sequences(msg.reply or "", stream)
                if cons != expected:
                    raise _Gap(f"reading {stream!r}: consumer sequence {cons}, expected {expected}")
                expected += 1
                if seq > end:
                    return
                yield msg.subject, seq, ts_ns // 1000, hdr, msg.data
                if seq >= end or pending == 0:
                    return
                served += 1
                if served == batch:  # the oldest request is served: keep two outstanding
                    served = 0
                    core.publish(subject, body, reply=inbox)
    except NatsError:
        _delete_consumer(js, stream, made, wait)  # a failure on this thread: delete it before it is raised
        raise
