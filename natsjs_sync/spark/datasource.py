"""The PySpark data source ``jetstream``: batch and streaming, read and write.

::

    spark.dataSource.register(JetStreamDataSource)
    df = spark.read.format("jetstream").option("servers", url).load("ORDERS")
    df.write.format("jetstream").option("servers", url).option("subject", "orders.new").mode("append").save()

Options are checked on the driver (:mod:`natsjs_sync.spark.options`). Rows
have the schema :func:`schema_for` (``headers`` as a map, in Kafka's shape, or
left out). Offsets are stream sequences. A batch read fixes each stream's
sequence range when it is planned and cuts it into partitions, each read by
direct get or an ephemeral consumer (checked in order), so a re-read gives the
same rows and leaves nothing on the server; ``where()`` on ``seq``, ``stream``,
``subject`` and ``timestamp`` narrows that range (filter pushdown).

Writes publish every row with a ``Nats-Msg-Id`` (:mod:`natsjs_sync.spark.writer`):
the ``msg_id`` column, or one made from the write, the partition, the row's
content and how many identical rows came before it in the partition. A retried
task therefore sends the same ids for the same rows in whatever order it gets
them, and the stream stores each row once (within its duplicate window).
"""

from __future__ import annotations

import datetime
import logging
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..errors import JetStreamError, MsgNotFoundError, NatsError, NoServersError, StreamNotFoundError, jetstream_error
from ..jetstream import StreamInfo
from .config import NatsConfig
from .helpers import iter_range, reads_directly, ride_out
from .options import (
    _EARLIEST,
    _LATEST,
    Position,
    ReadOptions,
    WriteOptions,
    normalise,
    read_options,
    write_options,
)
from .writer import JetStreamBatchWriter, JetStreamStreamWriter, check_write_schema

_BASE_COLUMNS = "stream STRING, subject STRING, seq BIGINT, timestamp TIMESTAMP"
_HEADER_TYPES = {"map": "MAP<STRING, ARRAY<STRING>>", "kafka": "ARRAY<STRUCT<key: STRING, value: BINARY>>"}
#: The default schema (``includeHeaders`` true, ``headersFormat`` map).
SCHEMA = f"{_BASE_COLUMNS}, headers {_HEADER_TYPES['map']}, data BINARY"


def schema_for(ro: ReadOptions) -> str:
    """The read schema for these options."""
    if not ro.include_headers:
        return f"{_BASE_COLUMNS}, data BINARY"
    return f"{_BASE_COLUMNS}, headers {_HEADER_TYPES[ro.headers_format]}, data BINARY"


class DataLossError(JetStreamError):
    """Messages a streaming query still needed are gone (purged, expired, or the stream recreated)."""


def _not_found(stream: str) -> StreamNotFoundError:
    return StreamNotFoundError(f"stream {stream!r} (option 'stream') does not exist", code=404)


def _info(cfg: NatsConfig, stream: str) -> StreamInfo:
    try:
        return ride_out(cfg, lambda: cfg.jetstream().stream(stream).info())
    except StreamNotFoundError:
        raise _not_found(stream) from None


_TIME_MARGIN = datetime.timedelta(microseconds=1)  # more than rounding nanoseconds to microseconds moves a time


def _seq_at_time(cfg: NatsConfig, stream: str, t: datetime.datetime, last_seq: int) -> int:
    """The first sequence stored at or after ``t`` (``last_seq + 1`` when none).

    Asked of the server, which looks it up in the stream's index and answers
    with that sequence or "none": nothing waits for a message to arrive, so a
    slow server gives a slow answer, never an empty one. A failure is tried
    again within ``retry_timeout`` (:func:`ride_out`), then raised.

    The lookup (the server's, for ``by_start_time`` consumers as much as for
    this) assumes a stream's times never decrease as its sequences grow: the
    server stamps each message with its own clock when it stores it. After
    that clock stepped back, the answer is the first sequence of a stretch of
    times that reaches ``t``, not necessarily the only one.

    Raises:
        NatsError: the server's error, or no answer within ``retry_timeout``.
    """
    def find() -> int | None:
        js = cfg.jetstream()
        if js.supports("direct_get_batch"):  # 2.11 added start_time to the message get request
            try:
                return _get_seq_at_time(cfg, js, stream, t)
            except MsgNotFoundError:
                return None
            except JetStreamError as exc:
                if exc.code != 400:  # 400: a server that does not know start_time after all
                    raise
        return _consumer_seq_at_time(js, stream, t)

    seq = ride_out(cfg, find)
    return last_seq + 1 if seq is None else min(seq, last_seq + 1)


def _get_seq_at_time(cfg: NatsConfig, js: Any, stream: str, t: datetime.datetime) -> int:
    """The stream's first sequence at or after ``t``: one ``STREAM.MSG.GET`` with ``start_time``.

    Raises:
        MsgNotFoundError: no message at or after ``t``.
        JetStreamError: the server's error.
    """
    body = msgspec.json.encode({"start_time": t.astimezone(datetime.timezone.utc).isoformat()
                                .replace("+00:00", "Z")})
    msg = cfg.client().request(f"{js.api_prefix}.STREAM.MSG.GET.{stream}", body, timeout=cfg.timeout)
    try:
        resp = msgspec.json.decode(msg.data)
        err = resp.get("error")
        if err:
            raise jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""), stream)
        return int(resp["message"]["seq"])
    except (msgspec.DecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise JetStreamError(f"stream {stream!r}: unexpected answer to a message get: {msg.data[:100]!r}") from exc


def _consumer_seq_at_time(js: Any, stream: str, t: datetime.datetime) -> int | None:
    """The stream's first sequence at or after ``t``, from the info of a consumer
    created to start there (servers before 2.11): the server places the new
    consumer on that sequence and counts what is pending from it, without
    delivering anything. None when nothing is pending.

    Raises:
        NatsError: the consumer could not be created.
    """
    consumer = js.create_consumer(stream, deliver_policy="by_start_time", opt_start_time=t, ack_policy="none",
                                  inactive_threshold=60.0, mem_storage=True, num_replicas=1)
    try:
        info = consumer.cached_info
        return None if info.num_pending == 0 else int(info.delivered.stream_seq) + 1
    finally:
        try:
            js.delete_consumer(stream, consumer.name)
        except NatsError:
            pass  # the server removes it after inactive_threshold


def _resolve(cfg: NatsConfig, stream: str, pos: Position, info: StreamInfo) -> int:
    """A start position as the first sequence to read (``last + 1``: nothing)."""
    first, last = max(info.state.first_seq, 1), info.state.last_seq
    if pos.time is not None:
        return _seq_at_time(cfg, stream, pos.time, last)
    if pos.seq == _EARLIEST:
        return first
    if pos.seq == _LATEST:
        return last + 1
    assert pos.seq is not None
    return pos.seq


def _split(first: int, last: int, min_partitions: int, per_partition: int) -> list[tuple[int, int]]:
    """``[first, last]`` cut into at least ``min_partitions`` ranges of at most ``per_partition``."""
    count = last - first + 1
    if count <= 0:
        return []
    n = max(min_partitions, math.ceil(count / per_partition), 1)
    n = min(n, count)
    size = math.ceil(count / n)
    return [(s, min(s + size - 1, last)) for s in range(first, last + 1, size)]


@dataclass
class SequenceRange(InputPartition):
    """One task's share: sequences ``start`` to ``end`` (both included) of ``stream``."""

    stream: str
    start: int
    end: int
    subjects: tuple[str, ...] = ()
    #: Read by direct get (True) or through a consumer (False), as planned; None: the task asks.
    direct: bool | None = None


def _plan(ro: ReadOptions, ranges: dict[str, tuple[int, int]], subjects: tuple[str, ...],
          direct: frozenset[str] | None = None) -> list[SequenceRange]:
    """Each stream's range cut into partitions; ``minPartitions`` shared in proportion to size.

    A partition of a stream not in ``direct`` is read through a consumer of its
    own: those partitions are at most ``maxConsumers`` together (one each for
    more streams than that), so one read of a query holds no more consumers at
    once, whatever ``minPartitions`` and ``maxMessagesPerPartition`` ask for.
    A stream in ``direct`` is read by direct get and has no such limit. Each
    partition says which way it is read; with ``direct`` None (not known) every
    stream is capped and each task asks the stream's leader.
    """
    sizes = {stream: e - s + 1 for stream, (s, e) in ranges.items() if e - s + 1 > 0}
    total = sum(sizes.values())
    counts = {stream: len(_split(*ranges[stream], max(1, math.ceil(ro.min_partitions * n / total)),
                                 ro.per_partition)) for stream, n in sizes.items()}
    pulled = [stream for stream in sizes if direct is None or stream not in direct]
    if sum(counts[stream] for stream in pulled) > ro.max_consumers:
        counts.update(_cap(ro.max_consumers, {stream: sizes[stream] for stream in pulled}))
    parts: list[SequenceRange] = []
    for stream, n in counts.items():
        s, e = ranges[stream]
        parts.extend(SequenceRange(stream, a, b, subjects, None if direct is None else stream in direct)
                     for a, b in _split(s, e, n, max(1, math.ceil(sizes[stream] / n))))
    return parts


def _cap(limit: int, sizes: dict[str, int]) -> dict[str, int]:
    """``limit`` partitions shared among streams in proportion to their sizes, at least one each."""
    total = sum(sizes.values())
    counts = {stream: max(1, limit * n // total) for stream, n in sizes.items()}
    left = limit - sum(counts.values())
    for stream in sorted(sizes, key=lambda st: -sizes[st]):  # the rest to the largest
        if left <= 0:
            break
        counts[stream] += 1
        left -= 1
    return counts


_BLOCK = 8192  # rows per Arrow record batch
_PULL = 4000  # messages asked for per pull request: fewer round trips on long ranges


def _arrow_schema(ro: ReadOptions) -> Any:
    import pyarrow as pa

    fields = [("stream", pa.string()), ("subject", pa.string()), ("seq", pa.int64()),
              ("timestamp", pa.timestamp("us", tz="UTC"))]
    if ro.include_headers:
        if ro.headers_format == "map":
            fields.append(("headers", pa.map_(pa.string(), pa.list_(pa.string()))))
        else:
            fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    fields.append(("data", pa.binary()))
    return pa.schema(fields)


def _header_items(headers: Any) -> list[tuple[str, list[str]]]:
    """A message's headers as ``[(key, [values])]``, keys in order of first
    appearance: from the header block as received (``bytes``, parsed here
    without a :class:`Headers` per message) or from a :class:`Headers`."""
    if not isinstance(headers, bytes):
        return [(k, headers.get_all(k)) for k in headers]
    lines = headers.decode("utf-8", "replace").split("\r\n")
    if len(lines) == 4 and not lines[2] and not lines[3]:  # the common case: one header
        key, sep, value = lines[1].partition(":")
        return [(key, [value.strip()])] if sep else []
    out: dict[str, list[str]] = {}
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key, []).append(value.strip())
    return list(out.items())


_MSG_ID_ONLY = b"NATS/1.0\r\nNats-Msg-Id:"


def _header_column(cells: Sequence[Any], kafka: bool, header_type: Any) -> Any:
    """The headers column from each row's headers (None, bytes or Headers),
    built from flat key and value arrays (no Python object per map entry)."""
    import pyarrow as pa

    keys: list[str] = []
    values: list[Any] = []  # map: one value list per key; kafka: one bytes value per pair
    offsets = [0]
    valid: list[bool] = []
    msg_id_only, start = _MSG_ID_ONLY, len(_MSG_ID_ONLY)
    for cell in cells:
        if not kafka and isinstance(cell, bytes) and cell.startswith(msg_id_only) and cell.find(b"\r\n", start) \
                == len(cell) - 4:  # only a Nats-Msg-Id (what this source writes): no parsing
            keys.append("Nats-Msg-Id")
            values.append([cell[start:-4].decode("utf-8", "replace").strip()])
            valid.append(True)
        elif cell:
            for key, vals in _header_items(cell):
                if kafka:
                    for v in vals:
                        keys.append(key)
                        values.append(v.encode())
                else:
                    keys.append(key)
                    values.append(vals)
            valid.append(True)
        else:
            valid.append(False)
        offsets.append(len(keys))
    mask = None if all(valid) else pa.array([not v for v in valid], pa.bool_())
    offs = pa.array(offsets, pa.int32())
    if kafka:
        pairs = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                           fields=list(header_type.value_type))
        return pa.ListArray.from_arrays(offs, pairs, type=header_type, mask=mask)
    return pa.MapArray.from_arrays(offs, pa.array(keys, pa.string()), pa.array(values, pa.list_(pa.string())),
                                   type=header_type, mask=mask)


_RowTuple = tuple[str, int, int, Any, bytes]  # subject, seq, time in µs, headers, data (iter_range's rows)


def _rows(ro: ReadOptions, part: SequenceRange) -> Iterator[_RowTuple]:
    """The partition's messages as :func:`iter_range` gives them."""
    return iter_range(ro.cfg, part.stream, part.start, part.end, part.subjects or None, batch=_PULL,
                      direct=part.direct)


def _batches(ro: ReadOptions, part: SequenceRange, rows_in: Iterator[_RowTuple] | None = None) -> Iterator[Any]:
    """The partition's messages (``rows_in``, else :func:`_rows`) as Arrow record batches:
    columns built in bulk from blocks of rows, no Python object per cell on the way into Spark."""
    import pyarrow as pa

    schema = _arrow_schema(ro)
    with_headers = ro.include_headers
    kafka = ro.headers_format == "kafka"
    header_type = schema.field("headers").type if with_headers else None
    stream_type, subject_type, seq_type, time_type, data_type = (
        pa.string(), pa.string(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.binary())

    def block(rows: list[tuple[str, int, int, Any, bytes]]) -> Any:
        subj, seqs, times, hdrs, datas = zip(*rows, strict=True)
        arrays = [
            pa.repeat(pa.scalar(part.stream, stream_type), len(rows)),
            pa.array(subj, subject_type),
            pa.array(seqs, seq_type),
            pa.array(times, time_type),
        ]
        if with_headers:
            arrays.append(_header_column(hdrs, kafka, header_type))
        arrays.append(pa.array(datas, data_type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    rows: list[tuple[str, int, int, Any, bytes]] = []
    for row in _rows(ro, part) if rows_in is None else rows_in:
        rows.append(row)
        if len(rows) >= _BLOCK:
            yield block(rows)
            rows = []
    if rows:
        yield block(rows)


# ---------------------------------------------------------------------- filter pushdown

@dataclass
class Narrowing:
    """What pushed-down filters allow a batch read to skip."""

    seq_lo: int = 1
    seq_hi: int | None = None  #: inclusive
    streams: frozenset[str] | None = None
    subjects: tuple[str, ...] | None = None
    time_lo: datetime.datetime | None = None
    time_hi: datetime.datetime | None = None  #: inclusive
    nothing: bool = False  #: the filters contradict each other


def _aware(value: Any) -> datetime.datetime | None:
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.astimezone()  # Spark hands session-local naive times
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day).astimezone()
    return None


def _plain_subject(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not any(c in value for c in " *>") and ".." not in value \
        and not value.startswith(".") and not value.endswith(".")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _narrow_seq(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A filter on ``seq``: applied exactly by the range read (False), unless
    it is one the range cannot express (True: Spark applies it)."""
    if isinstance(f, In):
        if not f.value or not all(_is_int(v) for v in f.value):
            return True
        n.seq_lo = max(n.seq_lo, min(f.value))
        n.seq_hi = max(f.value) if n.seq_hi is None else min(n.seq_hi, max(f.value))
        return True  # the range holds more than the listed sequences
    if not _is_int(value):
        return True
    lo, hi = _SEQ_BOUNDS.get(type(f), (None, None))
    if lo is None and hi is None:
        return True
    if lo is not None:
        n.seq_lo = max(n.seq_lo, value + lo)
    if hi is not None:
        n.seq_hi = value + hi if n.seq_hi is None else min(n.seq_hi, value + hi)
    return False


#: Filter class -> (offset of the lowest sequence it admits, of the highest), from its value.
_SEQ_BOUNDS: dict[type, tuple[int | None, int | None]] = {
    EqualTo: (0, 0), GreaterThan: (1, None), GreaterThanOrEqual: (0, None),
    LessThan: (None, -1), LessThanOrEqual: (None, 0),
}


def _narrow_stream(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    if not isinstance(f, (EqualTo, In)):
        return True
    names = frozenset([f.value] if isinstance(f, EqualTo) else f.value)
    n.streams = names if n.streams is None else n.streams & names
    return False


def _narrow_subject(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A subject filter narrows the read when it names plain subjects or a
    ``x.`` prefix, and is always given back to Spark (a prefix matches more)."""
    if have_subjects or n.subjects is not None:
        return True
    if isinstance(f, EqualTo) and _plain_subject(value):
        n.subjects = (value,)
    elif isinstance(f, In) and f.value and all(_plain_subject(v) for v in f.value):
        n.subjects = tuple(sorted(set(f.value)))
    elif isinstance(f, StringStartsWith) and _plain_subject(value + "x") and value.endswith("."):
        n.subjects = (value + ">",)
    return True


def _narrow_time(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A time bound narrows the read to sequences (:func:`_seq_at_time`); Spark applies it again to the rows read.

    That re-check removes rows, it cannot bring back a row outside the range:
    the narrowing assumes, as the server's lookup by time does, that a stream's
    times never decrease as its sequences grow. A row stored after the server's
    clock stepped back, with a time inside the bounds but a sequence past the
    end of the stretch that reaches the bound, is not read; turn pushdown off
    (or filter on ``seq``) for a stream whose server clock stepped back.
    """
    t = _aware(value)
    if t is None:
        return True
    if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
        n.time_lo = t if n.time_lo is None else max(n.time_lo, t)
    elif isinstance(f, (LessThan, LessThanOrEqual)):
        n.time_hi = t if n.time_hi is None else min(n.time_hi, t)
    return True


_NARROWERS: dict[str, Callable[[Narrowing, Filter, Any, bool], bool]] = {
    "seq": _narrow_seq, "stream": _narrow_stream, "subject": _narrow_subject, "timestamp": _narrow_time,
}


def push_filters(n: Narrowing, filters: list[Filter], have_subjects: bool) -> Iterator[Filter]:
    """Narrow ``n`` by ``filters``; yield those Spark must still apply.

    Sequence and stream filters are applied exactly by the range read, so they
    are kept. Subject and time filters narrow the read and are given back to
    Spark too (a subject prefix matches more than its filter; a time bound, as
    a sequence, takes in a little more than the bound). Time filters assume
    the stream's times grow with its sequences (:func:`_narrow_time`).
    """
    for f in filters:
        attribute: tuple[str, ...] = getattr(f, "attribute", ())
        narrow = _NARROWERS.get(attribute[0]) if len(attribute) == 1 else None
        if narrow is None or narrow(n, f, getattr(f, "value", None), have_subjects):
            yield f
    if n.seq_hi is not None and n.seq_hi < n.seq_lo:
        n.nothing = True
    if n.streams is not None and not n.streams:
        n.nothing = True


# ---------------------------------------------------------------------- batch read

class JetStreamBatchReader(DataSourceReader):
    """Plans a batch read on the driver; reads a :class:`SequenceRange` on an executor."""

    def __init__(self, ro: ReadOptions):
        self.ro = ro
        self.narrowing = Narrowing()
        self._direct: set[str] = set()  # the streams planned to be read by direct get

    def _ranges(self) -> dict[str, tuple[int, int]]:
        ro, nw = self.ro, self.narrowing
        out: dict[str, tuple[int, int]] = {}
        if nw.nothing:
            return out
        for stream in ro.streams:
            if nw.streams is not None and stream not in nw.streams:
                continue
            info = _info(ro.cfg, stream)
            if reads_directly(ro.cfg.jetstream(), info):
                self._direct.add(stream)
            first, last = max(info.state.first_seq, 1), info.state.last_seq
            start = _resolve(ro.cfg, stream, ro.start[stream], info)
            end_pos = ro.end[stream]
            if end_pos.time is not None:
                end = _seq_at_time(ro.cfg, stream, end_pos.time, last) - 1
            elif end_pos.seq == _LATEST:
                end = last
            else:
                assert end_pos.seq is not None
                end = end_pos.seq - 1  # exclusive
            start = max(start, first, nw.seq_lo)
            end = min(end, last)
            if nw.seq_hi is not None:
                end = min(end, nw.seq_hi)
            # Time bounds only narrow the range, with a margin: the server keeps
            # nanoseconds, Spark's timestamps microseconds (rounded), and Spark
            # applies the time filter itself to the rows read.
            if start <= end and nw.time_lo is not None:
                start = max(start, _seq_at_time(ro.cfg, stream, nw.time_lo - _TIME_MARGIN, last))
            if start <= end and nw.time_hi is not None:
                after = _seq_at_time(ro.cfg, stream, nw.time_hi + _TIME_MARGIN, last)
                end = min(end, after - 1)
            out[stream] = (start, end)
        return out

    def partitions(self) -> Sequence[InputPartition]:
        subjects = self.ro.subjects or (self.narrowing.subjects or ())
        ranges = self._ranges()
        return _plan(self.ro, ranges, subjects, frozenset(self._direct))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # No partitions (an empty range) makes PySpark read one InputPartition(None): no rows.
        if isinstance(partition, SequenceRange):
            yield from _batches(self.ro, partition)


class JetStreamPushdownReader(JetStreamBatchReader):
    """The batch reader with :meth:`pushFilters` (when Spark's filter pushdown is on)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        return push_filters(self.narrowing, filters, bool(self.ro.subjects))


def _planning_with_pushdown() -> bool:
    """Is the Python worker that asked for a reader the one that pushes filters down?

    PySpark refuses a reader that implements ``pushFilters`` unless
    ``spark.sql.python.filterPushdown.enabled`` is true (default false); the
    filters then come through a worker module of its own. So the pushdown
    reader is given only to that module and the plain one to every other caller.
    """
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            break
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# ---------------------------------------------------------------------- streaming read

def _share(limit: int, avail: list[int]) -> list[int]:
    """``limit`` rows shared among streams in proportion to what each has, each getting at most its own."""
    total = sum(avail)
    if total <= limit:
        return list(avail)
    shares = [a * limit // total for a in avail]
    left = limit - sum(shares)
    for i, a in enumerate(avail):
        if left <= 0:
            break
        extra = min(a - shares[i], left)
        shares[i] += extra
        left -= extra
    return shares


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"streams": {name: {"next": first sequence not read, "created": stream creation time}}}``."""

    def __init__(self, ro: ReadOptions):
        self.ro = ro
        self._target: dict[str, int] | None = None
        self._last_trigger = time.monotonic()
        self._direct: dict[str, bool] = {}  # stream -> read by direct get, as of its last info

    @staticmethod
    def _created(info: StreamInfo) -> str:
        return info.created.isoformat() if info.created else ""

    def _maybe_info(self, stream: str) -> StreamInfo | None:
        cfg = self.ro.cfg
        try:
            return ride_out(cfg, lambda: cfg.jetstream().stream(stream).info())
        except StreamNotFoundError:
            return None

    @staticmethod
    def _streams_of(offset: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return dict(offset.get("streams") or {})

    def initialOffset(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for stream in self.ro.streams:
            info = _info(self.ro.cfg, stream)  # a stream that never existed: named, not "data loss"
            out[stream] = {"next": _resolve(self.ro.cfg, stream, self.ro.start[stream], info),
                           "created": self._created(info)}
        return {"streams": out}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.ro.max_per_trigger) if self.ro.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        target = {}
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            target[stream] = info.state.last_seq + 1 if info is not None else 0
        self._target = target

    def _continue_from(self, stream: str, pos: dict[str, Any] | None, info: StreamInfo | None) -> int | None:
        """The sequence to go on from in ``stream`` (None: the stream is gone and that is allowed)."""
        if pos is None:  # a stream added to the query since the checkpoint
            if info is None:
                raise _not_found(stream)
            return _resolve(self.ro.cfg, stream, self.ro.start[stream], info)
        nxt = int(pos["next"])
        created = pos.get("created") or ""
        if info is None:
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r} was deleted since the checkpoint (set failOnDataLoss=false "
                                    "to wait for it to come back)")
            return None
        if created and created != self._created(info):
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r} was recreated since the checkpoint (set failOnDataLoss=false "
                                    "to start over from its beginning)")
            return max(info.state.first_seq, 1)
        first = info.state.first_seq
        if info.state.messages and nxt < first:
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r}: messages {nxt}..{first - 1} were removed before they were "
                                    "read (set failOnDataLoss=false to skip them)")
            return first
        return nxt

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        known = self._streams_of(start)
        nexts: dict[str, int] = {}
        ends: dict[str, int] = {}
        created: dict[str, str] = {}
        js = self.ro.cfg.jetstream()
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            if info is not None:
                self._direct[stream] = reads_directly(js, info)
            nxt = self._continue_from(stream, known.get(stream), info)
            if nxt is None or info is None:
                if stream in known:
                    nexts[stream] = ends[stream] = int(known[stream]["next"])
                    created[stream] = known[stream].get("created") or ""
                continue
            end = info.state.last_seq + 1
            if self._target is not None:
                end = min(end, self._target.get(stream, end))
            nexts[stream], ends[stream], created[stream] = nxt, max(end, nxt), self._created(info)
        names = list(nexts)
        avail = [ends[s] - nexts[s] for s in names]
        if isinstance(limit, ReadMaxRows):
            avail = _share(limit.max_rows, avail)
        min_rows = self.ro.min_per_trigger
        if (min_rows is not None and self._target is None and sum(avail) < min_rows
                and time.monotonic() - self._last_trigger < self.ro.max_trigger_delay):
            return start  # not enough yet, and the delay has not passed: no batch now
        if sum(avail):
            self._last_trigger = time.monotonic()
        nexts = {s: nexts[s] + a for s, a in zip(names, avail, strict=True)}
        return {"streams": {s: {"next": nexts[s], "created": created[s]} for s in names}}

    def reportLatestOffset(self) -> dict[str, Any] | None:
        out = {}
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            if info is not None:
                out[stream] = {"next": info.state.last_seq + 1, "created": self._created(info)}
        return {"streams": out}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        known = self._streams_of(start)
        ranges: dict[str, tuple[int, int]] = {}
        for stream, pos in self._streams_of(end).items():
            first = int(known[stream]["next"]) if stream in known else None
            if first is None or (known[stream].get("created") or "") != (pos.get("created") or ""):
                nxt = self._continue_from(stream, known.get(stream), self._maybe_info(stream))
                if nxt is None:
                    continue
                first = nxt
            ranges[stream] = (first, int(pos["next"]) - 1)
        return _plan(self.ro, ranges, self.ro.subjects, self._reads_directly(ranges))

    def _reads_directly(self, ranges: dict[str, tuple[int, int]]) -> frozenset[str]:
        """The streams of ``ranges`` a micro-batch reads by direct get (the rest through consumers)."""
        js = self.ro.cfg.jetstream()
        direct = set()
        for stream, (first, last) in ranges.items():
            known = self._direct.get(stream)
            if known is None and first <= last:
                info = self._maybe_info(stream)
                known = info is not None and reads_directly(js, info)
            if known:
                direct.add(stream)
        return frozenset(direct)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, SequenceRange):
            return
        rows = _rows(self.ro, partition)
        if self.ro.fail_on_data_loss:
            rows = _no_loss_at_start(self.ro, partition, rows)
        yield from _batches(self.ro, partition, rows)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing is held on the server: offsets live in Spark's checkpoint

    def stop(self) -> None:
        pass


def _no_loss_at_start(ro: ReadOptions, part: SequenceRange, rows: Iterator[_RowTuple]) -> Iterator[_RowTuple]:
    """``rows``, once the first shows that the messages from ``part.start`` are still there.

    Only when the first row read is not ``part.start`` (or there is none) is
    the stream's leader asked for its first sequence: one request in that
    case, none per task otherwise (a thousand tasks asking at once would queue
    on the leader's JetStream API as consumer creations did).

    Raises:
        DataLossError: the stream's first sequence is now past ``part.start``
            (messages purged or expired before they were read).
    """
    first = next(rows, None)
    if first is None or first[1] > part.start:
        if part.start < _info(ro.cfg, part.stream).state.first_seq:
            raise DataLossError(f"stream {part.stream!r}: messages from {part.start} were removed "
                                "before they were read")
    if first is not None:
        yield first
        yield from rows


# ---------------------------------------------------------------------- the source

class JetStreamDataSource(DataSource):
    """``format("jetstream")``: read and write JetStream streams, batch and streaming.

    Every option is checked on the driver when the query is defined; see
    :mod:`natsjs_sync.spark.options` and the Spark guide for the list.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("jetstream")``."""
        return "jetstream"

    def schema(self) -> str:
        """The rows' schema as a DDL string (stream, subject, seq, timestamp, headers, data;
        the header column's type follows ``headersFormat``). Checks the read options."""
        # Asked for by load() (batch and streaming alike): check what both accept now,
        # the rest when the reader is made.
        normalise(self.options, "any_read")
        ro = read_options({k: v for k, v in self.options.items() if k.lower() not in _STREAM_ONLY},
                          streaming=False)
        streaming = read_options({k: v for k, v in self.options.items() if k.lower() not in _BATCH_ONLY},
                                 streaming=True)
        if streaming.group is not None:  # refused at load(), before the query makes anything
            from .group_source import check_group

            check_group(streaming)
        return schema_for(ro)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader: a stream's messages, split into sequence ranges (filters pushed down).

        Raises:
            NoServersError: no server answers at the address (:func:`_reach`).
        """
        ro = _reach(read_options(self.options, streaming=False))
        if _planning_with_pushdown():
            return JetStreamPushdownReader(ro)
        return JetStreamBatchReader(ro)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader: new messages in micro-batches, offsets by sequence;
        with ``consumerGroup``, a member of that group (:mod:`.group_source`).

        Raises:
            NoServersError: no server answers at the address (:func:`_reach`).
        """
        ro = _reach(read_options(self.options, streaming=True))
        if ro.group is not None:
            from .group_source import GroupStreamReader

            return GroupStreamReader(ro)
        return JetStreamStreamReader(ro)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only; each row published with its dedup id).

        Raises:
            ValueError: ``mode("overwrite")`` (a stream is append-only), or a column that cannot be written.
            NoServersError: no server answers at the address (:func:`_reach`).
        """
        if overwrite:
            raise ValueError("jetstream streams are append-only: use .mode('append') (the default mode, "
                             "'errorifexists', is refused by Spark for this source)")
        wo = write_options(self.options, streaming=False)
        check_write_schema(schema, wo)
        return JetStreamBatchWriter(_reach(wo))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming writer: each micro-batch published, deduplicated across retries.

        Unlike the other three, it does not try the server first: Spark makes
        the streaming writer anew, in a new Python worker, for every
        micro-batch's commit, so a server restarting at that moment would fail
        the query instead of being ridden out within ``retryTimeout``. The
        query's reader (or its first micro-batch's tasks) reports an address
        where no server answers.

        Raises:
            ValueError: a column that cannot be written.
        """
        wo = write_options(self.options, streaming=True)
        check_write_schema(schema, wo)
        return JetStreamStreamWriter(wo)


Opts = TypeVar("Opts", ReadOptions, WriteOptions)

log = logging.getLogger("natsjs_sync.spark")


def _reach(opts: Opts) -> Opts:
    """``opts``, once its server has answered on the driver (:meth:`NatsConfig.reach`).

    Called as a query's reader or writer is made, before any task starts: a
    server that cannot be reached at all fails the job here, within seconds
    and naming the address, rather than in every task attempt after
    ``retryTimeout`` (Spark's four attempts of a write took four minutes to
    report a typo). A server that goes away later is ridden out as before.

    Only "no server at all" fails here: a setting the driver cannot use itself
    (credentials or certificates shipped to the executors only) leaves the
    check to the tasks, which report it as before.
    """
    try:
        opts.cfg.reach()
    except NoServersError:
        raise
    except (NatsError, OSError, ValueError) as exc:
        log.debug("driver-side server check skipped (%r): the tasks connect with their own files", exc)
    return opts


_BATCH_ONLY = {"endingoffsets", "endingsequence", "endingtimestamp", "endingoffsetsbytimestamp"}
_STREAM_ONLY = {"failondataloss", "maxmessagespertrigger", "maxoffsetspertrigger", "minmessagespertrigger",
                "minoffsetspertrigger", "maxtriggerdelay", "consumergroup", "groupmember", "groupkind",
                "groupackwait"}

__all__ = ["SCHEMA", "DataLossError", "JetStreamDataSource", "SequenceRange", "schema_for"]
