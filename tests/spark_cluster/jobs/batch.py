"""Driver: a batch write and read through format("jetstream") (not registered: found by Spark's lookup),
and the partition helpers in foreachPartition and mapPartitions. Prints one JSON line, with where the
executors imported natsjs_sync from."""

import json
import sys

from pyspark.sql import SparkSession

from natsjs_sync.spark import NatsConfig, publish_partition, read_range

url, rows = sys.argv[1], int(sys.argv[2])
spark = SparkSession.builder.appName("natsjs-cluster-batch").getOrCreate()
sc = spark.sparkContext
out = {"executors": sc._jsc.sc().getExecutorIds().size()}


def origin(_):
    import sys

    import natsjs_sync

    yield (natsjs_sync.__file__, sys.executable)


out["executors_imported"] = sorted(set(sc.parallelize(range(4), 4).mapPartitions(origin).collect()))

df = spark.range(0, rows, numPartitions=4).selectExpr(
    "concat('cbatch.', cast(id % 7 as string)) as subject", "cast(cast(id as string) as binary) as data")
df.write.format("jetstream").option("servers", url).mode("append").save()
back = spark.read.format("jetstream").option("servers", url).option("minPartitions", 4).load("CBATCH")
out["partitions"] = back.rdd.getNumPartitions()
out["read"] = back.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas",
                              "min(seq) as lo", "max(seq) as hi").first().asDict()

cfg = NatsConfig(servers=url)
(spark.range(0, rows, numPartitions=4).selectExpr("id", "cast(id as string) as data")
 .foreachPartition(lambda part: publish_partition(cfg, "chelp.x", part, msg_id=lambda r: str(r.id))))

step = rows // 4
ranges = sc.parallelize([(s + 1, s + step) for s in range(0, rows, step)], 4)
got = ranges.mapPartitions(lambda part: (int(m.data) for a, b in part for m in read_range(cfg, "CHELP", a, b)))
values = got.collect()
out["helpers"] = {"n": len(values), "distinct": len(set(values)), "lo": min(values), "hi": max(values)}
print(json.dumps(out))
spark.stop()
