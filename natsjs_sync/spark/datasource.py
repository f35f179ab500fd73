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

import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..errors import JetStreamError, NatsError, NoServersError, StreamNotFoundError
from ..jetstream import StreamInfo
from .helpers import reads_directly, ride_out
from .options import (
    ReadOptions,
    WriteOptions,
    normalise,
    read_options,
    write_options,
)
from .reader import (
    JetStreamBatchReader,
    JetStreamPushdownReader,
    SequenceRange,
    _batches,
    _info,
    _not_found,
    _plan,
    _resolve,
    _rows,
    _RowTuple,
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
