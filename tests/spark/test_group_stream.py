"""A Spark streaming query as a member of a partitioned consumer group (option ``consumerGroup``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig, JetStream, SubjectTransform
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

pytestmark = [pytest.mark.slow, pytest.mark.server("2.11")]

KEYS = [f"k{i}" for i in range(12)]


@pytest.fixture
def server(spark_server: NatsServer) -> NatsServer:
    return spark_server


@pytest.fixture
def js(server: NatsServer) -> Iterator[JetStream]:
    """A JetStream context; the streams a test made (groups' work-queue streams too) are deleted after it."""
    nc = nats.connect(server.url)
    js = nc.jetstream()
    before = set(js.stream_names())
    yield js
    for name in set(js.stream_names()) - before:
        try:
            js.delete_stream(name)
        except nats.NatsError:
            pass
    nc.close()


def _source(spark: Any, server: NatsServer, stream: str, **options: Any) -> Any:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    reader = spark.readStream.format("jetstream").option("servers", server.url).option("stream", stream)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


class Batches:
    """What foreachBatch saw: rows by batch id (a replayed batch replaces its rows, as an idempotent sink does)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.by_batch: dict[int, list[tuple[str, int, str]]] = {}
        self.fail_batch: int | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [(r.subject, r.seq, r.value) for r in df.selectExpr("subject", "seq", "cast(data as string) as value")
                .collect()]
        if batch_id == self.fail_batch and rows:
            self.fail_batch = None
            raise RuntimeError("the sink fails this batch once")
        with self.cond:
            self.by_batch[batch_id] = rows
            self.cond.notify_all()

    def values(self) -> list[str]:
        with self.cond:
            return [v for rows in self.by_batch.values() for _, _, v in rows]

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))
            return True


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.2)
    return True


def _publish(js: JetStream, stream: str, start: int, count: int) -> list[str]:
    sent = []
    for i in range(start, start + count):
        key = KEYS[i % len(KEYS)]
        js.publish_async(f"{stream}.{key}", f"{key}:{i}".encode())
        sent.append(f"{key}:{i}")
    js.publish_async_complete()
    return sent


@pytest.mark.timeout(300)
def test_query_and_another_member_share_an_elastic_group(spark: Any, server: NatsServer, js: JetStream,
                                                        tmp_path: Any) -> None:
    stream = "GE" + next_nuid()[:8]
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory")
    pcgroups.create_elastic(js, stream, "g", 4, [pcgroups.PartitioningFilter(filter=f"{stream}.*",
                                                                          partitioning_wildcards=(1,))])
    pcgroups.add_members(js, stream, "g", ["spark", "py"])
    other: list[str] = []
    lock = threading.Lock()

    def handle(msg: nats.Msg) -> None:
        with lock:
            other.append(msg.data.decode())
        msg.ack()

    py = pcgroups.elastic_consume(js, stream, "g", "py", handle, ConsumerConfig(ack_policy="explicit", ack_wait=2.0))
    seen = Batches()
    q = (_source(spark, server, stream, consumerGroup="g", groupMember="spark", groupAckWait="2",
                 maxMessagesPerTrigger=50)
         .writeStream.foreachBatch(seen).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        sent = _publish(js, stream, 0, 300)
        assert seen.wait_for(lambda: len(seen.values()) + len(other) >= len(sent), 90), \
            (len(seen.values()), len(other), q.exception())
        mine = seen.values()
        assert mine and other, "both members got partitions"
        assert sorted(mine + other) == sorted(sent)  # every message once: union all, no overlap
        assert not set(mine) & set(other)
        # In order per key (so per partition) across the query's batches, in the order Spark wrote them.
        last: dict[str, int] = {}
        with seen.cond:
            for b in sorted(seen.by_batch):
                for subject, _, value in seen.by_batch[b]:
                    key, i = value.split(":")
                    assert subject == f"{stream}.{key}"  # the partition token stripped
                    assert int(i) > last.get(key, -1)
                    last[key] = int(i)
        # Acked once Spark is done: nothing left pending on the query's consumer, nothing left in the work queue.
        consumer = js.consumer(f"{stream}-g", "spark")
        assert _wait(lambda: consumer.info().num_ack_pending == 0, 30), consumer.info()
        assert _wait(lambda: js.stream(f"{stream}-g").info().state.messages == 0, 30)
    finally:
        q.stop()
        py.stop()


@pytest.mark.timeout(300)
def test_restart_from_checkpoint_replays_the_failed_batch_without_loss_or_duplicates(
        spark: Any, server: NatsServer, js: JetStream, tmp_path: Any) -> None:
    stream = "GS" + next_nuid()[:8]
    # A static group on a stream without direct access: the tasks read by STREAM.MSG.GET.
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory", allow_direct=False,
                     subject_transform=SubjectTransform(
                         src=f"{stream}.*", dest=f"{{{{Partition(3,1)}}}}.{stream}.{{{{Wildcard(1)}}}}"))
    pcgroups.create_static(js, stream, "g", 3, members=["spark"])
    seen = Batches()
    seen.fail_batch = 1
    checkpoint = str(tmp_path / "ck")

    def start() -> Any:
        return (_source(spark, server, stream, consumerGroup="g", groupMember="spark", groupKind="static",
                        groupAckWait="2", maxMessagesPerTrigger=40)
                .writeStream.foreachBatch(seen).option("checkpointLocation", checkpoint)
                .trigger(processingTime="500 milliseconds").start())

    sent = _publish(js, stream, 0, 120)
    q = start()
    try:
        with pytest.raises(Exception, match="fails this batch once"):
            q.awaitTermination(90)  # batch 1 fails in the sink: the query stops with it planned, not done
        assert seen.fail_batch is None
    finally:
        q.stop()
    sent += _publish(js, stream, 120, 60)
    q = start()  # replays batch 1 from the offset log; its messages come back from the consumer
    try:
        assert seen.wait_for(lambda: len(seen.values()) >= len(sent), 90), (len(seen.values()), q.exception())
        values = seen.values()
        assert sorted(values) == sorted(sent)  # nothing lost, nothing written twice
        consumer = js.consumer(stream, pcgroups.compose_static_consumer_name("g", "spark"))
        assert _wait(lambda: consumer.info().num_ack_pending == 0, 30), consumer.info()
        assert seen.wait_for(lambda: len(seen.values()) == len(sent), 5)  # still none twice
    finally:
        q.stop()


@pytest.mark.timeout(300)
def test_available_now_reads_what_the_group_has_and_acks_it(spark: Any, server: NatsServer, js: JetStream,
                                                          tmp_path: Any) -> None:
    stream = "GA" + next_nuid()[:8]
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory")
    pcgroups.create_elastic(js, stream, "g", 3, [pcgroups.PartitioningFilter(filter=f"{stream}.*",
                                                                          partitioning_wildcards=(1,))])
    pcgroups.add_members(js, stream, "g", ["spark"])
    seen = Batches()

    def run() -> None:
        q = (_source(spark, server, stream, consumerGroup="g", groupMember="spark", groupAckWait="2",
                     maxMessagesPerTrigger=30)
             .writeStream.foreachBatch(seen).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None

    sent = _publish(js, stream, 0, 70)
    run()
    assert sorted(seen.values()) == sorted(sent)
    # The last batch is acked too: Spark's last question (anything after it?) says it is done.
    # The acks reach the server a moment after the query ends; nothing pulls afterwards, so
    # an unacked message would stay pending.
    consumer = js.consumer(f"{stream}-g", "spark")
    assert _wait(lambda: consumer.info().num_ack_pending == 0, 10), consumer.info()
    sent += _publish(js, stream, 70, 25)
    run()  # from the checkpoint: only the new messages
    assert sorted(seen.values()) == sorted(sent)


def test_group_options_are_refused_before_anything_is_made(spark: Any, server: NatsServer, js: JetStream) -> None:
    stream = "GO" + next_nuid()[:8]
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory",
                     subject_transform=SubjectTransform(
                         src=f"{stream}.*", dest=f"{{{{Partition(2,1)}}}}.{stream}.{{{{Wildcard(1)}}}}"))
    pcgroups.create_static(js, stream, "g", 2, members=["a", "b"])
    pcgroups.create_elastic(js, stream, "e", 2)
    bad = [
        ({"consumerGroup": "g"}, "groupMember"),
        ({"groupMember": "a"}, "consumerGroup"),
        ({"consumerGroup": "g", "groupMember": "a", "startingOffsets": "earliest"}, "startingOffsets"),
        ({"consumerGroup": "g", "groupMember": "a", "groupKind": "round"}, "groupKind"),
        ({"consumerGroup": "g", "groupMember": "a", "groupAckWait": "-1"}, "groupAckWait"),
        ({"consumerGroup": "g", "groupMember": "zed", "groupKind": "static"}, "groupMember"),
        ({"consumerGroup": "nope", "groupMember": "a"}, "consumerGroup"),
    ]
    for options, named in bad:
        with pytest.raises(Exception, match=named):
            _source(spark, server, stream, **options)
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    with pytest.raises(Exception, match="consumerGroup"):
        (spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
         .option("consumerGroup", "e").option("groupMember", "a").load().count())
    assert list(js.consumer_names(stream)) == []
    assert list(js.consumer_names(f"{stream}-e")) == []


def test_a_server_before_2_11_is_refused_before_any_request() -> None:
    """No real server older than 2.11 is installed: a scripted one announces 2.10 (and records what it is sent)."""
    from natsjs_sync.spark.group_source import check_group
    from natsjs_sync.spark.options import read_options

    from ..fakeserver import FakeServer, ScriptedConn

    received: list[bytes] = []

    def script(conn: ScriptedConn) -> None:
        conn.send(b'INFO {"server_id":"OLD","version":"2.10.26","max_payload":1048576,"headers":true,'
                  b'"proto":1,"jetstream":true}\r\n')
        conn.read_line()  # CONNECT
        assert conn.read_line() == b"PING"
        conn.send(b"PONG\r\n")
        while True:
            line = conn.read_line()
            received.append(line)
            if line == b"PING":
                conn.send(b"PONG\r\n")

    with FakeServer(script) as fake:
        ro = read_options({"servers": fake.url, "stream": "ORDERS", "consumerGroup": "g", "groupMember": "m",
                           "retryTimeout": "0"}, streaming=True)
        with pytest.raises(ValueError, match=r"'consumerGroup' needs nats-server 2\.11 .*2\.10\.26"):
            check_group(ro)
    assert not [line for line in received if b"$JS." in line or b"$KV." in line]


def test_a_batch_spark_finished_before_a_restart_is_acked_not_read_again(server: NatsServer, js: JetStream) -> None:
    """Spark recorded batch N as done, then the query stopped before planning N+1 (so before the source was
    told): the next run learns it from the start offset and acks N's messages when the group gives them again."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from natsjs_sync.spark.group_source import GroupStreamReader
    from natsjs_sync.spark.options import read_options

    stream = "GR" + next_nuid()[:8]
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory",
                     subject_transform=SubjectTransform(
                         src=f"{stream}.*", dest=f"{{{{Partition(2,1)}}}}.{stream}.{{{{Wildcard(1)}}}}"))
    pcgroups.create_static(js, stream, "g", 2, members=["spark"])
    ro = read_options({"servers": server.url, "stream": stream, "consumerGroup": "g", "groupMember": "spark",
                       "groupKind": "static", "groupAckWait": "1"}, streaming=True)
    sent = _publish(js, stream, 0, 30)

    def rows(reader: GroupStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[str]:
        out = []
        for part in reader.partitions(start, end):
            for batch in reader.read(part):
                out += [f"{s}|{d.decode()}" for s, d in zip(batch.column("subject").to_pylist(),
                                                           batch.column("data").to_pylist(), strict=True)]
        return out

    first = GroupStreamReader(ro)
    try:
        start = first.initialOffset()
        end = start
        deadline = time.monotonic() + 30
        while end == start and time.monotonic() < deadline:
            end = first.latestOffset(start, ReadAllAvailable())
            threading.Event().wait(0.2)
        got = rows(first, start, end)
        assert got and all(r.split("|")[0] == f"{stream}.{r.split('|')[1].split(':')[0]}" for r in got)
    finally:
        first.stop()  # Spark wrote batch 1 as done, and stopped before telling the source
    sent += _publish(js, stream, 30, 20)

    second = GroupStreamReader(ro)
    try:
        seen = [r.split("|")[1] for r in got]
        offset = end
        deadline = time.monotonic() + 60
        while len(seen) < len(sent) and time.monotonic() < deadline:
            nxt = second.latestOffset(offset, ReadAllAvailable())  # also: batch `offset` is done
            if nxt != offset:
                seen += [r.split("|")[1] for r in rows(second, offset, nxt)]
                offset = nxt
            else:
                threading.Event().wait(0.2)
        consumer = js.consumer(stream, pcgroups.compose_static_consumer_name("g", "spark"))
        assert sorted(seen) == sorted(sent)  # none of batch 1 read again, nothing lost
        second.latestOffset(offset, ReadAllAvailable())  # the last batch is done
        assert _wait(lambda: consumer.info().num_ack_pending == 0, 30)
    finally:
        second.stop()


def _count(offset: dict[str, Any]) -> int:
    return sum(hi - lo + 1 for runs in (offset.get("partitions") or {}).values() for lo, hi in runs)


def _static_group(js: JetStream, prefix: str, partitions: int = 2) -> str:
    stream = prefix + next_nuid()[:8]
    js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory",
                     subject_transform=SubjectTransform(
                         src=f"{stream}.*", dest=f"{{{{Partition({partitions},1)}}}}.{stream}.{{{{Wildcard(1)}}}}"))
    pcgroups.create_static(js, stream, "g", partitions, members=["spark"])
    return stream


def _group_reader(server: NatsServer, stream: str, **extra: str) -> Any:
    from natsjs_sync.spark.group_source import GroupStreamReader
    from natsjs_sync.spark.options import read_options

    return GroupStreamReader(read_options({"servers": server.url, "stream": stream, "consumerGroup": "g",
                                           "groupMember": "spark", "groupKind": "static", "groupAckWait": "1",
                                           **extra}, streaming=True))


def _next_batch(reader: Any, start: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The next offset the reader gives after ``start`` (polled, bounded); ``start`` when none came in time."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    deadline = time.monotonic() + timeout
    end = reader.latestOffset(start, ReadAllAvailable())
    while end == start and time.monotonic() < deadline:
        threading.Event().wait(0.2)
        end = reader.latestOffset(start, ReadAllAvailable())
    return end


def test_a_deleted_group_fails_the_query_instead_of_it_reading_nothing(server: NatsServer, js: JetStream) -> None:
    """The group's deletion ends the member with no error: the reader says so rather than planning empty
    batches for ever."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    stream = _static_group(js, "GD")
    _publish(js, stream, 0, 10)
    reader = _group_reader(server, stream)
    try:
        start = reader.initialOffset()
        end = _next_batch(reader, start, 30)
        assert _count(end) >= 1
        pcgroups.delete_static(js, stream, "g")
        deadline = time.monotonic() + 20
        with pytest.raises(pcgroups.ConsumerGroupNotFoundError, match=r"'g'.*deleted"):
            while time.monotonic() < deadline:
                reader.latestOffset(end, ReadAllAvailable())
                threading.Event().wait(0.2)
    finally:
        reader.stop()


def test_a_stopped_reader_leaves_no_thread_behind(server: NatsServer, js: JetStream) -> None:
    """The member's follow thread, its consume and the in-progress timer end with ``stop``; the process's
    shared connection (``natsjs-spark-source``, closed by ``close_clients``) stays for the next query."""
    stream = _static_group(js, "GT")
    _publish(js, stream, 0, 5)
    reader = _group_reader(server, stream)
    before = {t.ident for t in threading.enumerate()}
    start = reader.initialOffset()
    _next_batch(reader, start, 30)
    reader.stop()
    left: list[str] = []

    def none_left() -> bool:
        left[:] = [t.name for t in threading.enumerate()
                   if t.ident not in before and t.is_alive() and not t.name.endswith("natsjs-spark-source")
                   and "natsjs-spark-source-" not in t.name]
        return not left

    assert _wait(none_left, 15), left


def test_sequences_of_a_batch_acked_by_an_earlier_run_are_not_held_for_ever(server: NatsServer,
                                                                             js: JetStream) -> None:
    """The first batch a run is told is done may have been acked by the run before (its messages never come
    again): the member forgets those sequences once the consumer's ack floor has passed them."""
    stream = _static_group(js, "GW")
    _publish(js, stream, 0, 20)
    first = _group_reader(server, stream)
    try:
        end = _next_batch(first, first.initialOffset(), 30)
        assert _count(end) >= 1
        first.commit(end)  # Spark is done with it: acked
    finally:
        first.stop()
    consumer = js.consumer(stream, pcgroups.compose_static_consumer_name("g", "spark"))
    assert _wait(lambda: consumer.info().ack_floor.stream_seq >= max(
        hi for runs in end["partitions"].values() for _, hi in runs), 30)
    second = _group_reader(server, stream)
    try:
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        second.latestOffset(end, ReadAllAvailable())  # batch `end` is done: its messages will never come here
        member = second._member
        assert member is not None

        def forgotten() -> bool:
            with member._lock:
                return not member._done_waiting

        assert _wait(forgotten, 15), sorted(member._done_waiting)
    finally:
        second.stop()


def test_a_closed_connection_fails_the_query_naming_it(server: NatsServer, js: JetStream) -> None:
    """The member's connection closed under it (``close_clients``; reconnects run out): the query fails
    saying so, not that the group was deleted, nor by reading nothing for ever."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from natsjs_sync.spark import close_clients

    stream = _static_group(js, "GC")
    _publish(js, stream, 0, 10)
    reader = _group_reader(server, stream)
    try:
        end = _next_batch(reader, reader.initialOffset(), 30)
        assert _count(end) >= 1
        close_clients()
        deadline = time.monotonic() + 20
        with pytest.raises(nats.ConnectionClosedError, match=r"connection of consumer group 'g'.*closed"):
            while time.monotonic() < deadline:
                reader.latestOffset(end, ReadAllAvailable())
                threading.Event().wait(0.2)
    finally:
        reader.stop()
