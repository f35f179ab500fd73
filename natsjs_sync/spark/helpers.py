"""Partition helpers: publish a partition's rows, read a range of a stream.

Both run on executors with the process's shared client (``cfg.client()``) and
finish their work before returning: Spark's Python workers may leave with
``os._exit``, so nothing may be left for atexit or ``__del__``.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from .._backoff import Backoff
from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    JetStreamError,
    MsgNotFoundError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    TimeoutError,
)
from ..jetstream import PubAck, RawStreamMsg
from ..protocol.headers import Headers, parse_headers
from ..protocol.jetstream.ackreply import sequences
from .config import NatsConfig

RowFn = Callable[[Any], Any]
T = TypeVar("T")

_RIDE_OUT = Backoff(0.2, 2.0, jitter=0.2)


def transient(exc: BaseException) -> bool:
    """Would the same call succeed once the server is back (a restart, a leader election)?"""
    if isinstance(exc, (AuthorizationError, ConnectionClosedError)):
        return False
    if isinstance(exc, (TimeoutError, NoRespondersError, NatsConnectionError)):
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

    Short ranges are read by batched direct get when the stream allows it,
    longer ones with an ephemeral ordered consumer (faster per message). Either
    way nothing is left behind on the server and a repeat gives the same rows,
    which Spark's retries and speculative tasks need.
    """
    for subject, seq, ts_us, headers, data in iter_range(cfg, stream, start_seq, end_seq, subjects, batch, timeout):
        if isinstance(headers, bytes):
            headers = parse_headers(headers)[2]
        yield RawStreamMsg(subject=subject, seq=seq, data=data, headers=headers,
                           time=_EPOCH + datetime.timedelta(microseconds=ts_us), stream=stream)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DIRECT_MAX = 1000  # ranges up to this long use direct get


def iter_range(
    cfg: NatsConfig,
    stream: str,
    start_seq: int = 1,
    end_seq: int | None = None,
    subjects: Sequence[str] | None = None,
    batch: int = 500,
    timeout: float | None = None,
) -> Iterator[tuple[str, int, int, Headers | bytes | None, bytes]]:
    """:func:`read_range` as plain tuples ``(subject, seq, time in µs since the
    epoch, headers, data)``: what the data source turns into columns. The
    headers are None, a :class:`Headers`, or the header block as received
    (``bytes``, not parsed: the caller parses what it needs)."""
    js = cfg.jetstream()
    st = ride_out(cfg, lambda: js.stream(stream))
    wait = cfg.timeout if timeout is None else timeout
    if end_seq is None:
        end_seq = ride_out(cfg, st.info).state.last_seq
    subjects = list(subjects or [])
    # Batched direct get needs server 2.11; older ones read through an ordered consumer.
    direct = st.cached_info.config.allow_direct and len(subjects) <= 1 and end_seq - start_seq < _DIRECT_MAX \
        and js.supports("direct_get_batch")
    nxt = start_seq
    until: float | None = None  # the end of the ride-out budget, while the server is away
    attempt = 0
    while nxt <= end_seq:
        try:
            if direct:
                for raw in _read_direct(st, nxt, end_seq, subjects[0] if subjects else None, batch, wait):
                    t = raw.time
                    ts_us = (t - _EPOCH) // datetime.timedelta(microseconds=1) if t is not None else 0
                    nxt = raw.seq + 1
                    until, attempt = None, 0
                    yield raw.subject, raw.seq, ts_us, raw.headers, raw.data
            else:
                for item in _read_ordered(js, stream, nxt, end_seq, subjects, batch, wait):
                    nxt = item[1] + 1
                    until, attempt = None, 0
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
            time.sleep(delay)


def _read_direct(st: Any, start: int, end: int, subject: str | None, batch: int,
                 wait: float) -> Iterator[RawStreamMsg]:
    seq = start
    while seq <= end:
        got = 0
        try:
            for raw in st.direct_get_batch(seq=seq, batch=min(batch, end - seq + 1), subject=subject,
                                           timeout=wait):
                if raw.seq > end:
                    return
                got += 1
                seq = raw.seq + 1
                yield raw
        except MsgNotFoundError:
            return
        if got == 0:
            return


def _read_ordered(js: Any, stream: str, start: int, end: int, subjects: list[str], batch: int,
                  wait: float) -> Iterator[tuple[str, int, int, bytes | None, bytes]]:
    oc = js.ordered_consumer(stream, filter_subjects=subjects or None, deliver_policy="by_start_sequence",
                             opt_start_seq=start, inactive_threshold=60.0)
    it = oc.messages(max_messages=max(batch, 1000))
    try:
        info = oc.cached_info
        if info is not None and info.num_pending == 0:
            return
        while True:
            try:
                msg = it.next(timeout=wait)
            except TimeoutError:
                raise TimeoutError(f"reading {stream!r} from {start}: nothing within {wait} s") from None
            # The ordered consumer checked the reply already; only three numbers are wanted
            # here, read from the end of the common 9-token form without a second full parse.
            reply = msg.reply
            if reply.count(".") == 8:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
                _, sseq, _, ts, left = reply.rsplit(".", 4)
                seq, ts_ns, pending = int(sseq), int(ts), int(left)
            else:
                seqs = sequences(msg.reply)
                assert seqs is not None  # the ordered consumer only delivers what it checked
                seq, ts_ns, pending = seqs.stream_seq, seqs.timestamp_ns, seqs.pending
            if seq > end:
                return
            yield msg.subject, seq, ts_ns // 1000, msg.raw_headers, msg.data
            if seq >= end or pending == 0:
                return
    finally:
        it.stop()  # also deletes the ordered consumer
