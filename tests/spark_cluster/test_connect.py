"""Spark Connect: a remote client drives batch and streaming queries on the jetstream source. The
source runs in the server's Python (which has natsjs-sync installed and no checkout on its path);
the client registers it, or leaves Spark to find it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.spark import NatsConfig, read_range
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.spark import SparkConnectServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


@pytest.mark.parametrize("register", [False, True], ids=["found-by-the-server", "registered-by-the-client"])
def test_batch_and_streaming_over_spark_connect(spark_connect: SparkConnectServer, server: NatsServer,
                                               tmp_path: Path, register: bool) -> None:
    spark = spark_connect.session()
    if register:
        from natsjs_sync.spark.datasource import JetStreamDataSource

        spark.dataSource.register(JetStreamDataSource)
    src, sink = ("RBATCH", "RSINK") if register else ("FBATCH", "FSINK")
    nc = nats.connect(server.url)
    js: Any = nc.jetstream()
    try:
        for name in (src, sink):
            js.create_stream(name=name, subjects=[f"{name.lower()}.>"], duplicate_window=600.0)
        df = spark.range(0, 5000, numPartitions=2).selectExpr(
            f"concat('{src.lower()}.', cast(id % 3 as string)) as subject",
            "cast(cast(id as string) as binary) as data")
        df.write.format("jetstream").option("servers", server.url).mode("append").save()
        assert js.stream(src).info().state.messages == 5000

        back = spark.read.format("jetstream").option("servers", server.url).option("minPartitions", 2).load(src)
        stats = back.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas",
                                "min(seq) as lo", "max(seq) as hi").first()
        assert (stats.n, stats.seqs, stats.datas, stats.lo, stats.hi) == (5000, 5000, 5000, 1, 5000)

        def copy() -> None:
            q = (spark.readStream.format("jetstream").option("servers", server.url).option("stream", src)
                 .option("maxMessagesPerTrigger", 2000).load()
                 .selectExpr(f"'{sink.lower()}.copy' as subject", "data")
                 .writeStream.format("jetstream").option("servers", server.url)
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
            assert q.awaitTermination(180)
            assert q.exception() is None

        copy()
        assert js.stream(sink).info().state.messages == 5000
        for i in range(5000, 6000):
            js.publish_async(f"{src.lower()}.x", str(i).encode())
        js.publish_async_complete(timeout=30)
        copy()  # goes on from its checkpoint
        assert js.stream(sink).info().state.messages == 6000
        datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), sink, 1))
        assert datas == list(range(6000))
    finally:
        nc.close()
