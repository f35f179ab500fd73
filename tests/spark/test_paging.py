"""Every Spark read that pages (batch, streaming, the consumer-group source) on a server whose small
``max_pending`` cuts pages at test scale: the rows are exactly the stored ones, each once.

The server ends a batched direct get at ``max_bytes`` (its ``max_pending`` when the request gives none)
with messages still pending; a read goes on after the last message it received. A read that started
its next page at "first plus the count asked for" returned 98 of 4,030 rows with a subject filter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import JetStream, SubjectTransform
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

pytestmark = pytest.mark.slow

# On small_pending_server pages hold at most 64 KiB (the reader asks for max_payload): about sixty rows.
ROWS = 4_030
KEYS = [f"k{i}" for i in range(12)]


@pytest.fixture
def js(small_pending_server: NatsServer) -> Iterator[JetStream]:
    with nats.connect(small_pending_server.url, name="spark-paging-test") as nc:
        yield nc.jetstream()


@pytest.fixture(autouse=True)
def registered(spark: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


def _body(i: int) -> bytes:
    return f"{i:08d}".encode() * 125  # 1,000 bytes


def _fill(js: JetStream, subject: Any) -> dict[int, str]:
    """``ROWS`` messages, row ``i`` on ``subject(i)``; returns seq -> subject."""
    for i in range(ROWS):
        js.publish_async(subject(i), _body(i))
    js.publish_async_complete(timeout=60)
    return {i + 1: subject(i) for i in range(ROWS)}


def _two_subjects(js: JetStream, prefix: str, allow_direct: bool) -> tuple[str, dict[int, str], list[int]]:
    """A stream with three rows of four on ``<name>.a``, the rest on ``<name>.b``: its name, what it
    stores (seq -> subject) and the sequences on ``<name>.a``."""
    name = prefix + next_nuid()[-8:]
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_direct=allow_direct)
    stored = _fill(js, lambda i: f"{name}.{'a' if i % 4 else 'b'}")
    return name, stored, [s for s, subj in stored.items() if subj == f"{name}.a"]


class _Sink:
    """A foreachBatch sink keeping one column expression of every row it is given."""

    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.lock = threading.Lock()
        self.values: list[Any] = []

    def __call__(self, df: Any, _batch: int) -> None:
        got = [r.v for r in df.selectExpr(f"{self.expr} as v").collect()]
        with self.lock:
            self.values.extend(got)


def _seqs(df: Any) -> list[int]:
    return sorted(r.seq for r in df.select("seq").collect())


def test_workers_import_this_checkout(spark: Any) -> None:
    """The Spark tests run the code under test on the executors too."""
    import natsjs_sync

    files = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("natsjs_sync").__file__).collect()
    assert files == [natsjs_sync.__file__]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
def test_a_batch_read_with_subjects_gives_every_row_when_the_server_cuts_pages(
        spark: Any, small_pending_server: NatsServer, js: JetStream, allow_direct: bool) -> None:
    name, stored, want = _two_subjects(js, "PB", allow_direct)
    df = (spark.read.format("jetstream").option("servers", small_pending_server.url).option("stream", name)
          .option("subjects", f"{name}.a").option("retryTimeout", "5").load())
    assert _seqs(df) == want
    both = (spark.read.format("jetstream").option("servers", small_pending_server.url).option("stream", name)
            .option("subjects", f"{name}.a,{name}.b").option("minPartitions", "3").option("retryTimeout", "5").load())
    rows = both.selectExpr("seq", "cast(data as string) as data").collect()
    assert sorted(r.seq for r in rows) == sorted(stored)
    assert all(r.data.encode() == _body(r.seq - 1) for r in rows)
    assert "Slow Consumer" not in small_pending_server.read_log()


@pytest.mark.timeout(300)
def test_a_streaming_read_with_subjects_gives_every_row_when_the_server_cuts_pages(
        spark: Any, small_pending_server: NatsServer, js: JetStream, tmp_path: Path) -> None:
    name, _, want = _two_subjects(js, "PS", True)  # one micro-batch, one task: a range of many pages
    seen = _Sink("seq")
    q = (spark.readStream.format("jetstream").option("servers", small_pending_server.url).option("stream", name)
         .option("subjects", f"{name}.a").option("retryTimeout", "5").load()
         .writeStream.foreachBatch(seen).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240)
    assert q.exception() is None
    assert sorted(seen.values) == want


def _group_query(spark: Any, server: NatsServer, stream: str, kind: str, tmp_path: Path) -> list[str]:
    """What a group member's query reads with ``Trigger.AvailableNow``: each row's key:index."""
    got = _Sink("substring(cast(data as string), 1, 8)")
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("stream", stream)
         .option("consumerGroup", "g").option("groupMember", "spark").option("groupKind", kind)
         .option("groupAckWait", "30").option("retryTimeout", "5").load()
         .writeStream.foreachBatch(got).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    return got.values


@pytest.mark.timeout(300)
@pytest.mark.server("2.11")
@pytest.mark.parametrize("kind", ["static", "elastic"])
def test_a_group_source_reads_every_message_when_the_server_cuts_pages(
        spark: Any, small_pending_server: NatsServer, js: JetStream, tmp_path: Path, kind: str) -> None:
    stream = "PG" + next_nuid()[-8:]
    if kind == "static":
        js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory", allow_direct=True,
                         subject_transform=SubjectTransform(
                             src=f"{stream}.*", dest=f"{{{{Partition(3,1)}}}}.{stream}.{{{{Wildcard(1)}}}}"))
        pcgroups.create_static(js, stream, "g", 3, members=["spark"])
    else:
        js.create_stream(name=stream, subjects=[f"{stream}.*"], storage="memory")
        pcgroups.create_elastic(js, stream, "g", 3, [pcgroups.PartitioningFilter(filter=f"{stream}.*",
                                                                              partitioning_wildcards=(1,))])
        pcgroups.add_members(js, stream, "g", ["spark"])
    _fill(js, lambda i: f"{stream}.{KEYS[i % len(KEYS)]}")
    got = _group_query(spark, small_pending_server, stream, kind, tmp_path)
    assert sorted(got) == [f"{i:08d}" for i in range(ROWS)]  # every message once
    if kind == "elastic":  # all acked, none dropped: the work queue is empty because each was read
        assert js.stream(f"{stream}-g").info().state.messages == 0
