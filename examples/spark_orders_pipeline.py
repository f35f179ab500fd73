"""Orders through JetStream and Spark, totals into a key-value bucket.

1. Orders are published to the stream ORDERS from a DataFrame (the data
   source ``jetstream``, exactly-once by order id).
2. Spark reads the stream back as a batch, parses the JSON and adds up the
   revenue per region.
3. Each executor writes its totals into the KV bucket ``order_totals`` with
   the process's shared client (``cfg.client()``).

    python examples/spark_orders_pipeline.py [nats://host:4222]

With no URL it starts an embedded nats-server (the ``server`` extra).
"""

from __future__ import annotations

import sys
from typing import Any

from natsjs_sync.spark import NatsConfig
from natsjs_sync.spark.datasource import JetStreamDataSource

REGIONS = ["eu", "us", "apac"]


def write_totals(cfg: NatsConfig, rows: Any) -> None:
    """Runs on executors: one put per region into the bucket."""
    kv = cfg.jetstream().key_value("order_totals")
    for row in rows:
        kv.put(f"revenue.{row.region}", f"{row.revenue:.2f}".encode())


def run(spark: Any, url: str, n_orders: int = 3000) -> dict[str, float]:
    """The pipeline; returns the totals read back from the bucket."""
    cfg = NatsConfig(servers=url)
    js = cfg.jetstream()
    js.create_or_update_stream(name="ORDERS", subjects=["orders.>"], duplicate_window=600.0)
    js.create_or_update_key_value(bucket="order_totals", history=5)
    spark.dataSource.register(JetStreamDataSource)

    # 1. Publish orders from a DataFrame; the order id is the message id.
    orders = spark.range(0, n_orders, numPartitions=3).selectExpr(
        "concat('orders.', element_at(array('eu', 'us', 'apac'), cast(id % 3 as int) + 1)) as subject",
        "cast(id as string) as msg_id",
        "cast(to_json(named_struct('id', id, "
        "'region', element_at(array('eu', 'us', 'apac'), cast(id % 3 as int) + 1), "
        "'amount', round((id % 100) * 1.25 + 5, 2))) as binary) as data",
    )
    orders.write.format("jetstream").option("servers", url).mode("append").save()

    # 2. Read the stream back and aggregate.
    stream = spark.read.format("jetstream").option("servers", url).load("ORDERS")
    parsed = stream.selectExpr(
        "from_json(cast(data as string), 'id BIGINT, region STRING, amount DOUBLE') as o").select("o.*")
    totals = parsed.groupBy("region").sum("amount").withColumnRenamed("sum(amount)", "revenue")

    # 3. Write the totals to the key-value bucket from the executors.
    totals.foreachPartition(lambda rows: write_totals(cfg, rows))

    kv = js.key_value("order_totals")
    return {key.split(".", 1)[1]: float(kv.get(key).value) for key in kv.keys("revenue.*")}


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    args = sys.argv[1:] if argv is None else argv
    server = None
    if args:
        url = args[0]
    else:
        from natsjs_sync.testing import NatsServer

        server = NatsServer().start()
        url = server.url
    spark = (SparkSession.builder.master("local[2]").appName("orders-pipeline")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for region, revenue in sorted(run(spark, url).items()):
            print(f"{region:5} {revenue:12.2f}")
    finally:
        spark.stop()
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
