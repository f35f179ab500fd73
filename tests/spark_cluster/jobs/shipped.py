"""Driver: writes through format("jetstream") on executors whose Python gets natsjs-sync only from the
archive shipped with spark.archives; prints where the executors imported it from."""

import json
import sys

from pyspark.sql import SparkSession

url, rows = sys.argv[1], int(sys.argv[2])
spark = SparkSession.builder.appName("natsjs-cluster-shipped").getOrCreate()


def origin(_):
    import sys

    import natsjs_sync

    yield (natsjs_sync.__file__, sys.executable)


found = sorted(set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(origin).collect()))
spark.range(0, rows, numPartitions=2).selectExpr("'cship.x' as subject", "cast(cast(id as string) as binary) as data") \
    .write.format("jetstream").option("servers", url).mode("append").save()
print(json.dumps({"executors_imported": found}))
spark.stop()
