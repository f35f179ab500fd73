"""Key-value and object store benchmarks, with nats-py side by side, and memory.

    python benchmarks/kv_object.py [--server URL] [--runs 3] [--quick] [--memory-mib 512]

* KV put and get, sequential blocking operations (ops/s);
* object store put and get of a 64 MiB object (MB/s);
* memory: the growth of this process's peak RSS while putting and getting a
  512 MiB object (streamed from a generated source to a hashing sink), measured
  in a fresh subprocess so nothing else is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable

from _common import Row, have_nats_py, paired, print_table, server_url

import natsjs_sync

_serial = [0]


def _name(prefix: str) -> str:
    _serial[0] += 1
    return f"{prefix}{_serial[0]}"


# ---------------------------------------------------------------- natsjs_sync

def ours_kv(url: str, n: int, op: str) -> Callable[[], float]:
    def run() -> float:
        with natsjs_sync.connect(url) as nc:
            js = nc.jetstream()
            bucket = _name("kvours")
            kv = js.create_key_value(bucket=bucket)
            try:
                for i in range(100):
                    kv.put(f"k{i}", b"v" * 100)
                start = time.perf_counter()
                if op == "put":
                    for i in range(n):
                        kv.put(f"k{i % 100}", b"v" * 100)
                else:
                    for i in range(n):
                        kv.get(f"k{i % 100}")
                return n / (time.perf_counter() - start)
            finally:
                js.delete_key_value(bucket)

    return run


def ours_object(url: str, data: bytes, op: str) -> Callable[[], float]:
    def run() -> float:
        with natsjs_sync.connect(url) as nc:
            js = nc.jetstream()
            bucket = _name("obours")
            obs = js.create_object_store(bucket=bucket)
            try:
                start = time.perf_counter()
                obs.put("obj", data)
                if op == "get":
                    start = time.perf_counter()
                    got = obs.get_bytes("obj")
                    assert len(got) == len(data)
                return len(data) / 1e6 / (time.perf_counter() - start)
            finally:
                js.delete_object_store(bucket)

    return run


# ---------------------------------------------------------------- nats-py

def theirs_kv(url: str, n: int, op: str) -> Callable[[], float]:
    import nats

    def run() -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream()
            bucket = _name("kvpy")
            kv = await js.create_key_value(bucket=bucket)
            for i in range(100):
                await kv.put(f"k{i}", b"v" * 100)
            start = time.perf_counter()
            if op == "put":
                for i in range(n):
                    await kv.put(f"k{i % 100}", b"v" * 100)
            else:
                for i in range(n):
                    await kv.get(f"k{i % 100}")
            rate = n / (time.perf_counter() - start)
            await js.delete_key_value(bucket)
            await nc.close()
            return rate

        return asyncio.run(go())

    return run


def theirs_object(url: str, data: bytes, op: str) -> Callable[[], float]:
    import nats

    def run() -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream()
            bucket = _name("obpy")
            obs = await js.create_object_store(bucket)
            start = time.perf_counter()
            await obs.put("obj", data)
            if op == "get":
                start = time.perf_counter()
                res = await obs.get("obj")
                assert len(res.data) == len(data)
            rate = len(data) / 1e6 / (time.perf_counter() - start)
            await js.delete_object_store(bucket)
            await nc.close()
            return rate

        return asyncio.run(go())

    return run


# ---------------------------------------------------------------- memory

MEMORY_SCRIPT = r"""
import hashlib, resource, sys, natsjs_sync

def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

class Generated:
    # A file-like source of `size` bytes that never exists in memory at once.
    def __init__(self, size):
        self.left = size
        self.block = hashlib.sha256(b"seed").digest() * 4096  # 128 KiB
    def read(self, n):
        n = min(n, self.left)
        self.left -= n
        out = self.block * (n // len(self.block) + 1)
        return out[:n]

url, mib = sys.argv[1], int(sys.argv[2])
nc = natsjs_sync.connect(url)
js = nc.jetstream()
obs = js.create_object_store(bucket="memtest", storage="file")
before = rss_mib()
obs.put("big", Generated(mib * 1024 * 1024))
after_put = rss_mib()
sha = hashlib.sha256()
with obs.get("big") as result:
    for chunk in result.chunks():
        sha.update(chunk)
after_get = rss_mib()
js.delete_object_store("memtest")
nc.close()
print(f"{before:.1f} {after_put:.1f} {after_get:.1f}")
"""


def memory(url: str, mib: int) -> tuple[float, float, float]:
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, url, str(mib)], capture_output=True, text=True,
                         timeout=1800, check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before, after_put, after_get = (float(x) for x in out.stdout.split())
    return before, after_put, after_get


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--memory-mib", type=int, default=512)
    args = ap.parse_args()
    n_kv = 500 if args.quick else 3000
    data = os.urandom((8 if args.quick else 64) * 1024 * 1024)
    other = have_nats_py()
    rows: list[Row] = []
    with server_url(args.server) as url:
        for op in ("put", "get"):
            a, b = paired(args.runs, ours_kv(url, n_kv, op), theirs_kv(url, n_kv, op) if other else None)
            rows.append(Row(f"KV {op} (sequential)", "ops/s", a, b, target=1.5))
            print(f"  KV {op}: {a:,.0f} vs {b}", flush=True)
        for op in ("put", "get"):
            a, b = paired(args.runs, ours_object(url, data, op), theirs_object(url, data, op) if other else None)
            rows.append(Row(f"object {op} {len(data) >> 20} MiB", "MB/s", a, b, target=1.0))
            print(f"  object {op}: {a:,.1f} vs {b}", flush=True)
        print_table(f"Key-value and object store (median of {args.runs} runs; "
                    f"nats-py {'measured' if other else 'not installed'})", rows)
        mib = 64 if args.quick else args.memory_mib
        before, after_put, after_get = memory(url, mib)
        print(f"\nMemory, {mib} MiB object put then get (peak RSS of a fresh process): "
              f"{before:.0f} MiB before, {after_put:.0f} after put (+{after_put - before:.0f}), "
              f"{after_get:.0f} after get (+{after_get - before:.0f}); target: growth < 64 MiB")


if __name__ == "__main__":
    main()
