"""Spark jobs in local[2] that ride out a restart of the server (3 s away)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.spark import NatsConfig, read_range
from natsjs_sync.testing import NatsServer

pytestmark = pytest.mark.slow

OUTAGE = 3.0  # seconds the server is away


@pytest.fixture
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def registered(spark: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


def _wait_for(what: str, cond: Callable[[], bool], seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _restarter(server: NatsServer, paused: Path, resumed: Path) -> tuple[threading.Thread, list[BaseException]]:
    """A thread that, once a task says it paused mid-partition, takes the server
    away, brings it back and lets the task go on. (The Spark job itself runs on
    the test's thread: a data source is registered for the session there.)"""

    def run() -> None:
        _wait_for("a task to pause", paused.exists, 100)
        server.stop()
        time.sleep(OUTAGE)  # the outage itself, not a synchronisation
        server.start()
        resumed.write_text("go on")

    return _in_thread(run)


def _pause_once(paused: Path, resumed: Path, at: int) -> Callable[[Any], Iterator[Any]]:
    """A mapPartitions function: partition 0 stops after ``at`` rows until the restart is over."""

    def run(rows: Any) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        for i, row in enumerate(rows):
            if i == at and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
                paused.write_text("paused")
                deadline = time.monotonic() + 180
                while not resumed.exists():
                    assert time.monotonic() < deadline, "the restart never finished"
                    time.sleep(0.05)
            yield row

    return run


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


@pytest.mark.timeout(400)
def test_batch_write_rides_out_a_server_restart(spark: Any, server: NatsServer, tmp_path: Path) -> None:
    with nats.connect(server.url) as nc:
        nc.jetstream().create_stream(name="RIDEW", subjects=["ridew.>"], duplicate_window=600.0)
    paused, resumed = tmp_path / "paused", tmp_path / "resumed"
    df = spark.range(0, 30_000, numPartitions=3).selectExpr("'ridew.x' as subject",
                                                            "cast(cast(id as string) as binary) as data")
    rows = spark.createDataFrame(df.rdd.mapPartitions(_pause_once(paused, resumed, 2000)), df.schema)
    t, errors = _restarter(server, paused, resumed)
    try:
        rows.write.format("jetstream").option("servers", server.url).option("retryTimeout", 90).mode("append").save()
    finally:
        resumed.write_text("go on")  # never leave a task waiting
        t.join(120)
    assert paused.exists() and not errors
    with nats.connect(server.url) as nc:
        assert nc.jetstream().stream("RIDEW").info().state.messages == 30_000
    datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), "RIDEW"))
    assert datas == list(range(30_000))


@pytest.mark.timeout(400)
def test_batch_read_rides_out_a_server_restart(spark: Any, server: NatsServer, tmp_path: Path) -> None:
    with nats.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="RIDER", subjects=["rider.>"])
        for i in range(40_000):
            js.publish_async("rider.x", str(i).encode())
        js.publish_async_complete(timeout=60)
    paused, resumed = tmp_path / "paused", tmp_path / "resumed"
    df = (spark.read.format("jetstream").option("servers", server.url).option("minPartitions", 2)
          .option("retryTimeout", 90).load("RIDER").select("seq", "data"))
    rows = spark.createDataFrame(df.rdd.mapPartitions(_pause_once(paused, resumed, 500)), df.schema)
    t, errors = _restarter(server, paused, resumed)
    try:
        got = rows.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas").first()
    finally:
        resumed.write_text("go on")
        t.join(120)
    assert paused.exists() and not errors
    assert (got.n, got.seqs, got.datas) == (40_000, 40_000, 40_000)


@pytest.mark.timeout(400)
def test_streaming_query_rides_out_a_server_restart(spark: Any, server: NatsServer, tmp_path: Path) -> None:
    nc = nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream()
    js.create_stream(name="RSRC", subjects=["rsrc.>"])
    js.create_stream(name="RSINK", subjects=["rsink.>"], duplicate_window=600.0)

    def publish(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            js.publish_async("rsrc.x", str(i).encode())
        js.publish_async_complete(timeout=60)

    def sunk() -> int:
        try:
            return int(js.stream("RSINK").info(timeout=2).state.messages)
        except nats.NatsError:
            return -1

    publish(0, 300)
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("retryTimeout", 90)
         .load("RSRC").selectExpr("'rsink.copy' as subject", "data")
         .writeStream.format("jetstream").option("servers", server.url).option("retryTimeout", 90)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="500 milliseconds").start())
    try:
        _wait_for("the first rows to arrive", lambda: sunk() == 300)
        server.stop()
        time.sleep(OUTAGE)  # the outage itself
        server.start()
        _wait_for("the client to reconnect", lambda: nc.is_connected, 60)
        publish(300, 600)
        _wait_for("every row to arrive", lambda: sunk() >= 600 or q.exception() is not None)
        assert q.exception() is None and q.isActive
    finally:
        q.stop()
    assert sunk() == 600
    datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), "RSINK"))
    assert datas == list(range(600))
    nc.close()


def _error_text(exc: BaseException) -> str:
    return str(exc) + str(getattr(exc, "desc", ""))


@pytest.mark.timeout(400)
def test_no_server_at_the_address_fails_the_job_on_the_driver_within_seconds(spark: Any) -> None:
    """A typo in ``servers`` is named at once, not after ``retryTimeout`` per task
    attempt. With retryTimeout at 600 s, waiting it out would take 10 minutes or more
    per job; the bound of 60 s leaves a loaded machine's Spark its own slowness."""
    from natsjs_sync.testing.server import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    url = f"nats://{address}"
    jobs: dict[str, Callable[[], Any]] = {
        "batch read": lambda: spark.read.format("jetstream").option("servers", url).option("retryTimeout", 600)
        .load("NOSERVER").count(),
        "batch write": lambda: spark.range(10).selectExpr("'noserver.x' as subject", "cast(id as string) as data")
        .write.format("jetstream").option("servers", url).option("retryTimeout", 600).mode("append").save(),
        "streaming read": lambda: spark.readStream.format("jetstream").option("servers", url)
        .option("retryTimeout", 600).load("NOSERVER").writeStream.format("noop").start().awaitTermination(90),
    }
    for what, job in jobs.items():
        started = time.monotonic()
        with pytest.raises(Exception) as failed:  # PySpark's wrapper of the driver's NoServersError
            job()
        took = time.monotonic() - started
        assert took < 60, f"{what}: failed only after {took:.0f} s"
        text = _error_text(failed.value)
        assert address in text and "refused" in text.lower() and "when the job started" in text, \
            f"{what}: {text[:2000]}"
        # PySpark 4.3's streaming runner hid an error raised while making the reader behind its own.
        assert "UnboundLocalError" not in text, f"{what}: {text[:2000]}"
