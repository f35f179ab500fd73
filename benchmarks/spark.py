"""Spark benchmark: write and batch-read 1,000,000 small rows.

    python benchmarks/spark.py [--server URL] [--rows 1000000] [--runs 1]

Ours: ``df.write.format("jetstream")`` and ``spark.read.format("jetstream")``.
The baseline is what a user writes today without this library: nats-py with
``asyncio.run`` inside ``foreachPartition`` (pipelined ``publish_async``,
then waiting for the acks), and for reading, nats-py's ordered consumer inside
``mapPartitions`` over sequence ranges. Same Spark session (``local[2]``),
same server, same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from _common import Row, have_nats_py, paired, print_table, server_url

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import natsjs_sync
from natsjs_sync.spark.datasource import JetStreamDataSource

_serial = [0]


def _fresh(url: str) -> str:
    _serial[0] += 1
    name = f"SPARKBENCH{_serial[0]}"
    with natsjs_sync.connect(url) as nc:
        nc.jetstream().create_stream(name=name, subjects=[f"sb{_serial[0]}.>"], allow_direct=True)
    return name


def _drop(url: str, name: str) -> None:
    with natsjs_sync.connect(url) as nc:
        nc.jetstream().delete_stream(name)


def _df(spark: Any, rows: int, subject: str) -> Any:
    return spark.range(0, rows, numPartitions=4).selectExpr(
        f"'{subject}' as subject", "cast(cast(id as string) as binary) as data")


def ours_write(spark: Any, url: str, rows: int) -> float:
    name = _fresh(url)
    try:
        df = _df(spark, rows, f"sb{_serial[0]}.x").cache()
        df.count()
        start = time.perf_counter()
        df.write.format("jetstream").option("servers", url).mode("append").save()
        return rows / (time.perf_counter() - start)
    finally:
        _drop(url, name)


def baseline_write(spark: Any, url: str, rows: int) -> float:
    name = _fresh(url)
    subject = f"sb{_serial[0]}.x"

    def part(it: Any) -> None:
        import asyncio

        import nats

        async def go() -> None:
            nc = await nats.connect(url)
            js = nc.jetstream(publish_async_max_pending=4000)
            for row in it:
                await js.publish_async(subject, bytes(row.data))
            await js.publish_async_completed()
            await nc.close()

        asyncio.run(go())

    try:
        df = _df(spark, rows, subject).cache()
        df.count()
        start = time.perf_counter()
        df.foreachPartition(part)
        return rows / (time.perf_counter() - start)
    finally:
        _drop(url, name)


def _filled(spark: Any, url: str, rows: int) -> str:
    name = _fresh(url)
    _df(spark, rows, f"sb{_serial[0]}.x").write.format("jetstream").option("servers", url).mode("append").save()
    return name


def ours_read(spark: Any, url: str, name: str, rows: int) -> float:
    start = time.perf_counter()
    n = (spark.read.format("jetstream").option("servers", url).option("minPartitions", 4).load(name)
         .selectExpr("sum(length(data))").first())
    assert n is not None
    return rows / (time.perf_counter() - start)


def baseline_read(spark: Any, url: str, name: str, rows: int) -> float:
    """nats-py's ordered consumer in each partition, yielding rows into a DataFrame."""
    ranges = [(i * rows // 4 + 1, (i + 1) * rows // 4) for i in range(4)]
    subject = f"sb{name.removeprefix('SPARKBENCH')}.x"

    def part(it: Any) -> Any:
        import asyncio

        import nats
        from nats.js.api import ConsumerConfig, DeliverPolicy

        for lo, hi in it:
            async def go(lo: int = lo, hi: int = hi) -> list[tuple[str, int, bytes]]:
                nc = await nats.connect(url)
                js = nc.jetstream()
                done = asyncio.get_running_loop().create_future()
                out: list[tuple[str, int, bytes]] = []

                async def cb(msg: Any) -> None:
                    seq = msg.metadata.sequence.stream
                    out.append((msg.subject, seq, msg.data))
                    if seq >= hi and not done.done():
                        done.set_result(None)

                sub = await js.subscribe(
                    subject, stream=name, cb=cb, ordered_consumer=True,
                    config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=lo))
                await asyncio.wait_for(done, 300)
                await sub.unsubscribe()
                await nc.close()
                return out

            yield from asyncio.run(go())

    start = time.perf_counter()
    rdd = spark.sparkContext.parallelize(ranges, 4).mapPartitions(part)
    n = spark.createDataFrame(rdd, "subject string, seq long, data binary").selectExpr("sum(length(data))").first()
    assert n is not None
    return rows / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    other = have_nats_py()
    rows_out: list[Row] = []
    with server_url(args.server) as url:
        # Spark is stopped inside the server's block: its Python workers keep
        # their shared clients until then, and would log reconnect attempts
        # to a server already gone.
        spark = (SparkSession.builder.master("local[2]").appName("natsjs-spark-bench")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(JetStreamDataSource)
        try:
            # Warm up both sides (Python workers, imports, JIT) so neither pays it in the table.
            warm = _filled(spark, url, 20_000)
            ours_read(spark, url, warm, 20_000)
            if other:
                baseline_read(spark, url, warm, 20_000)
                baseline_write(spark, url, 20_000)
            _drop(url, warm)
            a, b = paired(args.runs, lambda: ours_write(spark, url, args.rows),
                          (lambda: baseline_write(spark, url, args.rows)) if other else None)
            rows_out.append(Row(f"write {args.rows:,} rows", "rows/s", a, b))
            name = _filled(spark, url, args.rows)
            try:
                a, b = paired(args.runs, lambda: ours_read(spark, url, name, args.rows),
                              (lambda: baseline_read(spark, url, name, args.rows)) if other else None)
                rows_out.append(Row(f"batch read {args.rows:,} rows", "rows/s", a, b))
            finally:
                _drop(url, name)
        finally:
            spark.stop()
    print_table(f"Spark local[2] (median of {args.runs} runs; baseline: nats-py + asyncio.run in each partition)",
                rows_out)


if __name__ == "__main__":
    main()
