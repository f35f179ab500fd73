"""Driver: a batch write of ``rows`` rows (4 partitions, subject cwrite.<partition>) through the jetstream
writer, wrapped so that the first attempt of each task stops after handing its first ``stop`` rows to the
writer: it writes ``<gate>-at-<partition>`` (holding the Python worker's pid) and waits until the file
``gate`` exists. The gate sits between Spark and the writer, so what is published before it is exactly
those rows, whatever Spark buffers upstream. Rows carry no msg_id: the source derives one per row."""

import os
import sys
import threading
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceArrowWriter

from natsjs_sync.spark.datasource import JetStreamDataSource

url, rows, stop, gate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]


def gated(batches):
    ctx = TaskContext.get()
    held = ctx.attemptNumber() == 0
    seen = 0
    for batch in batches:
        if held and seen + batch.num_rows >= stop:
            yield batch.slice(0, stop - seen)  # published before the writer asks for more
            batch = batch.slice(stop - seen)
            held = False
            with open(f"{gate}-at-{ctx.partitionId()}.tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(f"{gate}-at-{ctx.partitionId()}.tmp", f"{gate}-at-{ctx.partitionId()}")
            deadline = time.monotonic() + 300
            while not os.path.exists(gate) and time.monotonic() < deadline:
                threading.Event().wait(0.1)
        seen += batch.num_rows
        yield batch


class GatedWriter(DataSourceArrowWriter):
    def __init__(self, inner):
        self.inner = inner  # the jetstream writer made on the driver (its write id goes to every attempt)

    def write(self, iterator):
        return self.inner.write(gated(iterator))

    def commit(self, messages):
        return self.inner.commit(messages)

    def abort(self, messages):
        return self.inner.abort(messages)


class GatedJetStream(JetStreamDataSource):
    @classmethod
    def name(cls):
        return "jetstream_gated"

    def writer(self, schema, overwrite):
        return GatedWriter(super().writer(schema, overwrite))


spark = SparkSession.builder.appName("natsjs-cluster-write-gated").getOrCreate()
spark.dataSource.register(GatedJetStream)
df = spark.range(0, rows, numPartitions=4).selectExpr(
    "concat('cwrite.', cast(spark_partition_id() as string)) as subject", "cast(cast(id as string) as binary) as data")
df.write.format("jetstream_gated").option("servers", url).mode("append").save()
print('{"done": true}')
spark.stop()
