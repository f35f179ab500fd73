"""Driver: a batch write of ``rows`` rows in 4 partitions whose first attempts stop half way (after
publishing what reached the writer) until the file ``gate`` exists, after creating ``gate``-at-<partition>,
so the test can kill an executor in the middle of the write.
Rows carry no msg_id: the source derives one from the write, partition and row."""

import os
import sys
import threading
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession

url, rows, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
per = rows // 4
spark = (SparkSession.builder.appName("natsjs-cluster-write-gated")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")  # rows reach the writer before the gate
         .getOrCreate())


def partition(it):
    for p in it:
        ctx = TaskContext.get()
        for i in range(p * per, (p + 1) * per):
            if i == p * per + per // 2 and ctx.attemptNumber() == 0:
                open(f"{gate}-at-{p}", "w").close()
                deadline = time.monotonic() + 300
                while not os.path.exists(gate) and time.monotonic() < deadline:
                    threading.Event().wait(0.1)
            yield (f"cwrite.{p}", str(i).encode())


rdd = spark.sparkContext.parallelize(range(4), 4).mapPartitions(partition)
df = spark.createDataFrame(rdd, "subject string, data binary")
df.write.format("jetstream").option("servers", url).mode("append").save()
print('{"done": true}')
spark.stop()
