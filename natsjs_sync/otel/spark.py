"""Spark: one span per task attempt of the JetStream data source, with its row count.

The driver makes the data source's reader or writer; Spark pickles it to the
executors, which call ``read(partition)`` or ``write(batches)`` once per task
attempt. While instrumented, the driver's reader and writer are given a
traced class of this module and the trace context current when the query was
planned; on the executor each attempt runs in a span that is a child of that
context: ``receive <stream>`` (CLIENT, as the conventions make every receive) for a read, ``publish <subject>``
(PRODUCER) for a write, with ``messaging.batch.message_count`` (rows read or
published) and the task's partition, attempt number and attempt id.

The executors' Python workers record the spans with their own global tracer
provider, so OpenTelemetry must be configured there too (for instance with
``spark.executorEnv.*`` carrying ``OTEL_*`` settings and the workers started
under ``opentelemetry-instrument``); where it is not, the spans cost nothing
and go nowhere. The classes are found by name on the executors, so the
``otel`` extra must be installed there as on the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from ..spark.reader import JetStreamBatchReader, JetStreamPushdownReader, SequenceRange
from ..spark.stream_reader import JetStreamStreamReader
from ..spark.writer import JetStreamBatchWriter, JetStreamStreamWriter
from . import attributes as a
from .propagation import extract
from .spans import _Live

__all__ = ["TracedBatchReader", "TracedBatchWriter", "TracedPushdownReader", "TracedStreamReader",
           "TracedStreamWriter", "traced"]

_TRACER = "natsjs_sync.otel.spark"


def _task_attributes() -> dict[str, Any]:
    """The task attempt running this (nothing outside a Spark task)."""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except Exception:
        return {}
    if ctx is None:
        return {}
    return {a.NATS_SPARK_PARTITION_ID: ctx.partitionId(),
            a.NATS_SPARK_ATTEMPT_NUMBER: ctx.attemptNumber(),
            a.NATS_SPARK_TASK_ATTEMPT_ID: ctx.taskAttemptId()}


def _tracer() -> trace.Tracer:
    """The live instrumentation's tracer where the task runs in the instrumented process, else
    the global provider's (an executor's Python worker, configured on its own)."""
    live = _Live.current
    return live.tracer if live is not None else trace.get_tracer(_TRACER)


def _fail(span: Span, exc: BaseException) -> None:
    cls = type(exc)
    span.set_attribute(a.ERROR_TYPE, f"{cls.__module__}.{cls.__qualname__}")
    span.record_exception(exc)
    span.set_status(StatusCode.ERROR, f"{cls.__name__}: {exc}")


def _rows(batch: Any) -> int:
    rows = getattr(batch, "num_rows", None)
    return rows if isinstance(rows, int) else 1


def _read_method(base: Callable[[Any, Any], Iterator[Any]]) -> Callable[[Any, Any], Iterator[Any]]:
    """``read`` of a traced reader: ``base``'s rows for the partition, counted, inside one span."""

    def read(self: Any, partition: Any) -> Iterator[Any]:
        inner = base(self, partition)
        if not isinstance(partition, SequenceRange):
            yield from inner
            return
        attrs: dict[str, Any] = {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_TYPE: "receive",
                                 a.MESSAGING_OPERATION_NAME: "receive", a.MESSAGING_DESTINATION_NAME: partition.stream,
                                 a.NATS_STREAM: partition.stream,
                                 a.NATS_SPARK_FIRST_SEQUENCE: partition.start,
                                 a.NATS_SPARK_LAST_SEQUENCE: partition.end, **_task_attributes()}
        tracer = _tracer()
        count = 0
        with tracer.start_as_current_span(f"receive {partition.stream}", context=extract(self._otel_carrier),
                                          kind=SpanKind.CLIENT, attributes=attrs, record_exception=False,
                                          set_status_on_exception=False) as span:
            try:
                for batch in inner:
                    count += _rows(batch)
                    yield batch
            except BaseException as exc:
                if not isinstance(exc, GeneratorExit):
                    _fail(span, exc)
                raise
            finally:
                span.set_attribute(a.MESSAGING_BATCH_MESSAGE_COUNT, count)

    return read


def _write_method(base: Callable[[Any, Iterator[Any]], Any]) -> Callable[[Any, Iterator[Any]], Any]:
    """``write`` of a traced writer: ``base`` publishing the task's rows inside one span."""

    def write(self: Any, iterator: Iterator[Any]) -> Any:
        subject = self.wo.subject
        attrs: dict[str, Any] = {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_TYPE: "send",
                                 a.MESSAGING_OPERATION_NAME: "publish", **_task_attributes()}
        if subject:
            attrs[a.MESSAGING_DESTINATION_NAME] = subject
        tracer = _tracer()
        with tracer.start_as_current_span(f"publish {subject or '(subject column)'}",
                                          context=extract(self._otel_carrier), kind=SpanKind.PRODUCER,
                                          attributes=attrs, record_exception=False,
                                          set_status_on_exception=False) as span:
            try:
                commit = base(self, iterator)
            except BaseException as exc:
                _fail(span, exc)
                raise
            span.set_attribute(a.MESSAGING_BATCH_MESSAGE_COUNT, commit.published)
            span.set_attribute(a.NATS_SPARK_DUPLICATES, commit.duplicates)
            return commit

    return write


# Single inheritance and no slots of their own: the driver's object keeps its layout when
# its class is swapped for one of these.


class TracedBatchReader(JetStreamBatchReader):
    """:class:`JetStreamBatchReader` with a span per task attempt."""

    read = _read_method(JetStreamBatchReader.read)  # type: ignore[assignment]


class TracedPushdownReader(JetStreamPushdownReader):
    """:class:`JetStreamPushdownReader` with a span per task attempt."""

    read = _read_method(JetStreamPushdownReader.read)  # type: ignore[assignment]


class TracedStreamReader(JetStreamStreamReader):
    """:class:`JetStreamStreamReader` with a span per task attempt (per micro-batch partition)."""

    read = _read_method(JetStreamStreamReader.read)  # type: ignore[assignment]


class TracedBatchWriter(JetStreamBatchWriter):
    """:class:`JetStreamBatchWriter` with a span per task attempt."""

    write = _write_method(JetStreamBatchWriter.write)  # type: ignore[assignment]


class TracedStreamWriter(JetStreamStreamWriter):
    """:class:`JetStreamStreamWriter` with a span per task attempt."""

    write = _write_method(JetStreamStreamWriter.write)  # type: ignore[assignment]


_TRACED: dict[type, type] = {
    JetStreamPushdownReader: TracedPushdownReader,
    JetStreamBatchReader: TracedBatchReader,
    JetStreamStreamReader: TracedStreamReader,
    JetStreamBatchWriter: TracedBatchWriter,
    JetStreamStreamWriter: TracedStreamWriter,
}


def traced(obj: Any) -> Any:
    """The driver's reader or writer, made to trace its task attempts under the current context.

    Args:
        obj: what the data source returned (an object of another class is returned as it is).

    Returns:
        ``obj`` itself, its class now the traced one, carrying the current trace context.
    """
    cls = _TRACED.get(type(obj))
    if cls is None:
        return obj
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    obj.__class__ = cls
    obj._otel_carrier = carrier
    return obj
