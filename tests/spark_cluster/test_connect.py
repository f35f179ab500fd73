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

# Each test starts Spark drivers (about 15 s each on an idle 2-core machine, several times that on a
# loaded one) and bounds its own waits; the suite's 120 s per test is too short for them.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


def _batch_and_streaming(spark: Any, js: Any, url: str, src: str, sink: str, checkpoint: Path,
                         rows: int) -> None:
    """A batch write and read of ``src``, then a checkpointed streaming copy of it into ``sink``."""
    for name in (src, sink):
        js.create_stream(name=name, subjects=[f"{name.lower()}.>"], duplicate_window=600.0)
    df = spark.range(0, rows, numPartitions=2).selectExpr(
        f"concat('{src.lower()}.', cast(id % 3 as string)) as subject", "cast(cast(id as string) as binary) as data")
    df.write.format("jetstream").option("servers", url).mode("append").save()
    assert js.stream(src).info().state.messages == rows

    back = spark.read.format("jetstream").option("servers", url).option("minPartitions", 2).load(src)
    stats = back.selectExpr("count(*) as n", "count(distinct seq) as seqs", "count(distinct data) as datas",
                            "min(seq) as lo", "max(seq) as hi").first()
    assert (stats.n, stats.seqs, stats.datas, stats.lo, stats.hi) == (rows, rows, rows, 1, rows)

    q = (spark.readStream.format("jetstream").option("servers", url).option("stream", src)
         .option("maxMessagesPerTrigger", rows // 2).load()  # two micro-batches
         .selectExpr(f"'{sink.lower()}.copy' as subject", "data")
         .writeStream.format("jetstream").option("servers", url)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None
    assert js.stream(sink).info().state.messages == rows
    datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=url), sink, 1))
    assert datas == list(range(rows))


def test_batch_and_streaming_over_spark_connect(spark_connect: SparkConnectServer, server: NatsServer,
                                               tmp_path: Path) -> None:
    """Exact batch write and read, and a streaming copy in two micro-batches, over a remote session that
    leaves Spark to find the source on the server, then over one that registers it from the client.
    (A query going on from its checkpoint is the cluster test's driver restart.)"""
    nc = nats.connect(server.url)
    js: Any = nc.jetstream()
    try:
        found = spark_connect.session()
        _batch_and_streaming(found, js, server.url, "FBATCH", "FSINK", tmp_path / "found", 2000)

        from natsjs_sync.spark.datasource import JetStreamDataSource

        registered = spark_connect.session()
        registered.dataSource.register(JetStreamDataSource)
        _batch_and_streaming(registered, js, server.url, "RBATCH", "RSINK", tmp_path / "registered", 1000)
    finally:
        nc.close()


ROUTE_MODULE = '''
"""Shipped to a Spark Connect session with addArtifacts(pyfile=True)."""


def subject(i):
    return f"art.{i % 4}"
'''


def test_add_artifacts_gives_the_sessions_python_workers_a_pure_python_module(
        spark_connect: SparkConnectServer, server: NatsServer, tmp_path: Path) -> None:
    """A module only the client has: a query using it fails until the client adds it with ``addArtifacts``,
    then its rows reach the stream exactly (the server has natsjs-sync itself: an artifact cannot give it
    the package's compiled dependency, see the next test)."""
    module = tmp_path / "natsjs_shipped_route.py"
    module.write_text(ROUTE_MODULE)
    spark = spark_connect.session()

    def route(batches: Any) -> Any:
        import natsjs_shipped_route
        import pyarrow as pa

        for batch in batches:
            ids = batch.column(0).to_pylist()
            yield pa.RecordBatch.from_pydict({"subject": [natsjs_shipped_route.subject(i) for i in ids],
                                              "data": [str(i).encode() for i in ids]})

    def write() -> None:
        (spark.range(0, 400, numPartitions=2).mapInArrow(route, "subject string, data binary")
         .write.format("jetstream").option("servers", server.url).mode("append").save())

    nc = nats.connect(server.url)
    js: Any = nc.jetstream()
    try:
        js.create_stream(name="ART", subjects=["art.>"], duplicate_window=600.0)
        with pytest.raises(Exception, match="natsjs_shipped_route"):
            write()
        assert js.stream("ART").info().state.messages == 0
        spark.addArtifacts(str(module), pyfile=True)
        write()
        subjects = js.stream("ART").info(subjects_filter=">").state.subjects
        assert dict(subjects or {}) == {f"art.{k}": 100 for k in range(4)}
        datas = sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), "ART", 1))
        assert datas == list(range(400))
    finally:
        nc.close()


def test_a_zip_on_the_python_path_cannot_carry_msgspecs_compiled_module(tmp_path: Path) -> None:
    """What ``--py-files`` and ``addArtifacts(..., pyfile=True)`` ship is put on ``sys.path`` as is: a zip
    of msgspec is found, but its compiled ``_core`` cannot be imported from it (the docs say to install
    the package or ship a packed environment instead)."""
    import subprocess
    import sys
    import zipfile

    import msgspec

    package = Path(msgspec.__file__).parent
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in package.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                z.write(f, f.relative_to(package.parent))
    assert any(n.startswith("msgspec/_core") and not n.endswith(".pyi") for n in zipfile.ZipFile(archive).namelist())
    probe = f"import sys; sys.path.insert(0, {str(archive)!r}); import msgspec"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "_core" in proc.stderr, proc.stderr
