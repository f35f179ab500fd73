"""JetStream benchmarks: natsjs_sync and nats-py on the same server, same run.

    python benchmarks/jetstream.py [--server URL] [--runs 5] [--quick]

* sync publish: one publish, wait for its PubAck, the next;
* pipelined publish: up to 4,000 publishes in flight, then wait for every ack;
* pull consume with explicit acks, and with ack policy none: a durable pull
  consumer over a pre-filled stream (ours: ``cons.messages()``; nats-py:
  ``pull_subscribe`` + ``fetch(500)``, its fastest pull API);
* ordered consumer read of a pre-filled stream (nats-py: ``js.subscribe(...,
  ordered_consumer=True)`` with a callback).

Every run gets a fresh stream (memory storage). Each figure is the median of
``--runs`` interleaved runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from collections.abc import Callable

from _common import Row, have_nats_py, paired, print_table, server_url

import natsjs_sync

PAYLOAD = b"x" * 128
_serial = [0]


def _fresh_stream(url: str, fill: int = 0) -> tuple[str, str]:
    """A new memory stream (and its subject), pre-filled with ``fill`` messages."""
    _serial[0] += 1
    name = f"BENCH{_serial[0]}"
    subject = f"bench.{name}"
    with natsjs_sync.connect(url) as nc:
        js = nc.jetstream()
        js.create_stream(name=name, subjects=[subject], storage="memory")
        for _ in range(fill):
            js.publish_async(subject, PAYLOAD)
        js.publish_async_complete(timeout=120)
    return name, subject


def _drop_stream(url: str, name: str) -> None:
    with natsjs_sync.connect(url) as nc:
        nc.jetstream().delete_stream(name)


def _with_stream(url: str, fill: int, fn: Callable[[str, str], float]) -> Callable[[], float]:
    def run() -> float:
        name, subject = _fresh_stream(url, fill)
        try:
            return fn(name, subject)
        finally:
            _drop_stream(url, name)

    return run


# ---------------------------------------------------------------- natsjs_sync

def ours_sync_publish(url: str, n: int) -> Callable[[str, str], float]:
    def run(_: str, subject: str) -> float:
        with natsjs_sync.connect(url) as nc:
            js = nc.jetstream()
            start = time.perf_counter()
            for _ in range(n):
                js.publish(subject, PAYLOAD)
            return n / (time.perf_counter() - start)

    return run


def ours_pipelined(url: str, n: int) -> Callable[[str, str], float]:
    def run(_: str, subject: str) -> float:
        with natsjs_sync.connect(url) as nc:
            js = nc.jetstream(publish_async_max_pending=4000)
            start = time.perf_counter()
            for _ in range(n):
                js.publish_async(subject, PAYLOAD)
            js.publish_async_complete(timeout=120)
            return n / (time.perf_counter() - start)

    return run


def ours_consume(url: str, n: int, ack: bool) -> Callable[[str, str], float]:
    def run(stream: str, _: str) -> float:
        with natsjs_sync.connect(url) as nc:
            js = nc.jetstream()
            cons = js.create_consumer(stream, durable_name="bench", ack_policy="explicit" if ack else "none")
            start = time.perf_counter()
            count = 0
            with cons.messages(max_messages=1000) as it:
                for msg in it:
                    if ack:
                        msg.ack()
                    count += 1
                    if count == n:
                        break
            nc.flush(timeout=30)  # the acks are out
            return n / (time.perf_counter() - start)

    return run


def ours_ordered(url: str, n: int) -> Callable[[str, str], float]:
    def run(stream: str, _: str) -> float:
        with natsjs_sync.connect(url) as nc:
            oc = nc.jetstream().ordered_consumer(stream)
            start = time.perf_counter()
            count = 0
            with oc.messages(max_messages=1000) as it:
                for _msg in it:
                    count += 1
                    if count == n:
                        break
            return n / (time.perf_counter() - start)

    return run


# ---------------------------------------------------------------- nats-py

def _nats_py(coro_fn: Callable[[], object]) -> float:
    return asyncio.run(coro_fn())  # type: ignore[arg-type]


def theirs_sync_publish(url: str, n: int) -> Callable[[str, str], float]:
    import nats

    def run(_: str, subject: str) -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream()
            start = time.perf_counter()
            for _ in range(n):
                await js.publish(subject, PAYLOAD)
            rate = n / (time.perf_counter() - start)
            await nc.close()
            return rate

        return _nats_py(go)

    return run


def theirs_pipelined(url: str, n: int) -> Callable[[str, str], float]:
    import nats

    def run(_: str, subject: str) -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream(publish_async_max_pending=4000)
            start = time.perf_counter()
            for _ in range(n):
                await js.publish_async(subject, PAYLOAD)
            await js.publish_async_completed()
            rate = n / (time.perf_counter() - start)
            await nc.close()
            return rate

        return _nats_py(go)

    return run


def theirs_consume(url: str, n: int, ack: bool) -> Callable[[str, str], float]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    def run(stream: str, subject: str) -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream()
            cfg = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT if ack else AckPolicy.NONE)
            psub = await js.pull_subscribe(subject, "bench", stream=stream, config=cfg)
            start = time.perf_counter()
            count = 0
            while count < n:
                for msg in await psub.fetch(500, timeout=10):
                    if ack:
                        await msg.ack()
                    count += 1
            await nc.flush(timeout=30)
            rate = n / (time.perf_counter() - start)
            await nc.close()
            return rate

        return _nats_py(go)

    return run


def theirs_ordered(url: str, n: int) -> Callable[[str, str], float]:
    import nats

    def run(_: str, subject: str) -> float:
        async def go() -> float:
            nc = await nats.connect(url)
            js = nc.jetstream()
            done = asyncio.get_running_loop().create_future()
            count = [0]

            async def cb(msg: object) -> None:
                count[0] += 1
                if count[0] == n and not done.done():
                    done.set_result(None)

            start = time.perf_counter()
            sub = await js.subscribe(subject, cb=cb, ordered_consumer=True)
            await asyncio.wait_for(done, 120)
            rate = n / (time.perf_counter() - start)
            await sub.unsubscribe()
            await nc.close()
            return rate

        return _nats_py(go)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("NATS_URL"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    args = ap.parse_args()
    scale = 0.1 if args.quick else 1.0
    n_sync = int(3000 * scale)
    n_pipe = int(100_000 * scale)
    n_cons = int(100_000 * scale)
    other = have_nats_py()
    threading.current_thread().name = "bench"
    rows: list[Row] = []
    with server_url(args.server) as url:
        cases: list[tuple[str, int, int, Callable[[str, str], float], Callable[[str, str], float] | None, float]] = [
            ("sync publish", n_sync, 0, ours_sync_publish(url, n_sync),
             theirs_sync_publish(url, n_sync) if other else None, 1.2),
            ("pipelined publish (4000 in flight)", n_pipe, 0, ours_pipelined(url, n_pipe),
             theirs_pipelined(url, n_pipe) if other else None, 1.5),
            ("pull consume, explicit acks", n_cons, n_cons, ours_consume(url, n_cons, True),
             theirs_consume(url, n_cons, True) if other else None, 2.0),
            ("pull consume, ack none", n_cons, n_cons, ours_consume(url, n_cons, False),
             theirs_consume(url, n_cons, False) if other else None, None),  # type: ignore[list-item]
            ("ordered consumer read", n_cons, n_cons, ours_ordered(url, n_cons),
             theirs_ordered(url, n_cons) if other else None, 1.5),
        ]
        for name, _n, fill, ours, theirs, target in cases:
            a, b = paired(args.runs, _with_stream(url, fill, ours),
                          _with_stream(url, fill, theirs) if theirs is not None else None)
            rows.append(Row(name, "msg/s", a, b, target=target))
            print(f"  {name}: {a:,.0f} vs {b if b is None else f'{b:,.0f}'}", flush=True)
    print_table(f"JetStream, 128 B messages (median of {args.runs} runs; "
                f"nats-py {'measured' if other else 'not installed'})", rows)


if __name__ == "__main__":
    main()
