"""natsjs_sync beside nats-py, nats.js and nats.go: one table, same server, same run.

    python benchmarks/compare.py [--server URL] [--runs 3] [--quick] [--only ROW,...]

Rows: core publish 16 B, publish+subscribe 16 B (separate connections),
request/reply p50 and p99 (each client answers its own requests from a second
process), the same with the responder a subscription on the requesting
connection (``reqlocal``: a service and its caller in one process), JetStream
pipelined publish (4,000 in flight, 128 B), pull consume with explicit acks
and with ack policy none (a durable consumer over a pre-filled memory stream),
ordered consumer, KV get (sequential).

The clients take turns within each run (natsjs_sync, nats-py, nats.js,
nats.go, then again), so the machine's drift lands on all of them; every
figure is the median of ``--runs`` runs. The Go and JavaScript peers are our
own small programs in benchmarks/peers/; each is skipped with a note when its
toolchain is missing (see benchmarks/_peers.py). Ratios are natsjs_sync
divided by the other client (for latencies, lower is better).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _common import have_nats_py, server_url
from _peers import Peer, available_peers
from core import (
    RESPONDER_NATS_PY,
    RESPONDER_OURS,
    ours_publish,
    ours_pubsub,
    ours_request,
    ours_request_local,
    pct,
    theirs_publish,
    theirs_pubsub,
    theirs_request,
    theirs_request_local,
)
from jetstream import (
    _drop_stream,
    _fresh_stream,
    ours_consume,
    ours_ordered,
    ours_pipelined,
    theirs_consume,
    theirs_ordered,
    theirs_pipelined,
)

import natsjs_sync

OURS, NATS_PY = "natsjs_sync", "nats-py"


def _kv_bucket(url: str) -> str:
    with natsjs_sync.connect(url) as nc:
        kv = nc.jetstream().create_key_value(bucket="BENCHKV")
        for i in range(100):
            kv.put(f"k{i}", b"v" * 100)
    return "BENCHKV"


def ours_kvget(url: str, bucket: str, n: int) -> float:
    with natsjs_sync.connect(url) as nc:
        kv = nc.jetstream().key_value(bucket)
        get = kv.get
        start = time.perf_counter()
        for i in range(n):
            get(f"k{i % 100}")
        return n / (time.perf_counter() - start)


def theirs_kvget(url: str, bucket: str, n: int) -> float:
    import nats

    async def go() -> float:
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value(bucket)
        start = time.perf_counter()
        for i in range(n):
            await kv.get(f"k{i % 100}")
        rate = n / (time.perf_counter() - start)
        await nc.close()
        return rate

    return asyncio.run(go())


class Table:
    def __init__(self, clients: list[str]):
        self.clients = clients
        self.rows: list[tuple[str, str, bool, dict[str, float]]] = []

    def add(self, name: str, unit: str, values: dict[str, float], higher_is_better: bool = True) -> None:
        self.rows.append((name, unit, higher_is_better, values))
        shown = ", ".join(f"{c} {_fmt(v, unit)}" for c, v in values.items())
        print(f"  {name}: {shown}", file=sys.stderr, flush=True)

    def print(self, title: str) -> None:
        others = [c for c in ("nats.go", NATS_PY, "nats.js") if c in self.clients]
        header = ["scenario", "unit", *self.clients, *(f"vs {c}" for c in others)]
        lines = [header]
        for name, unit, _hib, values in self.rows:
            cells = [name, unit, *(_fmt(values.get(c), unit) for c in self.clients)]
            for c in others:
                mine, theirs = values.get(OURS), values.get(c)
                cells.append(f"{mine / theirs:.2f}x" if mine and theirs else "-")
            lines.append(cells)
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        print(f"\n{title}")
        for j, line in enumerate(lines):
            cells = enumerate(zip(line, widths, strict=True))
            print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in cells))
            if j == 0:
                print("  ".join("-" * w for w in widths))


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}"


def turns(runs: int, fns: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Each client in turn, ``runs`` times; the median of each."""
    got: dict[str, list[float]] = {c: [] for c in fns}
    for _ in range(runs):
        for c, fn in fns.items():
            got[c].append(fn())
    return {c: statistics.median(v) for c, v in got.items()}


def with_stream(url: str, fill: int, fn: Callable[[str, str], float]) -> Callable[[], float]:
    def run() -> float:
        name, subject = _fresh_stream(url, fill)
        try:
            return fn(name, subject)
        finally:
            _drop_stream(url, name)

    return run


def _python_responder(script: str, url: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", script, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("responder did not start")
    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a tenth of the messages (a smoke run)")
    ap.add_argument("--only", default="",
                    help="comma-separated row keys: pub,pubsub,req,reqlocal,jspub,ack,noack,ordered,kv")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))

    def want(key: str) -> bool:
        return not only or key in only

    k = 10 if args.quick else 1
    n_pub, n_ps, n_req, n_js, n_kv = 200_000 // k, 100_000 // k, 2_000 // k, 50_000 // k, 2_000 // k

    peers: list[Peer] = available_peers()
    other = have_nats_py()
    if not other:
        print("nats-py skipped: not installed", file=sys.stderr)
    clients = [OURS, *([NATS_PY] if other else []), *(p.name for p in reversed(peers))]
    table = Table(clients)

    with server_url(args.server) as url:
        def row(name: str, ours: Callable[[], float], nats_py: Callable[[], float],
                peer: Callable[[Peer], Callable[[], float]], unit: str = "msg/s") -> None:
            fns = {OURS: ours, **({NATS_PY: nats_py} if other else {}), **{p.name: peer(p) for p in peers}}
            table.add(name, unit, turns(args.runs, fns))

        if want("pub"):
            row("core publish 16 B", lambda: ours_publish(url, n_pub, 16), lambda: theirs_publish(url, n_pub, 16),
                lambda p: lambda: p.rate("pub", url, n_pub, 16))
        if want("pubsub"):
            row("publish+subscribe 16 B", lambda: ours_pubsub(url, n_ps, 16), lambda: theirs_pubsub(url, n_ps, 16),
                lambda p: lambda: p.rate("pubsub", url, n_ps, 16))
        if want("req"):
            lat: dict[str, list[float]] = {c: [] for c in clients}
            for _ in range(args.runs):
                proc = _python_responder(RESPONDER_OURS, url)
                lat[OURS] += ours_request(url, n_req)
                proc.communicate("", timeout=10)
                if other:
                    proc = _python_responder(RESPONDER_NATS_PY, url)
                    lat[NATS_PY] += theirs_request(url, n_req)
                    proc.communicate("", timeout=10)
                for p in peers:
                    proc = p.responder(url)
                    lat[p.name] += p.run("request", url, n_req)["lat"]
                    proc.communicate("", timeout=10)
            table.add("request p50 (lower is better)", "us", {c: pct(v, 0.5) for c, v in lat.items()}, False)
            table.add("request p99 (lower is better)", "us", {c: pct(v, 0.99) for c, v in lat.items()}, False)
        if want("reqlocal"):
            lat = {c: [] for c in clients}
            for _ in range(args.runs):
                lat[OURS] += ours_request_local(url, n_req)
                if other:
                    lat[NATS_PY] += theirs_request_local(url, n_req)
                for p in peers:
                    lat[p.name] += p.run("requestlocal", url, n_req)["lat"]
            table.add("request, responder in-process, p50", "us", {c: pct(v, 0.5) for c, v in lat.items()}, False)
            table.add("request, responder in-process, p99", "us", {c: pct(v, 0.99) for c, v in lat.items()}, False)
        if want("jspub"):
            row("JetStream pipelined publish", with_stream(url, 0, ours_pipelined(url, n_js)),
                with_stream(url, 0, theirs_pipelined(url, n_js)) if other else None,  # type: ignore[arg-type]
                lambda p: with_stream(url, 0, lambda _s, subj: p.rate("jspub", url, subj, n_js)))
        for key, name, ack in (("ack", "pull consume, explicit acks", True), ("noack", "pull consume, no acks", False)):
            if want(key):
                row(name, with_stream(url, n_js, ours_consume(url, n_js, ack)),
                    with_stream(url, n_js, theirs_consume(url, n_js, ack)) if other else None,  # type: ignore[arg-type]
                    lambda p, ack=ack: with_stream(  # type: ignore[misc]
                        url, n_js, lambda s, subj: p.rate("consume", url, s, subj, n_js, int(ack))))
        if want("ordered"):
            row("ordered consumer", with_stream(url, n_js, ours_ordered(url, n_js)),
                with_stream(url, n_js, theirs_ordered(url, n_js)) if other else None,  # type: ignore[arg-type]
                lambda p: with_stream(url, n_js, lambda s, subj: p.rate("ordered", url, s, subj, n_js)))
        if want("kv"):
            bucket = _kv_bucket(url)
            row("KV get (sequential)", lambda: ours_kvget(url, bucket, n_kv),
                lambda: theirs_kvget(url, bucket, n_kv),
                lambda p: lambda: p.rate("kvget", url, bucket, n_kv), unit="ops/s")
    table.print(f"natsjs_sync and its peers, 2-core machine, median of {args.runs} runs "
                f"({n_pub:,} publishes, {n_js:,} JetStream messages, {n_req:,} requests a run)")


if __name__ == "__main__":
    main()
