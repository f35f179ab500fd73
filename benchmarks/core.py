"""Core NATS benchmarks: natsjs_sync and nats-py on the same server, same run.

    python benchmarks/core.py [--server URL] [--runs 3] [--quick]

Measures publish-only throughput (16 B and 1 KiB), publish+subscribe
throughput (separate publisher and subscriber connections) and request/reply
latency p50/p99, each library answering its own requests from a second process.
Each figure is the median of ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time

from _common import Row, have_nats_py, paired, print_table

import natsjs_sync
from natsjs_sync.testing import NatsServer

RESPONDER_OURS = """
import sys, threading, natsjs_sync
nc = natsjs_sync.connect(sys.argv[1], name="bench-responder")
nc.subscribe("bench.req", cb=lambda m: m.respond(m.data))
nc.flush()
print("ready", flush=True)
sys.stdin.read()
nc.close()
"""

RESPONDER_NATS_PY = """
import asyncio, sys, nats
async def main():
    nc = await nats.connect(sys.argv[1], name="bench-responder-nats-py")
    async def cb(m):
        await m.respond(m.data)
    await nc.subscribe("bench.req", cb=cb)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await nc.close()
asyncio.run(main())
"""


class Responder:
    """A responder in its own process, so it does not share our GIL."""

    def __init__(self, script: str, url: str):
        self.proc = subprocess.Popen([sys.executable, "-c", script, url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("responder did not start")

    def __enter__(self) -> Responder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.communicate("", timeout=10)


# ---------------------------------------------------------------- natsjs_sync

def ours_publish(url: str, n: int, size: int) -> float:
    payload = b"x" * size
    with natsjs_sync.connect(url) as nc:
        pub = nc.publish
        start = time.perf_counter()
        for _ in range(n):
            pub("bench.pub", payload)
        nc.flush(timeout=60)
        return n / (time.perf_counter() - start)


def ours_pubsub(url: str, n: int, size: int) -> float:
    payload = b"x" * size
    with natsjs_sync.connect(url) as sub_nc, natsjs_sync.connect(url) as pub_nc:
        sub = sub_nc.subscribe("bench.ps", pending_msgs_limit=n + 1)
        sub_nc.flush()
        done = threading.Event()
        elapsed: list[float] = []

        def consume() -> None:
            nxt = sub.next_msg
            for _ in range(n):
                nxt(timeout=30)
            elapsed.append(time.perf_counter())
            done.set()

        t = threading.Thread(target=consume)
        t.start()
        pub = pub_nc.publish
        start = time.perf_counter()
        for _ in range(n):
            pub("bench.ps", payload)
        pub_nc.flush(timeout=60)
        done.wait(60)
        t.join()
        return n / (elapsed[0] - start)


def ours_request(url: str, n: int) -> list[float]:
    with natsjs_sync.connect(url) as nc:
        for _ in range(50):  # warm up
            nc.request("bench.req", b"ping", timeout=5)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            nc.request("bench.req", b"ping", timeout=5)
            lat.append(time.perf_counter() - t0)
        return lat


def ours_request_local(url: str, n: int) -> list[float]:
    """Request latencies with the responder on the same client (a service and its caller in one process)."""
    with natsjs_sync.connect(url) as nc:
        nc.subscribe("bench.local", cb=lambda m: m.respond(m.data))
        nc.flush()
        for _ in range(50):  # warm up
            nc.request("bench.local", b"ping", timeout=5)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            nc.request("bench.local", b"ping", timeout=5)
            lat.append(time.perf_counter() - t0)
        return lat


def ours_request_threads(url: str, n: int, threads: int) -> float:
    """Requests per second of ``threads`` threads sharing one client, ``n`` requests each."""
    with natsjs_sync.connect(url) as nc:
        for _ in range(50):  # warm up
            nc.request("bench.req", b"ping", timeout=5)
        go = threading.Barrier(threads + 1)

        def run() -> None:
            go.wait()
            for _ in range(n):
                nc.request("bench.req", b"ping", timeout=10)

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for t in workers:
            t.start()
        go.wait()
        start = time.perf_counter()
        for t in workers:
            t.join()
        return threads * n / (time.perf_counter() - start)


# ---------------------------------------------------------------- nats-py

def theirs_publish(url: str, n: int, size: int) -> float:
    import nats

    async def run() -> float:
        nc = await nats.connect(url)
        payload = b"x" * size
        start = time.perf_counter()
        for _ in range(n):
            await nc.publish("bench.pub", payload)
        await nc.flush(timeout=60)
        rate = n / (time.perf_counter() - start)
        await nc.close()
        return rate

    return asyncio.run(run())


def theirs_pubsub(url: str, n: int, size: int) -> float:
    import nats

    async def run() -> float:
        sub_nc = await nats.connect(url)
        pub_nc = await nats.connect(url)
        done = asyncio.get_running_loop().create_future()
        count = 0

        async def cb(msg: object) -> None:
            nonlocal count
            count += 1
            if count == n and not done.done():
                done.set_result(time.perf_counter())

        await sub_nc.subscribe("bench.ps", cb=cb, pending_msgs_limit=n + 1, pending_bytes_limit=-1)
        await sub_nc.flush()
        payload = b"x" * size
        start = time.perf_counter()
        for _ in range(n):
            await pub_nc.publish("bench.ps", payload)
        await pub_nc.flush(timeout=60)
        end = await asyncio.wait_for(done, 60)
        await sub_nc.close()
        await pub_nc.close()
        return n / (end - start)

    return asyncio.run(run())


def theirs_request(url: str, n: int, subject: str = "bench.req", local: bool = False) -> list[float]:
    """nats-py's request latencies; with ``local`` its own client answers them."""
    import nats

    async def run() -> list[float]:
        nc = await nats.connect(url)
        if local:
            async def echo(m):  # type: ignore[no-untyped-def]
                await m.respond(m.data)

            await nc.subscribe(subject, cb=echo)
            await nc.flush()
        for _ in range(50):
            await nc.request(subject, b"ping", timeout=5)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request(subject, b"ping", timeout=5)
            lat.append(time.perf_counter() - t0)
        await nc.close()
        return lat

    return asyncio.run(run())


def theirs_request_local(url: str, n: int) -> list[float]:
    """nats-py's request latencies with the responder on the same client."""
    return theirs_request(url, n, "bench.local", local=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--ws-server", help="a ws:// URL of the same server for the WebSocket rows "
                                        "(default: the embedded server's WebSocket listener)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    n_small, n_big, n_ps, n_req = 300_000 // scale, 100_000 // scale, 200_000 // scale, 3_000 // scale
    other = have_nats_py()
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        if args.server:
            url, ws_url = args.server, args.ws_server
        else:
            server = stack.enter_context(NatsServer(jetstream=True, websocket=True))
            url, ws_url = server.url, server.ws_url
        for size, n in ((16, n_small), (1024, n_big)):
            ours, theirs = paired(
                args.runs,
                lambda n=n, size=size: ours_publish(url, n, size),  # type: ignore[misc]
                (lambda n=n, size=size: theirs_publish(url, n, size)) if other else None,  # type: ignore[misc]
            )
            rows.append(Row(f"publish {size} B", "msg/s", ours, theirs, target=1.5))
        ours, theirs = paired(args.runs, lambda: ours_pubsub(url, n_ps, 16),
                              (lambda: theirs_pubsub(url, n_ps, 16)) if other else None)
        rows.append(Row("pub+sub 16 B", "msg/s", ours, theirs, target=1.5))

        # Each library answers its own requests: the figure is the full round trip
        # through that library (requester and responder), as a user sees it.
        with Responder(RESPONDER_OURS, url):
            ours_lat = [x for _ in range(args.runs) for x in ours_request(url, n_req)]
        theirs_lat = None
        if other:
            with Responder(RESPONDER_NATS_PY, url):
                theirs_lat = [x for _ in range(args.runs) for x in theirs_request(url, n_req)]
        rows.append(Row("request p50", "us", pct(ours_lat, 0.5), pct(theirs_lat, 0.5) if theirs_lat else None,
                        higher_is_better=False, target=0.8))
        rows.append(Row("request p99", "us", pct(ours_lat, 0.99), pct(theirs_lat, 0.99) if theirs_lat else None,
                        higher_is_better=False))
        if ws_url:
            # The same client over WebSocket framing; the ratio column is to TCP, same run.
            ws, tcp = paired(args.runs, lambda: ours_publish(ws_url, n_big, 16), lambda: ours_publish(url, n_big, 16))
            rows.append(Row("publish 16 B, WebSocket (ratio: to TCP)", "msg/s", ws, tcp))
            ws, tcp = paired(args.runs, lambda: ours_pubsub(ws_url, n_ps // 2, 16),
                             lambda: ours_pubsub(url, n_ps // 2, 16))
            rows.append(Row("pub+sub 16 B, WebSocket (ratio: to TCP)", "msg/s", ws, tcp))
    print_table(f"Core NATS (median of {args.runs} runs; nats-py {'measured' if other else 'not installed'})", rows)


if __name__ == "__main__":
    main()
