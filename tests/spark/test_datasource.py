"""The ``jetstream`` data source as a Spark user meets it: empty ranges, exactly-once
writes whatever the row order, Kafka's options, several streams, pushdown, errors."""

from __future__ import annotations

import collections
import datetime
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.spark import NatsConfig, read_range
from natsjs_sync.testing import NatsServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


@pytest.fixture
def js(server: NatsServer) -> Iterator[Any]:
    nc = nats.connect(server.url)
    yield nc.jetstream()
    nc.close()


@pytest.fixture(autouse=True)
def registered(spark: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


def _stream(js: Any, name: str, **kw: Any) -> None:
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass
    js.create_stream(name=name, subjects=[f"{name.lower()}.>"], duplicate_window=600.0, **kw)


def _fill(js: Any, name: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        js.publish_async(f"{name.lower()}.{i % 3}", str(i).encode())
    js.publish_async_complete(timeout=60)


def _read(spark: Any, server: NatsServer, stream: str, **opts: Any) -> Any:
    r = spark.read.format("jetstream").option("servers", server.url)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(stream)


def _error_text(exc: BaseException) -> str:
    return str(exc) + str(getattr(exc, "desc", ""))


def test_empty_ranges_read_as_no_rows(spark: Any, server: NatsServer, js: Any) -> None:
    _stream(js, "EMPTY")
    assert _read(spark, server, "EMPTY").count() == 0  # an empty stream
    _fill(js, "EMPTY", 5)
    before_first = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).isoformat()
    assert _read(spark, server, "EMPTY", startingOffsets="latest").count() == 0
    assert _read(spark, server, "EMPTY", startingSequence=100).count() == 0  # past the end
    assert _read(spark, server, "EMPTY", endingTimestamp=before_first).count() == 0  # ends before the first
    assert _read(spark, server, "EMPTY", endingOffsets='{"EMPTY": 1}').count() == 0  # exclusive end
    assert _read(spark, server, "EMPTY").count() == 5


def test_retried_task_with_its_rows_reversed_stores_each_row_once(spark: Any, server: NatsServer, js: Any,
                                                                   tmp_path: Path) -> None:
    """Ids come from row content, so a retry that sees its rows in another order
    (any upstream whose order is not stable) neither loses nor repeats a row,
    identical rows included. The failed attempt stores part of its rows first:
    the retry then meets ids the stream already holds, in another order."""
    import pyarrow as pa
    from pyspark import TaskContext

    _stream(js, "REV")
    url = server.url
    failed = tmp_path / "failed"

    def flaky(batches: Iterator[Any]) -> Iterator[Any]:
        table = pa.Table.from_batches(list(batches))
        ctx = TaskContext.get()
        if ctx.partitionId() != 1:
            yield from table.to_batches()
            return
        if ctx.attemptNumber() > 0:  # the same rows, reversed and cut into other batches
            yield from table.take(pa.array(range(table.num_rows - 1, -1, -1))).to_batches(max_chunksize=700)
            return
        # Attempt 0: half the rows in order, wait until the writer has stored some of them, fail.
        # Each batch is larger than the Python worker's 64 KiB output buffer, so it reaches
        # the writer without waiting for the end of the partition.
        with nats.connect(url) as nc:
            st = nc.jetstream().stream("REV")
            yield from table.slice(0, table.num_rows // 2).to_batches(max_chunksize=500)
            deadline = time.monotonic() + 60
            stored = 0
            while stored == 0 and time.monotonic() < deadline:
                stored = (st.info(subjects_filter="rev.b").state.subjects or {}).get("rev.b", 0)
                if stored == 0:
                    time.sleep(0.05)
            failed.write_text(str(stored))
        raise RuntimeError("injected failure after part of the partition was stored")

    # 6000 rows in two partitions of 3000; in partition 1 every payload occurs three times.
    df = spark.range(0, 6000, numPartitions=2).selectExpr(
        "if(id < 3000, 'rev.a', 'rev.b') as subject",
        "cast(lpad(cast(id % 1000 as string), 200, '.') as binary) as data")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        df.mapInArrow(flaky, df.schema).write.format("jetstream").option("servers", url).mode("append").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    stored_before_failure = int(failed.read_text())
    assert 0 < stored_before_failure < 3000, "the failed attempt must store some, not all, of its rows"
    info = js.stream("REV").info(subjects_filter="rev.>")
    assert info.state.messages == 6000
    assert info.state.subjects == {"rev.a": 3000, "rev.b": 3000}
    got = collections.Counter((m.subject, int(m.data.lstrip(b"."))) for m in read_range(NatsConfig(servers=url), "REV"))
    want = collections.Counter(("rev.a" if i < 3000 else "rev.b", i % 1000) for i in range(6000))
    assert got == want


def test_bad_options_fail_at_load_and_save_naming_them(spark: Any, server: NatsServer, js: Any) -> None:
    _stream(js, "OPTS")
    with pytest.raises(Exception, match="'minPartitions' must be an integer, got 'two'"):
        _read(spark, server, "OPTS", minPartitions="two")
    with pytest.raises(Exception, match=r"(?i)unknown option 'startingOffset'"):
        _read(spark, server, "OPTS", startingOffset="latest")
    with pytest.raises(Exception, match="'failOnDataLoss' must be true or false, got 'ture'"):
        spark.readStream.format("jetstream").option("servers", server.url).option("failOnDataLoss", "ture") \
            .load("OPTS").writeStream.format("noop").start()
    df = spark.range(3).selectExpr("'opts.x' as subject", "cast(id as string) as data", "id as extra")
    with pytest.raises(Exception, match=r"unknown column.*'extra'"):
        df.write.format("jetstream").option("servers", server.url).mode("append").save()
    with pytest.raises(Exception, match=r"append-only: use \.mode\('append'\)"):
        df.drop("extra").write.format("jetstream").option("servers", server.url).mode("overwrite").save()
    assert js.stream("OPTS").info().state.messages == 0  # nothing was sent


def test_a_write_finds_the_source_in_the_session_active_in_its_thread(spark: Any, server: NatsServer,
                                                                       js: Any) -> None:
    """Spark looks a Python data source up for a write in the session active in the JVM thread that
    serves the calling thread, not in the DataFrame's session (a read looks in the DataFrame's): with
    none there a write fails with DATA_SOURCE_NOT_FOUND, registered or not. Earlier tests can leave
    this thread so (some Spark jobs end with it cleared, and a fork made from another thread cuts
    the thread's Py4J connection: the new one is served by a new JVM thread, which has none); each
    Spark test starts with the session made active again (``make_active``, a fixture of conftest)."""
    from .conftest import make_active

    _stream(js, "ACTIVE")
    df = spark.range(3).selectExpr("'active.x' as subject", "cast(id as string) as data")

    def write() -> None:
        df.write.format("jetstream").option("servers", server.url).mode("append").save()

    spark._jvm.org.apache.spark.sql.classic.SparkSession.clearActiveSession()
    try:
        assert _read(spark, server, "ACTIVE").count() == 0  # a read finds the source
        with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND"):
            write()
    finally:
        make_active(spark)
    write()
    assert js.stream("ACTIVE").info().state.messages == 3


def test_missing_stream_is_named_in_batch_and_streaming(spark: Any, server: NatsServer, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="stream 'NOPE' \\(option 'stream'\\) does not exist") as exc:
        _read(spark, server, "NOPE").count()
    assert "data loss" not in _error_text(exc.value).lower()
    q = (spark.readStream.format("jetstream").option("servers", server.url).load("NOPE")
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start())
    with pytest.raises(Exception, match="stream 'NOPE' \\(option 'stream'\\) does not exist") as exc:
        q.awaitTermination(120)
    assert "removed before" not in _error_text(exc.value)


def test_kafka_options_several_streams_and_header_shapes(spark: Any, server: NatsServer, js: Any) -> None:
    _stream(js, "KA")
    _stream(js, "KB")
    _fill(js, "KA", 20)
    _fill(js, "KB", 30)
    # Write with Kafka's column names and header shape; read the headers back.
    df = spark.createDataFrame(
        [("ka.h", b"v1", [("trace", b"t-1"), ("tag", b"x"), ("tag", b"y")])],
        "topic STRING, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    df.write.format("jetstream").option("servers", server.url).mode("append").save()
    row = _read(spark, server, "KA", startingSequence=21).first()
    assert row.data == b"v1" and row.headers["trace"] == ["t-1"] and row.headers["tag"] == ["x", "y"]
    assert len(row.headers["Nats-Msg-Id"]) == 1  # every write carries a message id
    kafka = _read(spark, server, "KA", startingSequence=21, headersFormat="kafka").first()
    assert ("tag", b"y") in [(h.key, h.value) for h in kafka.headers]
    bare = _read(spark, server, "KA", includeHeaders="false")
    assert "headers" not in bare.columns and bare.count() == 21

    # Two streams, per-stream JSON positions, exclusive end (Kafka's meaning).
    both = _read(spark, server, "KA,KB", startingOffsets='{"KA": 5, "KB": -2}', endingOffsets='{"KA": 10, "KB": -1}')
    got = sorted((r.stream, r.seq) for r in both.select("stream", "seq").collect())
    assert got == [("KA", s) for s in range(5, 10)] + [("KB", s) for s in range(1, 31)]
    # endingSequence is inclusive.
    assert sorted(r.seq for r in _read(spark, server, "KA", endingSequence=3).collect()) == [1, 2, 3]


def test_where_on_seq_subject_stream_and_time_reads_only_what_it_needs(spark: Any, server: NatsServer,
                                                                       js: Any) -> None:
    _stream(js, "PUSH", allow_direct=True)
    _fill(js, "PUSH", 3000)
    _fill(js, "PUSH", 1000, start=3000)
    df = _read(spark, server, "PUSH", maxMessagesPerPartition=100)
    mid = df.where("seq = 2001").first().timestamp  # as Spark has it (microseconds)
    assert df.rdd.getNumPartitions() == 40
    for enabled in ("false", "true"):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", enabled)
        try:
            ranged = df.where("seq between 1001 and 1100")
            assert sorted(r.seq for r in ranged.select("seq").collect()) == list(range(1001, 1101))
            # With pushdown on, only the range is planned (1 partition, not 40); off, the result is the same.
            assert ranged.rdd.getNumPartitions() == (1 if enabled == "true" else 40)
            on_subject = df.where("subject = 'push.1' and seq > 3900")
            assert sorted(r.seq for r in on_subject.collect()) == [s for s in range(3901, 4001) if (s - 1) % 3 == 1]
            assert df.where("stream = 'OTHER'").count() == 0
            late = df.where(df.timestamp >= mid).select("seq").collect()
            assert {r.seq for r in late} >= set(range(2001, 4001))
            if enabled == "true":
                assert df.where(df.timestamp >= mid).rdd.getNumPartitions() <= 21
        finally:
            spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_stream_reader_waits_for_min_rows_until_max_trigger_delay(server: NatsServer, js: Any) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from natsjs_sync.spark.options import read_options
    from natsjs_sync.spark.stream_reader import JetStreamStreamReader

    _stream(js, "MINR")
    _fill(js, "MINR", 50)
    ro = read_options({"servers": server.url, "stream": "MINR", "minOffsetsPerTrigger": "100",
                       "maxTriggerDelay": "10m"}, streaming=True)
    reader = JetStreamStreamReader(ro)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # 50 < 100: no batch yet
    _fill(js, "MINR", 60, start=50)
    assert reader.latestOffset(start, ReadAllAvailable())["streams"]["MINR"]["next"] == 111  # 110 >= 100
    _fill(js, "MINR", 5, start=110)
    nxt = reader.latestOffset(start, ReadAllAvailable())
    later = reader.latestOffset(nxt, ReadAllAvailable())
    assert later == nxt  # 5 more: below the minimum
    reader._last_trigger -= 601  # as if maxTriggerDelay (10 minutes) had passed
    assert reader.latestOffset(nxt, ReadAllAvailable())["streams"]["MINR"]["next"] == 116
    reader.prepareForTriggerAvailableNow()  # Trigger.AvailableNow reads everything, minimum or not
    _fill(js, "MINR", 1, start=115)
    got = reader.latestOffset(nxt, ReadAllAvailable())["streams"]["MINR"]["next"]
    assert got == 116  # the target fixed when AvailableNow started, not the new message


def test_first_connect_waits_for_a_server_that_comes_up() -> None:
    """A task starting while the server is away (a restart) connects once it is back."""
    from natsjs_sync.testing.server import free_port

    port = free_port()
    late = NatsServer(port=port)
    first_failure = threading.Event()
    t = threading.Thread(target=lambda: first_failure.wait(30) and late.start())
    t.start()
    try:
        # The server starts only after the client's first attempt failed.
        cfg = NatsConfig(servers=f"nats://127.0.0.1:{port}", retry_timeout=60, reconnect_time_wait=0.2,
                         options=(("error_cb", lambda exc: first_failure.set()),))
        nc = cfg.connect()
        assert first_failure.is_set() and nc.is_connected
        nc.close()
        with pytest.raises(nats.NoServersError, match="retry_timeout"):
            NatsConfig(servers=f"nats://127.0.0.1:{free_port()}", retry_timeout=0.5,
                       reconnect_time_wait=0.1).connect()
    finally:
        first_failure.set()
        t.join(60)
        late.close()
