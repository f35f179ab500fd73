"""The Spark data source under the instrumentor: a span per task attempt, child of the planning context.

The reader and writer are used as Spark uses them, without a JVM: made on the
"driver" (inside a span), pickled with PySpark's cloudpickle, and called once
per partition as an executor's task attempt would.
"""

from __future__ import annotations

import pytest
from opentelemetry.semconv._incubating.attributes import messaging_attributes as M
from opentelemetry.trace import SpanKind

import natsjs_sync as nats
from natsjs_sync.otel import attributes as A
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from .conftest import Telemetry

pytest.importorskip("pyspark", reason="pyspark is in the test extra")

# Imported before the otel fixture instruments, as in an application that imports its Spark code
# first: the instrumentor must wrap a data source that is already loaded (it wrapped only one
# imported after instrument(), so this test passed or failed with the order of the test files).
import natsjs_sync.spark.datasource

pa = pytest.importorskip("pyarrow", reason="pyarrow is in the test extra")


def test_reader_and_writer_task_attempts_are_children_of_the_planning_span(
        otel: Telemetry, nc: nats.Client, shared_server: NatsServer) -> None:
    from pyspark import cloudpickle
    from pyspark.sql.types import BinaryType, StructField, StructType

    from natsjs_sync.spark import close_clients
    from natsjs_sync.spark.datasource import JetStreamDataSource

    name = "SPK" + next_nuid()
    js = nc.jetstream()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        schema = StructType([StructField("data", BinaryType())])
        with otel.tracer_provider.get_tracer("app").start_as_current_span("job") as job:
            writer = JetStreamDataSource({"servers": shared_server.url, "subject": f"{name}.w"}).writer(schema, False)
            reader = JetStreamDataSource({"servers": shared_server.url, "stream": name}).reader(schema)
        writer, reader = (cloudpickle.loads(cloudpickle.dumps(o)) for o in (writer, reader))  # to the executors
        assert (type(writer).__name__, type(reader).__name__) == ("TracedBatchWriter", "TracedBatchReader")

        commit = writer.write(iter(pa.table({"data": pa.array([b"a", b"b", b"c"])}).to_batches()))
        assert commit.published == 3
        rows = sum(batch.num_rows for part in reader.partitions() for batch in reader.read(part))
        assert rows == 3
    finally:
        js.delete_stream(name)
        close_clients()  # the data source's per-process client, as a Spark worker keeps it
    pub = otel.span(f"publish {name}.w")
    recv = otel.span(f"receive {name}")
    job_id = job.get_span_context().span_id
    assert pub.kind is SpanKind.PRODUCER and recv.kind is SpanKind.CLIENT
    assert pub.parent is not None and pub.parent.span_id == job_id
    assert recv.parent is not None and recv.parent.span_id == job_id
    assert pub.attributes[M.MESSAGING_BATCH_MESSAGE_COUNT] == 3
    assert recv.attributes[M.MESSAGING_BATCH_MESSAGE_COUNT] == 3
    assert recv.attributes[A.NATS_STREAM] == name
