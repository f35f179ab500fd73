"""Spark reads at scale: a batch read creates no consumer where the server can
serve its range by batched direct get (2.11+, ``allow_direct``); elsewhere the
consumers one query's read holds at once are capped (``maxConsumers``); and a
read's generator closed by the garbage collector never takes the connection's lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream.paging import _read_pulled, reads_directly
from natsjs_sync.protocol.headers import parse_headers
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.protocol.subjects import subject_matches
from natsjs_sync.spark import NatsConfig, config
from natsjs_sync.spark.ranges import iter_range
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ..gc_kit import automatic_gc_off, collect_holding_the_lock


@pytest.fixture
def server(spark_server: NatsServer) -> NatsServer:
    return spark_server


@pytest.fixture
def nc(server: NatsServer) -> Iterator[nats.Client]:
    client = nats.connect(server.url, name="scale-test")
    yield client
    client.close()


def _stream(nc: nats.Client, prefix: str, n: int, allow_direct: bool, subjects: int = 3,
            storage: str = "memory") -> str:
    """A fresh stream of ``n`` messages ``str(i)`` on ``<name>.<i % subjects>``."""
    name = prefix + next_nuid()[-10:]
    js = nc.jetstream()
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct, storage=storage)
    for i in range(n):
        js.publish_async(f"{name}.{i % subjects}", str(i).encode())
    js.publish_async_complete(timeout=60)
    return name


def _created(nc: nats.Client, advisories: Any, stream: str) -> list[str]:
    """The consumers whose creation ``advisories`` (a subscription to the created advisories) saw so far.

    A consumer created now marks the end: the server sends its advisories in
    order, so every earlier one has arrived once this one has.
    """
    marker = nc.jetstream().create_consumer(stream, ack_policy="none", inactive_threshold=30.0)
    names = []
    for _ in range(100_000):
        msg = advisories.next_msg(timeout=10.0)
        name = json.loads(msg.data)["consumer"]
        if name == marker.name:
            nc.jetstream().delete_consumer(stream, marker.name)
            return names
        names.append(name)
    raise AssertionError("the marker consumer's advisory never came")


def test_a_pulled_read_collected_while_the_lock_is_held_hands_its_release_to_the_timer_thread(
        server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "GCREAD", 20, allow_direct=False)  # no direct get: the consumer path
    cfg = NatsConfig(servers=server.url, name="gc-read")
    shared = cfg.client()
    with automatic_gc_off():  # only the collect below closes the generator
        rows = iter_range(cfg, name, 1, 20, batch=5)
        assert next(rows)[1] == 1  # the read now holds its consumer and its inbox
        assert nc.jetstream().stream(name).info().state.consumer_count == 1
        box: list[Any] = [rows]
        box.append(box)  # a cycle: only the cyclic collector closes it
        del rows, box
        ok = collect_holding_the_lock(shared)
        if not ok:  # wedged for good: keep the teardown from closing it (that would hang too)
            with config._lock:
                config._clients.clear()
        assert ok, "the read's generator took the connection's lock when collected: deadlocked"
        assert wait_until(lambda: nc.jetstream().stream(name).info().state.consumer_count == 0, timeout=10.0), \
            "the collected read's consumer was not deleted"
        assert shared.is_connected


def _rows(cfg: NatsConfig, name: str, start: int, end: int, subjects: list[str] | None = None,
          batch: int = 7) -> list[tuple[str, int, int, Any, bytes]]:
    out = []
    for subject, seq, ts_us, hdrs, data in iter_range(cfg, name, start, end, subjects, batch=batch):
        own = parse_headers(hdrs)[2] if isinstance(hdrs, bytes) else hdrs
        out.append((subject, seq, ts_us, list(own.items_all()) if own else None, data))
    return out


def _pulled(cfg: NatsConfig, name: str, start: int, end: int, subjects: list[str] | None = None
            ) -> list[tuple[str, int, int, Any, bytes]]:
    """The same range through a consumer (what a server before 2.11 reads with)."""
    out = []
    for subject, seq, ts_us, hdrs, data in _read_pulled(cfg.jetstream(), name, start, end, list(subjects or []),
                                                        5, 10.0, None):
        own = parse_headers(hdrs)[2] if hdrs else None
        out.append((subject, seq, ts_us, list(own.items_all()) if own else None, data))
    return out


@pytest.mark.server("2.11")
def test_a_range_read_by_direct_get_gives_what_the_consumer_gives_and_creates_none(
        server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "DIRECT", 60, allow_direct=True)
    js = nc.jetstream()
    js.publish(f"{name}.h", b"with headers", headers={"A": "1", "B": ["2", "3"]}, msg_id="m-61")
    st = js.stream(name)
    for seq in (3, 4, 5, 6, 7, 8, 9, 10, 20, 61):  # a batch of 7 from 3 reaches past its window
        if seq != 61:
            st.delete_msg(seq)
    cfg = NatsConfig(servers=server.url, name="direct-read")
    assert reads_directly(cfg.jetstream(), st.info())
    consumers = nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED.>")
    direct = {
        "all": _rows(cfg, name, 1, 61),
        "middle": _rows(cfg, name, 4, 33),
        "one subject": _rows(cfg, name, 1, 61, [f"{name}.1"]),
        "overlapping subjects": _rows(cfg, name, 2, 59, [f"{name}.1", f"{name}.>", f"{name}.2"]),
        "past the end": _rows(cfg, name, 70, 80),
    }
    assert _created(nc, consumers, name) == [], "a read by direct get created a consumer"
    assert direct["all"] == _pulled(cfg, name, 1, 61)
    assert [r[1] for r in direct["all"]] == [1, 2, *range(11, 20), *range(21, 62)]
    assert direct["all"][-1][3] == [("A", "1"), ("B", "2"), ("B", "3"), ("Nats-Msg-Id", "m-61")]
    assert direct["middle"] == _pulled(cfg, name, 4, 33)
    assert direct["one subject"] == _pulled(cfg, name, 1, 61, [f"{name}.1"])
    assert direct["overlapping subjects"] == _pulled(cfg, name, 2, 59, [f"{name}.>"])
    assert direct["past the end"] == []


@pytest.mark.server("2.11")
def test_a_direct_read_collected_while_the_lock_is_held_hands_its_unsubscribe_to_the_timer_thread(
        server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "GCDIRECT", 20, allow_direct=True)
    cfg = NatsConfig(servers=server.url, name="gc-direct")
    shared = cfg.client()

    def routed() -> list[str]:
        return [e.subject for e in list(shared._conn.registry.entries.values())]

    cfg.jetstream().stream(name).info()  # the client's request inbox is subscribed now, not during the read
    with automatic_gc_off():
        before = set(routed())
        rows = iter_range(cfg, name, 1, 20, batch=5)
        assert next(rows)[1] == 1
        (inbox,) = set(routed()) - before
        box: list[Any] = [rows]
        box.append(box)
        del rows, box
        ok = collect_holding_the_lock(shared)
        if not ok:
            with config._lock:
                config._clients.clear()
        assert ok, "the read's generator took the connection's lock when collected: deadlocked"
        assert wait_until(lambda: inbox not in routed(), timeout=10.0), "the collected read's inbox is still routed"


def _read(spark: Any, server: NatsServer, stream: str, **opts: Any) -> Any:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    r = spark.read.format("jetstream").option("servers", server.url)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(stream)


@pytest.mark.slow
@pytest.mark.server("2.11")
@pytest.mark.timeout(300)
def test_a_batch_read_of_16_partitions_creates_no_consumer(spark: Any, server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "SCALE", 20_000, allow_direct=True)  # 1,250 a partition: long ranges too
    advisories = nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.{name}.>")
    df = _read(spark, server, name, minPartitions=16)
    assert df.rdd.getNumPartitions() == 16
    assert df.count() == 20_000
    assert df.select("seq").distinct().count() == 20_000
    assert _read(spark, server, name, minPartitions=16, subjects=f"{name}.1,{name}.2").count() == 13_333
    assert _created(nc, advisories, name) == [], "a batch read created consumers"


@pytest.mark.slow
def test_reads_through_consumers_hold_at_most_max_consumers(spark: Any, server: NatsServer,
                                                            nc: nats.Client) -> None:
    name = _stream(nc, "CAPPED", 1600, allow_direct=False)  # no direct get: every partition has a consumer
    advisories = nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.{name}.>")
    assert _read(spark, server, name, minPartitions=16).rdd.getNumPartitions() == 16  # under the default cap
    df = _read(spark, server, name, minPartitions=16, maxConsumers=3)
    assert df.rdd.getNumPartitions() == 3
    assert df.select("seq").distinct().count() == 1600
    created = _created(nc, advisories, name)
    assert 1 <= len(created) <= 3, f"{len(created)} consumers for a read capped at 3"
    assert nc.jetstream().stream(name).info().state.consumer_count == 0


def test_max_consumers_is_checked_on_the_driver() -> None:
    from natsjs_sync.spark.options import read_options

    base = {"servers": "nats://127.0.0.1:4222", "stream": "S"}
    assert read_options(base, streaming=False).max_consumers == 64
    assert read_options({**base, "maxConsumers": "5"}, streaming=True).max_consumers == 5
    with pytest.raises(ValueError, match="maxConsumers"):
        read_options({**base, "maxConsumers": "0"}, streaming=False)


def _info_requests(nc: nats.Client, name: str, run: Any) -> int:
    """STREAM.INFO requests for ``name`` (all of them go to its leader) while ``run()`` runs."""
    seen = nc.subscribe(f"$JS.API.STREAM.INFO.{name}")
    nc.flush()
    run()
    nc.flush()  # every request made before has been delivered to ``seen`` by now
    count = seen.pending_msgs
    seen.unsubscribe()
    return count


def _micro_batch(spark: Any, server: NatsServer, name: str, parts: int, tmp_path: Any) -> None:
    """A streaming query that reads ``name`` (1,000 rows) in one micro-batch of ``parts`` tasks."""
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("minPartitions", parts)
         .load(name).writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / f"chk{parts}")).start())
    q.awaitTermination(120)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 1000


@pytest.mark.slow
@pytest.mark.parametrize("allow_direct", [True, False])
def test_a_batch_read_task_asks_the_stream_leader_for_nothing_before_it_reads(
        spark: Any, server: NatsServer, nc: nats.Client, allow_direct: bool) -> None:
    """The driver tells each task how its range is read (direct get or a consumer): no STREAM.INFO per task."""
    name = _stream(nc, "ASKS", 1000, allow_direct=allow_direct)
    one, sixteen = (_info_requests(nc, name, lambda n=n: _read(spark, server, name, minPartitions=n).count())
                    for n in (1, 16))
    # Before, each task asked for the stream's info: 15 more with 16 tasks than with 1.
    assert sixteen - one < 8, f"{one} stream info requests with 1 task, {sixteen} with 16"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_micro_batch_task_asks_the_stream_leader_for_nothing_when_its_range_is_there(
        spark: Any, server: NatsServer, nc: nats.Client, tmp_path: Any) -> None:
    """Nor does a micro-batch's task for its data-loss check, unless the first message read is not the first asked."""
    name = _stream(nc, "MICRO", 1000, allow_direct=True)
    one, sixteen = (_info_requests(nc, name, lambda n=n: _micro_batch(spark, server, name, n, tmp_path))
                    for n in (1, 16))
    assert sixteen - one < 8, f"{one} stream info requests with 1 task, {sixteen} with 16"


@pytest.mark.slow
@pytest.mark.server("2.11")
@pytest.mark.timeout(400)
def test_a_batch_read_by_direct_get_rides_out_a_server_restart(spark: Any, tmp_path: Any) -> None:
    from .test_rideout import _pause_once, _restarter

    own = NatsServer()  # restarted by the test: not the session's server
    own.start()
    try:
        with nats.connect(own.url) as client:
            name = _stream(client, "RIDEDIRECT", 40_000, allow_direct=True, subjects=1, storage="file")
        paused, resumed = tmp_path / "paused", tmp_path / "resumed"
        df = _read(spark, own, name, minPartitions=2, retryTimeout=90).select("seq", "data")
        rows = spark.createDataFrame(df.rdd.mapPartitions(_pause_once(paused, resumed, 500)), df.schema)
        t, errors = _restarter(own, paused, resumed)
        try:
            got = rows.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas"
                                  ).first()
        finally:
            resumed.write_text("go on")
            t.join(120)
        assert paused.exists() and not errors
        assert (got.n, got.seqs, got.datas) == (40_000, 40_000, 40_000)
    finally:
        own.close()


@pytest.mark.server("2.11")
def test_a_direct_read_asks_the_leader_only_when_the_replica_ran_out_before_the_end(
        server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "TAIL", 60, allow_direct=True)  # seqs 1..60 on <name>.<(seq - 1) % 3>
    cfg = NatsConfig(servers=server.url, name="tail-read")
    asked = nc.subscribe(f"$JS.API.STREAM.MSG.GET.{name}")
    nc.flush()

    def leader_asked(start: int, end: int, subjects: list[str] | None) -> int:
        rows = _rows(cfg, name, start, end, subjects)
        assert rows == _pulled(cfg, name, start, end, subjects)
        nc.flush()
        n = asked.pending_msgs
        for _ in range(n):
            asked.next_msg(timeout=1.0)
        return n

    assert leader_asked(1, 60, None) == 0  # read to its last sequence
    assert leader_asked(1, 50, [f"{name}.1"]) == 0  # seq 50 is on .1; then 51.. answered past the end
    assert leader_asked(1, 52, [f"{name}.1"]) == 0  # 53, the next on .1, showed the replica had all
    assert leader_asked(1, 80, [f"{name}.1"]) == 1  # the replica ran out at 59: is anything stored past it?
    assert leader_asked(70, 80, None) == 1


def test_a_consumer_read_takes_overlapping_subject_filters(server: NatsServer, nc: nats.Client) -> None:
    """Filters a consumer refuses together (one covers another, or two overlap) read as
    a direct read does: each matching message once, in order, and no consumer left."""
    name = _stream(nc, "OVERLAP", 40, allow_direct=False, subjects=4)
    js = nc.jetstream()
    for subject in ("a.b", "a.c", "x.b", "a.b.c"):
        js.publish(f"{name}.{subject}", subject.encode())
    cfg = NatsConfig(servers=server.url, name="overlap-read")
    assert not reads_directly(cfg.jetstream(), js.stream(name).info())
    everything = _rows(cfg, name, 1, 44)
    assert [r[1] for r in everything] == list(range(1, 45))

    def only(*patterns: str) -> list[tuple[str, int, int, Any, bytes]]:
        return [r for r in everything if any(subject_matches(p, r[0]) for p in patterns)]

    cases = [
        [f"{name}.1", f"{name}.>", f"{name}.1"],  # covered, and a repeat
        [f"{name}.1", f"{name}.*", f"{name}.2"],  # covered by a wildcard of one token
        [f"{name}.a.*", f"{name}.*.b"],  # both match <name>.a.b, neither covers the other
        [f"{name}.a.>", f"{name}.*.b", f"{name}.3"],
    ]
    for filters in cases:
        assert _rows(cfg, name, 1, 44, filters) == only(*filters), filters
    assert wait_until(lambda: js.stream(name).info().state.consumer_count == 0, timeout=10.0)
