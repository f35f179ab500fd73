"""Scale: one client shared by many threads, many subscriptions, watchers,
consumers and a big object, as cost curves (several points, not one).

    python benchmarks/scale.py [--server URL] [--quick] [--only threads,subs,watchers,consumers,object]
                               [--threads 1,8,64,256] [--subs 100,1000,10000] [--watchers 10,100,1000]
                               [--consumers 10,100,1000] [--object-mib 64,256]

* threads: one client shared by T threads, publishing (a fixed total of
  16-byte messages split between them, then a flush) and requesting (a fixed
  total of requests, each thread one at a time); nats-py with as many asyncio
  tasks on one connection beside it. The responder is the nats.go peer when
  go is present (so it is never the bottleneck), else a natsjs_sync process;
  both clients ask the same one.
* subs: N subscriptions with callbacks on one client, one message published to
  each; threads of the process and RSS growth once all were delivered.
* watchers: N KV watchers (each on its own key) on one client; every watcher
  reads its initial value, the end marker and one update; threads and RSS.
* consumers: N pull consumers on one stream, each running ``consume(handler)``
  on one client; M messages each; threads and RSS.
* object: put then get (streamed) of an object of each size; peak RSS growth.

Each subs/watchers/consumers/object point runs in a fresh process so its RSS
is its own; "threads" is ``threading.active_count()`` in that process (1 is
the main thread), "RSS +" the growth of resident memory from just after
connecting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from _common import have_nats_py, server_url
from _peers import GoPeer
from core import RESPONDER_OURS

import natsjs_sync

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mib(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


# ---------------------------------------------------------------- threads sharing one client

def ours_threads_publish(url: str, threads: int, total: int) -> float:
    per = total // threads
    payload = b"x" * 16
    with natsjs_sync.connect(url) as nc:
        go = threading.Barrier(threads + 1)

        def work() -> None:
            pub = nc.publish
            go.wait()
            for _ in range(per):
                pub("bench.scale", payload)

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        go.wait()
        start = time.perf_counter()
        for t in ts:
            t.join()
        nc.flush(timeout=60)
        return per * threads / (time.perf_counter() - start)


def ours_threads_request(url: str, threads: int, total: int) -> float:
    per = max(1, total // threads)
    with natsjs_sync.connect(url) as nc:
        nc.request("bench.req", b"warm", timeout=5)
        go = threading.Barrier(threads + 1)
        errors: list[BaseException] = []

        def work() -> None:
            req = nc.request
            go.wait()
            try:
                for _ in range(per):
                    req("bench.req", b"ping", timeout=30)
            except BaseException as exc:  # reported below
                errors.append(exc)

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        go.wait()
        start = time.perf_counter()
        for t in ts:
            t.join()
        if errors:
            raise errors[0]
        return per * threads / (time.perf_counter() - start)


def theirs_tasks_publish(url: str, tasks: int, total: int) -> float:
    import nats

    async def go() -> float:
        nc = await nats.connect(url)
        per, payload = total // tasks, b"x" * 16

        async def work() -> None:
            for _ in range(per):
                await nc.publish("bench.scale", payload)

        start = time.perf_counter()
        await asyncio.gather(*(work() for _ in range(tasks)))
        await nc.flush(timeout=60)
        rate = per * tasks / (time.perf_counter() - start)
        await nc.close()
        return rate

    return asyncio.run(go())


def theirs_tasks_request(url: str, tasks: int, total: int) -> float:
    import nats

    async def go() -> float:
        nc = await nats.connect(url)
        await nc.request("bench.req", b"warm", timeout=5)
        per = max(1, total // tasks)

        async def work() -> None:
            for _ in range(per):
                await nc.request("bench.req", b"ping", timeout=30)

        start = time.perf_counter()
        await asyncio.gather(*(work() for _ in range(tasks)))
        rate = per * tasks / (time.perf_counter() - start)
        await nc.close()
        return rate

    return asyncio.run(go())


def bench_threads(url: str, counts: list[int], n_pub: int, n_req: int, runs: int) -> None:
    other = have_nats_py()
    go = GoPeer()
    if go.prepare():
        responder, who = go.responder(url), "nats.go"
    else:
        print(go.note, file=sys.stderr)
        responder = subprocess.Popen([sys.executable, "-c", RESPONDER_OURS, url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert responder.stdout is not None
        responder.stdout.readline()
        who = "natsjs_sync"
    print(f"\nOne client shared by T threads (nats-py: T tasks on one connection); {n_pub:,} publishes and "
          f"{n_req:,} requests a run, median of {runs}; responder: {who}")
    print(f"{'T':>5}  {'publish msg/s':>14}  {'nats-py':>10}  {'ratio':>6}  {'request/s':>10}  {'nats-py':>10}  "
          f"{'ratio':>6}")
    try:
        for t in counts:
            pub = sorted(ours_threads_publish(url, t, n_pub) for _ in range(runs))[runs // 2]
            req = sorted(ours_threads_request(url, t, n_req) for _ in range(runs))[runs // 2]
            tpub = sorted(theirs_tasks_publish(url, t, n_pub) for _ in range(runs))[runs // 2] if other else None
            treq = sorted(theirs_tasks_request(url, t, n_req) for _ in range(runs))[runs // 2] if other else None
            print(f"{t:>5}  {pub:>14,.0f}  {tpub or 0:>10,.0f}  {pub / (tpub or pub):>5.2f}x  {req:>10,.0f}  "
                  f"{treq or 0:>10,.0f}  {req / (treq or req):>5.2f}x", flush=True)
    finally:
        responder.communicate("", timeout=10)


# ---------------------------------------------------------------- children: one point each, a fresh process

def child_subs(url: str, n: int) -> dict[str, Any]:
    nc = natsjs_sync.connect(url)
    nc.flush()
    base = rss_mib()
    got = threading.Semaphore(0)
    start = time.perf_counter()
    for i in range(n):
        nc.subscribe(f"scale.sub.{i}", cb=lambda _m: got.release())
    nc.flush(timeout=120)
    sub_s = time.perf_counter() - start
    for i in range(n):
        nc.publish(f"scale.sub.{i}", b"x")
    nc.flush(timeout=120)
    deadline = time.monotonic() + 120
    for _ in range(n):
        if not got.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError("not every callback ran")
    out = {"threads": threading.active_count(), "rss": rss_mib() - base, "setup_s": sub_s,
           "total_s": time.perf_counter() - start}
    nc.close()
    return out


def child_watchers(url: str, n: int) -> dict[str, Any]:
    nc = natsjs_sync.connect(url)
    js = nc.jetstream()
    kv = js.create_key_value(bucket="SCALEKV", history=1)
    for i in range(n):
        kv.put(f"k{i}", b"v0")
    base = rss_mib()
    start = time.perf_counter()
    watchers = [kv.watch(f"k{i}") for i in range(n)]
    for w in watchers:
        assert w.next(timeout=60) is not None  # the current value
        assert w.next(timeout=60) is None  # end of the initial values
    setup_s = time.perf_counter() - start
    for i in range(n):
        kv.put(f"k{i}", b"v1")
    for w in watchers:
        e = w.next(timeout=60)
        assert e is not None and e.value == b"v1"
    out = {"threads": threading.active_count(), "rss": rss_mib() - base, "setup_s": setup_s,
           "total_s": time.perf_counter() - start}
    for w in watchers:
        w.stop()
    js.delete_key_value("SCALEKV")
    nc.close()
    return out


def child_consumers(url: str, n: int, msgs: int = 10) -> dict[str, Any]:
    nc = natsjs_sync.connect(url)
    js = nc.jetstream()
    js.create_stream(name="SCALECONS", subjects=["scale.cons"], storage="memory")
    for _ in range(msgs):
        js.publish_async("scale.cons", b"x" * 16)
    js.publish_async_complete(timeout=60)
    base = rss_mib()
    got = threading.Semaphore(0)

    def handler(m: Any) -> None:
        m.ack()
        got.release()

    start = time.perf_counter()
    ctxs = []
    for i in range(n):
        cons = js.create_consumer("SCALECONS", durable_name=f"c{i}", ack_policy="explicit")
        ctxs.append(cons.consume(handler, max_messages=100))
    setup_s = time.perf_counter() - start
    deadline = time.monotonic() + 300
    for _ in range(n * msgs):
        if not got.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError("not every message reached its handler")
    out = {"threads": threading.active_count(), "rss": rss_mib() - base, "setup_s": setup_s,
           "total_s": time.perf_counter() - start}
    for c in ctxs:
        c.stop()
    js.delete_stream("SCALECONS")
    nc.close()
    return out


def child(kind: str, url: str, n: int) -> dict[str, Any]:
    fn = {"subs": child_subs, "watchers": child_watchers, "consumers": child_consumers}[kind]
    return fn(url, n)


def run_child(kind: str, url: str, n: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, "--server", url, str(n)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} {n} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_curve(url: str, kind: str, title: str, counts: list[int]) -> None:
    print(f"\n{title}")
    print(f"{'N':>7}  {'threads':>7}  {'RSS + MiB':>9}  {'KiB each':>8}  {'setup s':>8}  {'total s':>8}")
    for n in counts:
        r = run_child(kind, url, n)
        print(f"{n:>7,}  {r['threads']:>7}  {r['rss']:>9.1f}  {r['rss'] * 1024 / n:>8.1f}  {r['setup_s']:>8.2f}  "
              f"{r['total_s']:>8.2f}", flush=True)


def bench_object(url: str, sizes: list[int]) -> None:
    from kv_object import memory

    print("\nObject put then streamed get (peak RSS of a fresh process; target: growth < 64 MiB)")
    print(f"{'MiB':>6}  {'before':>7}  {'put +':>6}  {'get +':>6}  {'seconds':>8}")
    for mib in sizes:
        start = time.perf_counter()
        before, after_put, after_get = memory(url, mib)
        print(f"{mib:>6,}  {before:>7.0f}  {after_put - before:>6.0f}  {after_get - before:>6.0f}  "
              f"{time.perf_counter() - start:>8.1f}", flush=True)


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=ints, default=[1, 8, 64, 256])
    ap.add_argument("--subs", type=ints, default=None)
    ap.add_argument("--watchers", type=ints, default=None)
    ap.add_argument("--consumers", type=ints, default=None)
    ap.add_argument("--object-mib", type=ints, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("n", nargs="?", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.server, args.n)))
        return
    only = set(filter(None, args.only.split(",")))
    q = args.quick
    with server_url(args.server) as url:
        if not only or "threads" in only:
            bench_threads(url, args.threads, 20_000 if q else 200_000, 1_000 if q else 10_000, 1 if q else args.runs)
        if not only or "subs" in only:
            bench_curve(url, "subs", "Callback subscriptions on one client",
                        args.subs or ([100, 1000] if q else [100, 1000, 10_000]))
        if not only or "watchers" in only:
            bench_curve(url, "watchers", "KV watchers on one client (each reads its value, the marker, an update)",
                        args.watchers or ([10, 100] if q else [10, 100, 1000]))
        if not only or "consumers" in only:
            bench_curve(url, "consumers", "Pull consumers running consume() on one client (10 messages each)",
                        args.consumers or ([10, 100] if q else [10, 100, 1000]))
        if not only or "object" in only:
            bench_object(url, args.object_mib or ([16, 64] if q else [64, 256]))


if __name__ == "__main__":
    main()
