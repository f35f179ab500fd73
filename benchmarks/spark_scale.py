"""Spark reads at scale, against a 3-node cluster and an R3 stream.

    python benchmarks/spark_scale.py [--rows 200000] [--partitions 8,64,256] [--ids 400000] [--cores 2]

For each partition count, a batch read (``count`` of a ``sum``) and a
streaming read (``Trigger.AvailableNow``, four micro-batches, ``noop`` sink)
of the same rows, two ways in the same run:

* ``direct``: a stream with ``allow_direct``: on 2.11+ servers every range is
  read by batched direct get, answered by any replica;
* ``consumer``: the same rows in a stream without ``allow_direct``: one
  ephemeral consumer per task, created on the stream's leader (what every
  read of more than 1,000 messages a partition did before, and what servers
  before 2.11 still do). ``maxConsumers`` is raised so that it has as many
  partitions as asked for.

Columns: consumers created (counted from the server's advisories), JetStream
API errors (from each node's ``/jsz``), rows/s, and the stream leader's share
of the three servers' CPU time during the read (from ``/proc``; 1/3 is an even
spread).

Then the duplicate window of exactly-once writes: the server memory (the
leader's resident size, ``/varz``) that a message id costs while it is in the
window, from the difference between publishing the same rows with and
without ids, and what that puts on a retry: a retried task is deduplicated
only within the window, and the window holds rate x window ids.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import natsjs_sync
from natsjs_sync.spark.datasource import JetStreamDataSource
from natsjs_sync.testing import NatsCluster, NatsServer


def _monitor(node: NatsServer, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor_port}/{path}", timeout=10) as resp:
        data: dict[str, Any] = json.load(resp)
    return data


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _api_errors(cluster: NatsCluster) -> int:
    return sum(int(_monitor(n, "jsz")["api"]["errors"]) for n in cluster.nodes)


def _leader(cluster: NatsCluster, nc: Any, stream: str) -> NatsServer:
    name = nc.jetstream().stream(stream).info().cluster.leader
    for node in cluster.nodes:
        if _monitor(node, "varz")["server_name"] == name:
            return node
    raise RuntimeError(f"no node named {name!r}")


class Advisories:
    """Counts consumer-created advisories of one stream (a marker consumer closes each count)."""

    def __init__(self, nc: Any, stream: str):
        self.nc, self.stream = nc, stream
        self.sub = nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.{stream}.>")

    def count(self) -> int:
        """Consumers created since the last count."""
        js = self.nc.jetstream()
        marker = js.create_consumer(self.stream, ack_policy="none", inactive_threshold=30.0)
        n = 0
        for _ in range(1_000_000):
            msg = self.sub.next_msg(timeout=30.0)
            if json.loads(msg.data)["consumer"] == marker.name:
                js.delete_consumer(self.stream, marker.name)
                return n
            n += 1
        raise RuntimeError("the marker's advisory never came")


@dataclass
class Measure:
    what: str
    consumers: int
    api_errors: int
    rows_per_s: float
    leader_share: float


def _measure(what: str, cluster: NatsCluster, nc: Any, stream: str, rows: int, run: Callable[[], None]) -> Measure:
    adv = Advisories(nc, stream)
    adv.count()
    leader = _leader(cluster, nc, stream)
    errors = _api_errors(cluster)
    cpu = {n.pid: _cpu_seconds(n.pid) for n in cluster.nodes}
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    used = {pid: _cpu_seconds(pid) - c for pid, c in cpu.items()}
    total = sum(used.values()) or 1e-9
    m = Measure(what, adv.count(), _api_errors(cluster) - errors, rows / elapsed, used[leader.pid] / total)
    adv.sub.unsubscribe()
    return m


def _fill(nc: Any, name: str, rows: int, allow_direct: bool) -> None:
    js = nc.jetstream()
    js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3, allow_direct=allow_direct)
    for i in range(rows):
        js.publish_async(f"{name}.{i % 8}", b"%08d" % i + b"x" * 92)
        if i % 20_000 == 19_999:
            js.publish_async_complete(timeout=120)
    js.publish_async_complete(timeout=120)


def _batch(spark: Any, url: str, stream: str, parts: int, rows: int) -> Callable[[], None]:
    def run() -> None:
        df = (spark.read.format("jetstream").option("servers", url).option("minPartitions", parts)
              .option("maxConsumers", 100_000).option("maxMessagesPerPartition", rows).load(stream))
        got = df.selectExpr("count(*)", "sum(length(data))").first()
        assert got is not None and got[0] == rows, got

    return run


def _streaming(spark: Any, url: str, stream: str, parts: int, rows: int) -> Callable[[], None]:
    def run() -> None:
        with tempfile.TemporaryDirectory() as chk:
            q = (spark.readStream.format("jetstream").option("servers", url).option("minPartitions", parts)
                 .option("maxConsumers", 100_000).option("maxMessagesPerTrigger", max(1, rows // 4)).load(stream)
                 .writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", chk).start())
            q.awaitTermination()
            done = sum(p["numInputRows"] for p in q.recentProgress)
            assert done == rows, done

    return run


def _dedup_memory(ids: int) -> tuple[float, float]:
    """(bytes of leader memory per message id in the duplicate window, rows/s written with ids), one server."""
    with NatsServer() as server, natsjs_sync.connect(server.url) as nc:
        js = nc.jetstream()

        def publish(name: str, with_ids: bool) -> float:
            js.create_stream(name=name, subjects=[f"{name}.>"], duplicate_window=3600.0, storage="file")
            start = time.perf_counter()
            for i in range(ids):
                js.publish_async(f"{name}.x", b"%08d" % i, msg_id=f"write-0123456789.{i}" if with_ids else None)
                if i % 20_000 == 19_999:
                    js.publish_async_complete(timeout=120)
            js.publish_async_complete(timeout=120)
            rate = ids / (time.perf_counter() - start)
            time.sleep(1.0)  # let the server's memory statistics settle (not a synchronisation)
            return rate

        m0 = _monitor(server, "varz")["mem"]
        publish("NOIDS", False)
        m1 = _monitor(server, "varz")["mem"]
        rate = publish("IDS", True)
        m2 = _monitor(server, "varz")["mem"]
        return ((m2 - m1) - (m1 - m0)) / ids, rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--partitions", default="8,64,256")
    ap.add_argument("--ids", type=int, default=400_000,
                    help="message ids for the duplicate-window figure (0: skip it; under 200,000 the server's "
                         "memory steps drown it)")
    ap.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still stops the cluster (finally blocks)
    parts = [int(p) for p in args.partitions.split(",")]
    from pyspark.sql import SparkSession

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results: list[tuple[str, int, Measure, Measure]] = []
    cluster = NatsCluster(size=3)
    cluster.start()
    try:
        url = cluster.url
        nc = natsjs_sync.connect(url)
        version = nc.server_info.get("version", "?") if hasattr(nc, "server_info") else "?"
        _fill(nc, "SCALED", args.rows, allow_direct=True)
        _fill(nc, "SCALEC", args.rows, allow_direct=False)
        spark = (SparkSession.builder.master(f"local[{args.cores}]").appName("natsjs-spark-scale")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(JetStreamDataSource)
        try:
            _batch(spark, url, "SCALED", 2, args.rows)()  # warm up workers and imports
            _batch(spark, url, "SCALEC", 2, args.rows)()
            for p in parts:
                for kind, make in (("batch", _batch), ("streaming", _streaming)):
                    d = _measure("direct", cluster, nc, "SCALED", args.rows, make(spark, url, "SCALED", p, args.rows))
                    c = _measure("consumer", cluster, nc, "SCALEC", args.rows,
                                 make(spark, url, "SCALEC", p, args.rows))
                    results.append((kind, p, d, c))
                    print(f"  {kind} {p}: direct {d}, consumer {c}", file=sys.stderr)
        finally:
            spark.stop()
        nc.close()
    finally:
        cluster.close()
    per_id, rate = _dedup_memory(args.ids) if args.ids else (0.0, 0.0)

    print(f"\nSpark local[{args.cores}], 3-node cluster (nats-server {version}), R3 streams of {args.rows:,} rows "
          "of 100 bytes; direct = allow_direct stream, consumer = one consumer a task")
    header = ("read", "parts", "consumers d/c", "API errors d/c", "rows/s direct", "rows/s consumer", "d/c",
              "leader CPU d", "leader CPU c")
    lines = [header]
    for kind, p, d, c in results:
        lines.append((kind, str(p), f"{d.consumers}/{c.consumers}", f"{d.api_errors}/{c.api_errors}",
                      f"{d.rows_per_s:,.0f}", f"{c.rows_per_s:,.0f}", f"{d.rows_per_s / c.rows_per_s:.2f}x",
                      f"{d.leader_share:.0%}", f"{c.leader_share:.0%}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for j, line in enumerate(lines):
        print("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths,
                                                                                               strict=True))))
        if j == 0:
            print("  ".join("-" * w for w in widths))
    if not args.ids:
        return
    print(f"\nDuplicate window (one server, {args.ids:,} ids of 27 characters): about {per_id:,.0f} bytes of "
          f"server memory per id; written at {rate:,.0f} rows/s, a window of w seconds holds {rate:,.0f} x w ids")
    for window in (120.0, 600.0, 3600.0):
        print(f"  window {window:>6.0f} s at {rate:,.0f} rows/s: {rate * window:,.0f} ids, "
              f"{rate * window * per_id / 2**20:,.0f} MiB; a retry later than {window:.0f} s after the first "
              "attempt is stored again")


if __name__ == "__main__":
    main()
