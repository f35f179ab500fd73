"""Spark and JetStream: the config, the partition helpers, the data source (batch and streaming)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.spark import NatsConfig, PublishResult, publish_partition, read_range
from natsjs_sync.testing import NatsServer

pytestmark = pytest.mark.slow


@pytest.fixture
def server(spark_server: NatsServer) -> NatsServer:
    return spark_server


def _stream(server: NatsServer, name: str, **kw: Any) -> nats.Client:
    nc = nats.connect(server.url)
    js = nc.jetstream()
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass
    js.create_stream(name=name, subjects=[f"{name.lower()}.>"], duplicate_window=600.0, **kw)
    return nc


def test_config_is_a_picklable_value_and_one_client_per_process(server: NatsServer) -> None:
    cfg = NatsConfig(servers=server.url, user=None, password="secret")
    clone = pickle.loads(pickle.dumps(cfg))
    assert clone == cfg and hash(clone) == hash(cfg)
    assert "secret" not in repr(cfg)
    assert cfg.client() is clone.client()  # equal configs share the process's client
    assert cfg.client().is_connected
    with pytest.raises(ValueError):
        NatsConfig(servers="")


def test_publish_partition_and_read_range_on_the_driver(server: NatsServer) -> None:
    nc = _stream(server, "HELP")
    cfg = NatsConfig(servers=server.url)
    rows = [{"id": i, "data": f"row {i}"} for i in range(1000)]
    res = publish_partition(cfg, "help.x", rows, msg_id="id")
    assert res == PublishResult(published=1000, duplicates=0)
    again = publish_partition(cfg, "help.x", rows[:10], msg_id=lambda r: r["id"])
    assert again == PublishResult(published=0, duplicates=10)
    got = list(read_range(cfg, "HELP", 101, 200))
    assert [m.seq for m in got] == list(range(101, 201))
    assert got[0].data == b"row 100" and got[0].subject == "help.x"
    nc.close()


def test_writer_publishes_arrow_batches_in_bulk_on_the_driver(server: NatsServer) -> None:
    """The data source's write path without Spark: every row stored once with its
    headers, a repeat is counted as duplicates, and a subject no stream takes
    fails with an error that says so (after the ride-out budget, here 1 s)."""
    import dataclasses

    import pyarrow as pa

    from natsjs_sync.spark.options import write_options
    from natsjs_sync.spark.writer import _write_batches

    nc = _stream(server, "BULK")
    wo = write_options({"servers": server.url, "subject": "bulk.default"}, streaming=False)
    n = 9000
    table = pa.table({
        "subject": pa.array([None if i % 3 == 0 else f"bulk.{i % 3}" for i in range(n)], pa.string()),
        "data": pa.array([str(i % 4500) for i in range(n)], pa.string()),  # each payload twice
        "headers": pa.array([{"k": str(i)} if i % 2 else None for i in range(n)],
                            pa.map_(pa.string(), pa.string())),
    })
    first = _write_batches(wo, iter(table.to_batches(max_chunksize=2000)), "bulk")
    assert (first.published, first.duplicates) == (n, 0)
    again = _write_batches(wo, iter(table.slice(0, 3000).to_batches(max_chunksize=700)), "bulk")
    assert (again.published, again.duplicates) == (0, 3000)
    st = nc.jetstream().stream("BULK")
    assert st.info(subjects_filter="bulk.>").state.subjects == {"bulk.default": 3000, "bulk.1": 3000, "bulk.2": 3000}
    m = st.get_msg(2)
    assert m.subject == "bulk.1" and m.data == b"1" and m.headers["k"] == "1" and m.headers["Nats-Msg-Id"]
    nowhere = dataclasses.replace(wo, subject="nowhere.x", cfg=dataclasses.replace(wo.cfg, timeout=0.5,
                                                                                   retry_timeout=1.0))
    with pytest.raises(nats.NatsError, match="no stream answered"):
        _write_batches(nowhere, iter(pa.table({"data": pa.array([b"x"])}).to_batches()), "bulk")
    nc.close()


def test_read_range_through_a_consumer_skips_deleted_and_filtered_and_leaves_nothing(server: NatsServer) -> None:
    """Long ranges (past the direct-get size) read through an ephemeral consumer
    taken in bulk: exactly the stored messages of the range, with subject
    filters, to the current end, none at all for a filter matching nothing,
    and no consumer left behind."""
    nc = _stream(server, "RANGE")
    js = nc.jetstream()
    for i in range(1, 12001):
        js.publish_async(f"range.{i % 3}", str(i).encode())
    js.publish_async_complete(timeout=60)
    st = js.stream("RANGE")
    deleted = {150, 151, 5000, 9000}
    for seq in deleted:
        st.delete_msg(seq)
    cfg = NatsConfig(servers=server.url)

    def seqs(start: int, end: int | None, subjects: list[str] | None = None) -> list[int]:
        return [m.seq for m in read_range(cfg, "RANGE", start, end, subjects)]

    assert seqs(100, 9500) == [s for s in range(100, 9501) if s not in deleted]
    assert seqs(100, 11000, ["range.1"]) == [s for s in range(100, 11001) if s % 3 == 1 and s not in deleted]
    assert seqs(100, 11000, ["range.1", "range.2"]) == [
        s for s in range(100, 11001) if s % 3 and s not in deleted]
    assert seqs(10000, None) == list(range(10000, 12001))
    assert seqs(100, 11000, ["range.none"]) == []
    assert st.info().state.consumer_count == 0
    nc.close()


@pytest.mark.timeout(300)
def test_dataframe_write_then_batch_read_100k(spark: Any, server: NatsServer) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    nc = _stream(server, "BULK", allow_direct=True)
    df = spark.range(0, 100_000, numPartitions=4).selectExpr(
        "concat('bulk.', cast(id % 10 as string)) as subject",
        "cast(cast(id as string) as binary) as data",
        "cast(id as string) as msg_id",
    )
    df.write.format("jetstream").option("servers", server.url).mode("append").save()
    assert nc.jetstream().stream("BULK").info().state.messages == 100_000

    back = (spark.read.format("jetstream").option("servers", server.url).option("minPartitions", 3)
            .option("maxMessagesPerPartition", 30_000).load("BULK"))
    assert back.rdd.getNumPartitions() == 4
    stats = back.selectExpr("count(*) as n", "count(distinct seq) as seqs",
                            "count(distinct cast(data as string)) as ids", "min(seq) as lo", "max(seq) as hi").first()
    assert (stats.n, stats.seqs, stats.ids, stats.lo, stats.hi) == (100_000, 100_000, 100_000, 1, 100_000)
    # Partitions are written concurrently, so which row got which sequence is
    # not fixed; every row must still carry its own subject and data.
    window = {r.seq: r for r in back.where("seq between 10 and 19").collect()}
    assert sorted(window) == list(range(10, 20))
    for r in window.values():
        assert r.stream == "BULK" and r.timestamp is not None
        assert r.subject == f"bulk.{int(r.data) % 10}"
    wanted = window[14].subject
    ranged = (spark.read.format("jetstream").option("servers", server.url).option("stream", "BULK")
              .option("startingSequence", 10).option("endingSequence", 19).option("subjects", wanted).load())
    assert sorted(r.seq for r in ranged.collect()) == sorted(s for s, r in window.items() if r.subject == wanted)
    nc.close()


def test_write_task_failing_half_way_is_retried_without_duplicates(spark: Any, server: NatsServer,
                                                                    tmp_path: Any) -> None:
    from pyspark import TaskContext

    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    nc = _stream(server, "RETRY")

    marker = tmp_path / "failed-once"

    def fail_first_attempt(rows: Any) -> Any:
        ctx = TaskContext.get()
        for i, row in enumerate(rows):
            if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i == 1500:
                marker.write_text("attempt 0 failed")
                raise RuntimeError("injected failure half way through the partition")
            yield row

    df = spark.range(0, 6000, numPartitions=2).selectExpr("'retry.x' as subject",
                                                          "cast(cast(id as string) as binary) as data")
    flaky = spark.createDataFrame(df.rdd.mapPartitions(fail_first_attempt), df.schema)
    flaky.write.format("jetstream").option("servers", server.url).mode("append").save()
    assert marker.exists()  # the failure did happen, and the task was retried
    info = nc.jetstream().stream("RETRY").info()
    assert info.state.messages == 6000  # the 1500 rows published before the failure were not stored twice
    datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), "RETRY", 1, info.state.last_seq))
    assert datas == list(range(6000))
    nc.close()


@pytest.mark.timeout(300)
def test_streaming_read_restarts_from_checkpoint_exactly_once(spark: Any, server: NatsServer, tmp_path: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    nc = _stream(server, "LIVE")
    js = nc.jetstream()
    for i in range(500):
        js.publish_async(f"live.{i % 3}", str(i).encode())
    js.publish_async_complete()
    checkpoint = str(tmp_path / "ckpt")
    out = str(tmp_path / "out")

    def run_once() -> None:
        q = (spark.readStream.format("jetstream").option("servers", server.url).option("stream", "LIVE")
             .option("maxMessagesPerTrigger", 200).load()
             .selectExpr("seq", "cast(data as string) as value")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None

    run_once()
    assert spark.read.parquet(out).count() == 500
    for i in range(500, 800):
        js.publish_async(f"live.{i % 3}", str(i).encode())
    js.publish_async_complete()
    run_once()  # restarted from the checkpoint
    rows = spark.read.parquet(out).selectExpr("seq", "cast(value as int) as v").collect()
    assert sorted(r.v for r in rows) == list(range(800))  # each message exactly once
    assert sorted(r.seq for r in rows) == list(range(1, 801))
    nc.close()


@pytest.mark.timeout(300)
def test_streaming_write_and_data_loss_detection(spark: Any, server: NatsServer, tmp_path: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    nc = _stream(server, "SRC")
    nc2 = _stream(server, "SINK")
    js = nc.jetstream()
    for i in range(100):
        js.publish(f"src.{i}", str(i).encode())
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("stream", "SRC").load()
         .selectExpr("'sink.copy' as subject", "data")
         .writeStream.format("jetstream").option("servers", server.url)
         .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    assert nc2.jetstream().stream("SINK").info().state.messages == 100

    # Purge what a checkpointed query has not read yet: failOnDataLoss stops it.
    ck = str(tmp_path / "c2")

    def start(fail: bool) -> Any:
        return (spark.readStream.format("jetstream").option("servers", server.url).option("stream", "SRC")
                .option("failOnDataLoss", str(fail).lower()).load().selectExpr("seq")
                .writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start())

    q = start(True)
    assert q.awaitTermination(120) and q.exception() is None
    for i in range(100, 150):
        js.publish(f"src.{i}", b"x")
    js.stream("SRC").purge(keep=10)
    q = start(True)
    with pytest.raises(Exception, match="removed before"):
        q.awaitTermination(120)
    q = start(False)
    assert q.awaitTermination(120) and q.exception() is None
    nc.close()
    nc2.close()


def test_orders_pipeline_example(spark: Any, server: NatsServer) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "spark_orders_pipeline.py"
    spec = importlib.util.spec_from_file_location("spark_orders_pipeline", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    totals = example.run(spark, server.url, n_orders=3000)
    expected = {r: 0.0 for r in ("eu", "us", "apac")}
    for i in range(3000):
        expected[("eu", "us", "apac")[i % 3]] += round((i % 100) * 1.25 + 5, 2)
    assert totals.keys() == expected.keys()
    for region, value in expected.items():
        assert totals[region] == pytest.approx(value, abs=0.01)
