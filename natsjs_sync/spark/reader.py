"""Reading a ``jetstream`` source: what the batch and streaming reads share, and the batch reader.

Both reads turn start and end positions into stream sequences (:func:`_resolve`,
asking the server for the first sequence at a time: :func:`_seq_at_time`),
cut each stream's range into :class:`SequenceRange` partitions
(:func:`_plan`, at most ``maxConsumers`` read through consumers) and read a
partition on an executor as Arrow record batches (:func:`_rows`,
:func:`_batches`). :class:`JetStreamBatchReader` fixes the ranges when the
query is planned, so a re-read gives the same rows;
:class:`JetStreamPushdownReader` narrows them by the query's filters
(:mod:`natsjs_sync.spark.pushdown`). The streaming reader is in
:mod:`natsjs_sync.spark.stream_reader`.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from ..codecs.base import CONTENT_TYPE
from ..errors import JetStreamError, MsgNotFoundError, NatsError, StreamNotFoundError, jetstream_error
from ..jetstream import StreamInfo
from .config import NatsConfig
from .data_loss import no_loss_at_start, removed_check
from .options import _EARLIEST, _LATEST, Position, ReadOptions
from .payloads import PayloadReader
from .pushdown import Narrowing, push_filters
from .ranges import iter_range, reads_directly
from .retry import ride_out


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
    payload = _payload_reader(ro)
    if payload is None:
        fields.append(("data", pa.binary()))
    else:
        fields.extend(payload.arrow_fields())
    return pa.schema(fields)


def _payload_reader(ro: ReadOptions) -> PayloadReader | None:
    """What turns payloads into columns (``valueFormat``), or None: the payload as ``data``."""
    if ro.payload_fields is None:
        return None
    return PayloadReader(ro.value_format, ro.payload_fields, ro.value_mode, ro.corrupt_column)


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
#: What a write with valueFormat json or msgpack sends: the content type, then the message id.
_TYPED_HEAD = b"NATS/1.0\r\ncontent-type: application/"
_TYPED_MSG_ID = tuple((b"NATS/1.0\r\ncontent-type: %s\r\nNats-Msg-Id:" % ct.encode(), ct)
                      for ct in ("application/json", "application/msgpack"))


def _header_column(cells: Sequence[Any], kafka: bool, header_type: Any) -> Any:
    """The headers column from each row's headers (None, bytes or Headers),
    built from flat key and value arrays (no Python object per map entry)."""
    import pyarrow as pa

    keys: list[str] = []
    values: list[Any] = []  # map: one value list per key; kafka: one bytes value per pair
    offsets = [0]
    valid: list[bool] = []
    msg_id_only, id_start = _MSG_ID_ONLY, len(_MSG_ID_ONLY)
    for cell in cells:
        # What this source writes is taken apart without parsing: a Nats-Msg-Id alone,
        # or after the content type of a write with valueFormat json or msgpack.
        ctype, start = None, 0
        if not kafka and isinstance(cell, bytes):
            if cell.startswith(msg_id_only):
                start = id_start
            elif cell.startswith(_TYPED_HEAD):
                for prefix, ct in _TYPED_MSG_ID:
                    if cell.startswith(prefix):
                        ctype, start = ct, len(prefix)
                        break
            if start and cell.find(b"\r\n", start) != len(cell) - 4:
                ctype, start = None, 0  # more headers after the id: parsed below
        if start:
            if ctype is not None:
                keys.append(CONTENT_TYPE)
                values.append([ctype])
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
    """The partition's messages as :func:`iter_range` gives them (failing with ``failOnDataLoss``
    when messages still to read are purged or expired meanwhile: :func:`removed_check`)."""
    return iter_range(ro.cfg, part.stream, part.start, part.end, part.subjects or None, batch=_PULL,
                      direct=part.direct, removed=removed_check(ro, part) if ro.fail_on_data_loss else None)


def _batches(ro: ReadOptions, part: SequenceRange, rows_in: Iterator[_RowTuple] | None = None) -> Iterator[Any]:
    """The partition's messages (``rows_in``, else :func:`_rows`) as Arrow record batches:
    columns built in bulk from blocks of rows, no Python object per cell on the way into Spark."""
    import pyarrow as pa

    schema = _arrow_schema(ro)
    payload = _payload_reader(ro)
    payload_types = [t for _, t in payload.arrow_fields()] if payload is not None else []
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
        if payload is None:
            arrays.append(pa.array(datas, data_type))
        else:
            arrays.extend(payload.columns(part.stream, rows, payload_types))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    rows: list[tuple[str, int, int, Any, bytes]] = []
    for row in _rows(ro, part) if rows_in is None else rows_in:
        rows.append(row)
        if len(rows) >= _BLOCK:
            yield block(rows)
            rows = []
    if rows:
        yield block(rows)

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
            rows = _rows(self.ro, partition)
            if self.ro.fail_on_data_loss:
                rows = no_loss_at_start(self.ro, partition, rows)
            yield from _batches(self.ro, partition, rows)


class JetStreamPushdownReader(JetStreamBatchReader):
    """The batch reader with :meth:`pushFilters` (when Spark's filter pushdown is on)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        return push_filters(self.narrowing, filters, bool(self.ro.subjects))


__all__ = ["JetStreamBatchReader", "JetStreamPushdownReader", "SequenceRange"]
