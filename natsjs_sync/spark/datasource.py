"""The PySpark data source ``jetstream``: batch and streaming, read and write.

::

    spark.dataSource.register(JetStreamDataSource)
    df = spark.read.format("jetstream").option("servers", url).load("ORDERS")
    df.write.format("jetstream").option("servers", url).option("subject", "orders.new").mode("append").save()

Options are checked on the driver (``natsjs_sync.spark.options``). Rows
have the schema :func:`schema_for` (``headers`` as a map, in Kafka's shape, or
left out). Offsets are stream sequences. A batch read
(:mod:`natsjs_sync.spark.reader`) fixes each stream's sequence range when it
is planned and cuts it into partitions, each read by direct get or an
ephemeral consumer (checked in order), so a re-read gives the same rows and
leaves nothing on the server; ``where()`` on ``seq``, ``stream``, ``subject``
and ``timestamp`` narrows that range (filter pushdown:
:mod:`natsjs_sync.spark.pushdown`). A streaming read
(:mod:`natsjs_sync.spark.stream_reader`) reads from the offsets in Spark's
checkpoint to each stream's end, micro-batch by micro-batch.

Writes publish every row with a ``Nats-Msg-Id`` (:mod:`natsjs_sync.spark.writer`):
the ``msg_id`` column, or one made from the write, the partition, the row's
content and how many identical rows came before it in the partition. A retried
task therefore sends the same ids for the same rows in whatever order it gets
them, and the stream stores each row once (within its duplicate window).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..errors import NatsError, NoServersError
from .options import ReadOptions, WriteOptions, normalise, read_options, write_options
from .reader import JetStreamBatchReader, JetStreamPushdownReader, SequenceRange
from .stream_reader import DataLossError, JetStreamStreamReader
from .writer import JetStreamBatchWriter, JetStreamStreamWriter, check_write_schema

_BASE_COLUMNS = "stream STRING, subject STRING, seq BIGINT, timestamp TIMESTAMP"
_HEADER_TYPES = {"map": "MAP<STRING, ARRAY<STRING>>", "kafka": "ARRAY<STRUCT<key: STRING, value: BINARY>>"}
#: The default schema (``includeHeaders`` true, ``headersFormat`` map).
SCHEMA = f"{_BASE_COLUMNS}, headers {_HEADER_TYPES['map']}, data BINARY"


def schema_for(ro: ReadOptions) -> str:
    """The read schema for these options: the payload as ``data``, or as the columns of ``valueSchema``
    (then the corrupt-record column in mode PERMISSIVE)."""
    payload = "data BINARY" if ro.value_schema is None else ro.value_schema
    if ro.corrupt_column:
        payload += f", `{ro.corrupt_column.replace('`', '``')}` BINARY"
    if not ro.include_headers:
        return f"{_BASE_COLUMNS}, {payload}"
    return f"{_BASE_COLUMNS}, headers {_HEADER_TYPES[ro.headers_format]}, {payload}"


def _with_payload(ro: ReadOptions, schema: StructType) -> ReadOptions:
    """``ro`` with the payload's columns as Spark parsed them from ``valueSchema`` (the columns after the
    fixed ones, the corrupt-record column left out).

    Raises:
        ValueError: a payload column named as a fixed column, or of a type a payload cannot hold.
    """
    if ro.value_schema is None:
        return ro
    from .payloads import check_fields

    fixed = 5 if ro.include_headers else 4
    fields = [f for f in schema.fields[fixed:] if f.name != ro.corrupt_column]
    return dataclasses.replace(ro, payload_fields=check_fields(StructType(fields), schema.fields[:fixed]))


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


# ---------------------------------------------------------------------- the source

class JetStreamDataSource(DataSource):
    """``format("jetstream")``: read and write JetStream streams, batch and streaming.

    Every option is checked on the driver when the query is defined; see
    ``natsjs_sync.spark.options`` and the Spark guide for the list.
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
            NoServersError: no server answers at the address.
        """
        ro = _reach(_with_payload(read_options(self.options, streaming=False), schema))
        if _planning_with_pushdown():
            return JetStreamPushdownReader(ro)
        return JetStreamBatchReader(ro)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader: new messages in micro-batches, offsets by sequence;
        with ``consumerGroup``, a member of that group (``natsjs_sync.spark.group_source``).

        Nothing is raised here: an error making the reader (no server answers
        at the address: ``_reach``) is raised by the reader's first offset
        call instead (``_FailedStreamReader``).
        """
        try:
            ro = _reach(_with_payload(read_options(self.options, streaming=True), schema))
        except Exception as exc:  # raised where PySpark shows it, see _FailedStreamReader
            return _FailedStreamReader(exc)
        if ro.group is not None:
            from .group_source import GroupStreamReader

            return GroupStreamReader(ro)
        return JetStreamStreamReader(ro)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only; each row published with its dedup id).

        Raises:
            ValueError: ``mode("overwrite")`` (a stream is append-only), or a column that cannot be written.
            NoServersError: no server answers at the address.
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


class _FailedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader of a query whose reader could not be made: it raises that error
    from its first offset call (and every call that needs the server).

    PySpark 4.3's streaming runner calls ``reader.stop()`` in a ``finally``
    around the call that makes the reader; when ``streamReader()`` raised, that
    ``finally`` fails with ``UnboundLocalError: cannot access local variable
    'reader'``, which hides the error that names the address. A reader that
    raises the error when Spark first asks for an offset lets it reach the user.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _raise(self) -> NoReturn:
        raise self.error

    def initialOffset(self) -> dict[str, Any]:
        self._raise()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self._raise()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._raise()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._raise()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        self._raise()

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        pass


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
_STREAM_ONLY = {"maxmessagespertrigger", "maxoffsetspertrigger", "minmessagespertrigger",
                "minoffsetspertrigger", "maxtriggerdelay", "consumergroup", "groupmember", "groupkind",
                "groupackwait"}

__all__ = ["SCHEMA", "DataLossError", "JetStreamDataSource", "SequenceRange", "schema_for"]
