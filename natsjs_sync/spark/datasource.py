"""The PySpark data source ``jetstream``: batch and streaming, read and write.

::

    spark.dataSource.register(JetStreamDataSource)
    df = spark.read.format("jetstream").option("servers", url).load("ORDERS")
    df.write.format("jetstream").option("servers", url).option("subject", "orders.new").mode("append").save()

Rows have the schema :data:`SCHEMA`. Offsets are stream sequences. Reads split
a fixed sequence range into partitions read by direct get (or an ephemeral
ordered consumer), so a re-read gives the same rows and leaves no state on the
server. Writes publish with a ``Nats-Msg-Id`` (the ``msg_id`` column, or one
derived from the write, partition and row), so a retried task stores nothing
twice within the stream's duplicate window.
"""

from __future__ import annotations

import datetime
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..errors import JetStreamError, StreamNotFoundError
from ..jetstream import StreamInfo
from .config import NatsConfig
from .helpers import iter_range, publish_partition

SCHEMA = ("stream STRING, subject STRING, seq BIGINT, timestamp TIMESTAMP, "
          "headers MAP<STRING, ARRAY<STRING>>, data BINARY")

_DEFAULT_PARTITION_SIZE = 100_000


class DataLossError(JetStreamError):
    """Messages a streaming query still needed are gone (purged, expired, or the stream recreated)."""


def _opt(options: Any, *names: str, default: str | None = None) -> str | None:
    for name in names:
        value = options.get(name)
        if value is None:
            value = options.get(name.lower())
        if value is not None:
            return str(value)
    return default


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _time(value: str) -> datetime.datetime:
    """An ISO-8601 time or milliseconds since the epoch (UTC)."""
    value = value.strip()
    if value.lstrip("-").isdigit():
        return datetime.datetime.fromtimestamp(int(value) / 1000, datetime.timezone.utc)
    t = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def config_from_options(options: Any) -> NatsConfig:
    """A :class:`NatsConfig` from data source options (servers, user, password,
    token, creds, nkeysSeed, tlsCa, tlsCert, tlsKey, timeout, domain)."""
    servers = _opt(options, "servers", "url", "nats.servers")
    if not servers:
        raise ValueError("the jetstream data source needs the option 'servers' (nats://host:port, ...)")
    timeout = _opt(options, "timeout")
    return NatsConfig(
        servers=servers,
        user=_opt(options, "user"),
        password=_opt(options, "password"),
        token=_opt(options, "token"),
        creds_file=_opt(options, "creds", "credsFile"),
        nkeys_seed_file=_opt(options, "nkeysSeed", "nkeysSeedFile"),
        tls_ca=_opt(options, "tlsCa"),
        tls_cert=_opt(options, "tlsCert"),
        tls_key=_opt(options, "tlsKey"),
        timeout=float(timeout) if timeout else 10.0,
        domain=_opt(options, "domain"),
        name="natsjs-spark-source",
    )


def _stream_name(options: Any) -> str:
    name = _opt(options, "stream", "path")
    if not name:
        raise ValueError("the jetstream data source needs a stream: option('stream', ...) or load('ORDERS')")
    return name


def _subjects(options: Any) -> list[str]:
    value = _opt(options, "subjects", "subject")
    return [s.strip() for s in value.split(",") if s.strip()] if value else []


def _seq_at_time(cfg: NatsConfig, stream: str, t: datetime.datetime, last_seq: int) -> int:
    """The first sequence stored at or after ``t`` (``last_seq + 1`` when none)."""
    oc = cfg.jetstream().ordered_consumer(stream, deliver_policy="by_start_time", opt_start_time=t)
    try:
        got = oc.fetch(1, max_wait=2.0)
        return got[0].metadata.sequence.stream if got else last_seq + 1
    finally:
        oc.delete()


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
    """One task's share: the stream sequences ``start`` to ``end``, both included."""

    start: int
    end: int


_BLOCK = 8192  # rows per Arrow record batch


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("stream", pa.string()),
        ("subject", pa.string()),
        ("seq", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
        ("data", pa.binary()),
    ])


def _batches(cfg: NatsConfig, stream: str, part: SequenceRange, subjects: Sequence[str]) -> Iterator[Any]:
    """The partition's messages as Arrow record batches: columns built in bulk,
    no Python object per cell on the way into Spark."""
    import pyarrow as pa

    schema = _arrow_schema()
    subj: list[str] = []
    seqs: list[int] = []
    times: list[int] = []
    hdrs: list[Any] = []
    datas: list[bytes] = []

    def flush() -> Any:
        n = len(seqs)
        arrays = [
            pa.array([stream] * n, pa.string()),
            pa.array(subj, pa.string()),
            pa.array(seqs, pa.int64()),
            pa.array(times, pa.timestamp("us", tz="UTC")),
            pa.array(hdrs, schema.field("headers").type),
            pa.array(datas, pa.binary()),
        ]
        for col in (subj, seqs, times, hdrs, datas):
            col.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    for subject, seq, ts_us, headers, data in iter_range(cfg, stream, part.start, part.end, subjects or None):
        subj.append(subject)
        seqs.append(seq)
        times.append(ts_us)
        hdrs.append([(k, headers.get_all(k)) for k in headers] if headers else None)
        datas.append(data)
        if len(seqs) >= _BLOCK:
            yield flush()
    if seqs:
        yield flush()


# ---------------------------------------------------------------------- batch read

class JetStreamBatchReader(DataSourceReader):
    def __init__(self, options: Any):
        self.options = dict(options)
        self.cfg = config_from_options(options)
        self.stream = _stream_name(options)
        self.subjects = _subjects(options)

    def _bounds(self) -> tuple[int, int]:
        o = self.options
        info = self.cfg.jetstream().stream(self.stream).info()
        first, last = info.state.first_seq, info.state.last_seq
        start = first
        seq = _opt(o, "startingSequence")
        ts = _opt(o, "startingTimestamp")
        offsets = (_opt(o, "startingOffsets") or "earliest").lower()
        if seq:
            start = max(int(seq), first)
        elif ts:
            start = _seq_at_time(self.cfg, self.stream, _time(ts), last)
        elif offsets == "latest":
            start = last + 1
        end = last
        eseq = _opt(o, "endingSequence")
        ets = _opt(o, "endingTimestamp")
        if eseq:
            end = min(int(eseq), last)
        elif ets:
            end = _seq_at_time(self.cfg, self.stream, _time(ets), last) - 1
        return max(start, 1), end

    def partitions(self) -> Sequence[InputPartition]:
        start, end = self._bounds()
        min_parts = int(_opt(self.options, "minPartitions") or 1)
        per = int(_opt(self.options, "maxMessagesPerPartition") or _DEFAULT_PARTITION_SIZE)
        return [SequenceRange(s, e) for s, e in _split(start, end, min_parts, per)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SequenceRange)
        yield from _batches(self.cfg, self.stream, partition, self.subjects)


# ---------------------------------------------------------------------- streaming read

class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"next": <first sequence not yet read>, "created": <stream creation time>}``."""

    def __init__(self, options: Any):
        self.options = dict(options)
        self.cfg = config_from_options(options)
        self.stream = _stream_name(options)
        self.subjects = _subjects(options)
        self.fail_on_data_loss = _bool(_opt(options, "failOnDataLoss"), True)
        per_trigger = _opt(options, "maxMessagesPerTrigger")
        self.max_per_trigger = int(per_trigger) if per_trigger else None
        self.per_partition = int(_opt(options, "maxMessagesPerPartition") or _DEFAULT_PARTITION_SIZE)
        self.min_partitions = int(_opt(options, "minPartitions") or 1)
        self._target: int | None = None

    def _info(self) -> StreamInfo:
        try:
            return self.cfg.jetstream().stream(self.stream).info()
        except StreamNotFoundError:
            raise DataLossError(f"stream {self.stream!r} does not exist (any more)") from None

    @staticmethod
    def _created(info: StreamInfo) -> str:
        return info.created.isoformat() if info.created else ""

    def initialOffset(self) -> dict[str, Any]:
        info = self._info()
        first, last = info.state.first_seq, info.state.last_seq
        seq = _opt(self.options, "startingSequence")
        ts = _opt(self.options, "startingTimestamp")
        offsets = (_opt(self.options, "startingOffsets") or "earliest").lower()
        if seq:
            nxt = int(seq)
        elif ts:
            nxt = _seq_at_time(self.cfg, self.stream, _time(ts), last)
        elif offsets == "latest":
            nxt = last + 1
        else:
            nxt = max(first, 1)
        return {"next": nxt, "created": self._created(info)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._info().state.last_seq + 1

    def _check_continuity(self, start: dict[str, Any], info: StreamInfo) -> int:
        """The sequence to go on from; a purge or recreation past ``start`` is data loss."""
        nxt = int(start["next"])
        created = start.get("created") or ""
        if created and created != self._created(info):
            msg = f"stream {self.stream!r} was recreated since the checkpoint"
            if self.fail_on_data_loss:
                raise DataLossError(msg + " (set failOnDataLoss=false to start over from its beginning)")
            return max(info.state.first_seq, 1)
        first = info.state.first_seq
        if info.state.messages and nxt < first:
            if self.fail_on_data_loss:
                raise DataLossError(f"stream {self.stream!r}: messages {nxt}..{first - 1} were removed before "
                                    "they were read (set failOnDataLoss=false to skip them)")
            return first
        return nxt

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        info = self._info()
        nxt = self._check_continuity(start, info)
        end = info.state.last_seq + 1
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxRows):
            end = min(end, nxt + limit.max_rows)
        end = max(end, nxt)
        return {"next": end, "created": self._created(info)}

    def reportLatestOffset(self) -> dict[str, Any] | None:
        info = self._info()
        return {"next": info.state.last_seq + 1, "created": self._created(info)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first = int(start["next"])
        if (start.get("created") or "") != (end.get("created") or ""):
            first = self._check_continuity(start, self._info())
        return [SequenceRange(s, e) for s, e in _split(first, int(end["next"]) - 1, self.min_partitions,
                                                      self.per_partition)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SequenceRange)
        part = partition
        if self.fail_on_data_loss:
            first = self.cfg.jetstream().stream(self.stream).info().state.first_seq
            if part.start < first:
                raise DataLossError(f"stream {self.stream!r}: messages from {part.start} were removed "
                                    "before they were read")
        yield from _batches(self.cfg, self.stream, part, self.subjects)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing is held on the server: offsets live in Spark's checkpoint

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------------- write

@dataclass
class PublishCommit(WriterCommitMessage):
    published: int
    duplicates: int


def _write_batches(cfg: NatsConfig, options: dict[str, Any], batches: Iterator[Any], id_prefix: str
                   ) -> PublishCommit:
    """Publish Arrow record batches (columns data, subject, headers, msg_id)."""
    from pyspark import TaskContext

    subject_opt = _opt(options, "subject", "topic")
    ctx = TaskContext.get()
    prefix = f"{id_prefix}-{ctx.partitionId() if ctx is not None else 0}"
    state = {"row": 0}

    def rows() -> Iterator[tuple[Any, bytes, str, Any]]:
        for batch in batches:
            names = batch.schema.names
            if "data" not in names:
                raise ValueError("writing to jetstream needs a 'data' column (binary or string)")
            if "subject" not in names and not subject_opt:
                raise ValueError("writing to jetstream needs a 'subject' column or the option 'subject'")
            n = batch.num_rows
            datas = batch.column("data").to_pylist()
            subjects = batch.column("subject").to_pylist() if "subject" in names else [None] * n
            ids = batch.column("msg_id").to_pylist() if "msg_id" in names else [None] * n
            headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
            for i in range(n):
                row = state["row"]
                state["row"] = row + 1  # every row counts, so derived ids are the same on a retry
                data = datas[i]
                if data is None:
                    data = b""
                elif isinstance(data, str):
                    data = data.encode()
                mid = ids[i]
                yield (subjects[i] or subject_opt, data, str(mid) if mid is not None else f"{prefix}-{row}",
                       headers[i])

    def header_map(r: tuple[Any, bytes, str, Any]) -> dict[str, Any] | None:
        h = r[3]
        if not h:
            return None
        items = h.items() if isinstance(h, dict) else h
        return {k: (list(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in items}

    result = publish_partition(cfg, lambda r: r[0], rows(), msg_id=lambda r: r[2], headers=header_map,
                               data=lambda r: r[1])
    return PublishCommit(result.published, result.duplicates)


class JetStreamBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Any, schema: StructType):
        self.options = dict(options)
        self.schema = schema
        self.cfg = config_from_options(options)
        # Made once on the driver and shipped to every task (and its retries):
        # the same rows of the same write get the same derived msg ids.
        self.write_id = _opt(options, "writeId") or uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_batches(self.cfg, self.options, iterator, self.write_id)


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Any, schema: StructType):
        self.options = dict(options)
        self.schema = schema
        self.cfg = config_from_options(options)
        self.fallback_id = _opt(options, "writeId") or uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        # A micro-batch replayed after a failure has the same query id and batch id.
        prefix = f"{query or self.fallback_id}-{batch if batch is not None else 'x'}"
        return _write_batches(self.cfg, self.options, iterator, prefix)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


# ---------------------------------------------------------------------- the source

class JetStreamDataSource(DataSource):
    """``format("jetstream")``: read and write JetStream streams, batch and streaming."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("jetstream")``."""
        return "jetstream"

    def schema(self) -> str:
        """The rows' schema as a DDL string: stream, subject, seq, timestamp, headers, data."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader: a stream's messages, split into sequence ranges."""
        return JetStreamBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader: new messages in micro-batches, offsets by sequence."""
        return JetStreamStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only; each row published with its dedup id).

        Raises:
            ValueError: ``mode("overwrite")`` (a stream is append-only).
        """
        if overwrite:
            raise ValueError("jetstream streams are append-only: use mode('append')")
        return JetStreamBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming writer: each micro-batch published, deduplicated across retries."""
        return JetStreamStreamWriter(self.options, schema)
