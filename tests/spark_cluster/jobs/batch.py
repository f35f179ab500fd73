"""Driver: a batch write and read through format("jetstream") (not registered: found by Spark's lookup),
and the partition helpers in foreachPartition and mapPartitions, all authenticated by the ``.creds`` file
named ``creds``: a path relative to the executors' working directory, where ``--files`` put it. Prints
one JSON line, with where the executors imported natsjs_sync from and whether they and the driver see
the file."""

import json
import os
import shutil
import sys
import threading
import time

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from natsjs_sync.spark import NatsConfig, publish_partition, read_range

url, rows, creds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spark = SparkSession.builder.appName("natsjs-cluster-batch").getOrCreate()
sc = spark.sparkContext


def executors() -> int:
    return int(sc._jsc.sc().getExecutorIds().size())


# The session waits for every executor only up to spark.scheduler.maxRegisteredResourcesWaitingTime
# (60 s), which a loaded machine can pass; the job waits (bounded) for the cluster's two itself, so the
# tasks below run on both.
deadline, pause = time.monotonic() + 180, threading.Event()
while executors() < 2 and time.monotonic() < deadline:
    pause.wait(0.5)
out = {"executors": executors(), "driver": [os.getcwd(), os.path.exists(creds)]}


def origin(_):
    import os
    import sys

    import natsjs_sync

    yield (natsjs_sync.__file__, sys.executable, os.getcwd(), os.path.exists(creds))


out["executors_imported"] = sorted(set(sc.parallelize(range(4), 4).mapPartitions(origin).collect()))

df = spark.range(0, rows, numPartitions=4).selectExpr(
    "concat('cbatch.', cast(id % 7 as string)) as subject", "cast(cast(id as string) as binary) as data")
df.write.format("jetstream").option("servers", url).option("creds", creds).mode("append").save()  # executors only
# A read is planned on the driver, which opens the same relative path from its own directory: in client
# mode keep a copy there (the guide says so).
shutil.copy(SparkFiles.get(creds), creds)
try:
    back = (spark.read.format("jetstream").option("servers", url).option("creds", creds)
            .option("minPartitions", 4).load("CBATCH"))
    out["partitions"] = back.rdd.getNumPartitions()
    out["read"] = back.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas",
                                  "min(seq) as lo", "max(seq) as hi").first().asDict()
finally:
    os.remove(creds)

cfg = NatsConfig(servers=url, creds_file=creds)
(spark.range(0, rows, numPartitions=4).selectExpr("id", "cast(id as string) as data")
 .foreachPartition(lambda part: publish_partition(cfg, "chelp.x", part, msg_id=lambda r: str(r.id))))

step = rows // 4
ranges = sc.parallelize([(s + 1, s + step) for s in range(0, rows, step)], 4)
got = ranges.mapPartitions(lambda part: (int(m.data) for a, b in part for m in read_range(cfg, "CHELP", a, b)))
values = got.collect()
out["helpers"] = {"n": len(values), "distinct": len(set(values)), "lo": min(values), "hi": max(values)}
print(json.dumps(out))
spark.stop()
