"""Driver: a batch write through format("jetstream") whose ``creds`` option names a file relative to the
executors' working directory (shipped there with ``--files``). Prints one JSON line: whether the driver's
own directory has that file, and each executor's working directory and whether the file is there."""

import json
import os
import sys

from pyspark.sql import SparkSession

url, rows, creds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spark = SparkSession.builder.appName("natsjs-cluster-creds").getOrCreate()


def where(_):
    yield (os.getcwd(), os.path.exists(creds))


out = {"driver": [os.getcwd(), os.path.exists(creds)],
       "executors": sorted(set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()))}
df = spark.range(0, rows, numPartitions=4).selectExpr(
    "'ccreds.x' as subject", "cast(cast(id as string) as binary) as data")
df.write.format("jetstream").option("servers", url).option("creds", creds).mode("append").save()
print(json.dumps(out))
spark.stop()
