"""The fault battery, one server: SIGKILL and restart (same port, same store)
while every kind of publisher and consumer is at work.

Consumption must resume within one heartbeat interval (15 s with the default
30 s expires) after the server is back. The bug this guards against gave
24-30 s; a fixed client needs well under a second, and the bound leaves a
loaded machine room (half an interval was too tight there).
"""

from __future__ import annotations

import hashlib
import threading
import time

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..recovery import FAST, CallTimer, Reader, restart
from .workload import CALL_MARGIN, Workload

HEARTBEAT = 15.0
RESUME_BOUND = HEARTBEAT


def test_kill_and_restart_while_publishing_and_consuming() -> None:
    server = NatsServer().start()
    nc = nats.connect(server.url, name="battery", **FAST)
    work: Workload | None = None
    try:
        js = nc.jetstream(timeout=5)
        js.create_stream(name="B", subjects=["b.>"], storage="file", duplicate_window=120.0)
        work = Workload(js, "B", "b.x")
        for round_ in (1, 2):
            assert work.wait_acked(300, timeout=60), "publishing did not get going"
            back = restart(server)
            times = work.resume_times(back, RESUME_BOUND, f"restart{round_}")
            print(f"restart {round_}: consumption resumed after (s) " +
                  ", ".join(f"{k}={'-' if v is None else f'{v:.2f}'}" for k, v in times.items()))
            late = {k: v for k, v in times.items() if v is None}
            assert not late, f"not resumed {RESUME_BOUND} s after the server was back: {sorted(late)}"
        print("checked:", work.verify(server.url))
    finally:
        if work is not None:
            work.stop()
        nc.close()
        server.close()


def test_kv_watch_and_objects_across_restarts() -> None:
    server = NatsServer().start()
    nc = nats.connect(server.url, name="battery-stores", **FAST)
    timer = CallTimer()
    try:
        js = nc.jetstream(timeout=5)
        kv = js.create_key_value(bucket="BW", history=64, storage="file")
        watcher = kv.watch_all(include_history=True)
        seen = Reader(watcher.next, name="test-watch", stop_on=(nats.BadSubscriptionError,))
        acked: list[int] = []
        stop = threading.Event()

        def write() -> None:
            # 60 writes a key at most: with history=64 the bucket discards none,
            # so every acknowledged revision must reach the watch.
            for n in range(600):
                if stop.is_set():
                    return
                for _ in range(1000):
                    try:
                        acked.append(timer.call("kv put", 2.0, lambda n=n: kv.put(f"k{n % 10}", b"%d" % n,
                                                                                  timeout=2.0)))
                        break
                    except nats.NatsError:
                        if stop.wait(0.02):
                            return
                stop.wait(0.01)

        writer = threading.Thread(target=write, name="test-kv-writer", daemon=True)
        writer.start()
        # An object put with a restart in the middle, then a get with one.
        obs = js.create_object_store(bucket="BO", storage="file")
        data = hashlib.sha256(b"seed").digest() * (6 * 1024 * 1024 // 32)  # 6 MB
        put_outcome: list[object] = []
        halfway = threading.Event()

        def put() -> None:
            try:
                put_outcome.append(timer.call("object put", 30.0, lambda: obs.put(
                    "big", data, chunk_size=64 * 1024, timeout=30.0,
                    progress=lambda sent, total: sent >= len(data) // 3 and halfway.set())))
            except nats.NatsError as exc:
                put_outcome.append(exc)

        putter = threading.Thread(target=put, name="test-object-put", daemon=True)
        putter.start()
        assert halfway.wait(30), "the object put made no progress"
        restart(server)
        putter.join(60)
        assert put_outcome, "the object put never returned"
        if isinstance(put_outcome[0], nats.NatsError):  # failed in time: it can be put again
            obs.put("big", data, chunk_size=64 * 1024, timeout=30.0)
        with obs.get("big", timeout=30.0) as result:
            first = result.read(len(data) // 3)
            back = restart(server)
            rest = timer.call("object read", 30.0, result.read)
            print(f"object get: finished {time.monotonic() - back:.2f} s after the server was back")
        assert hashlib.sha256(first + rest).digest() == hashlib.sha256(data).digest()
        assert len(acked) > 20, "the KV writer made no progress"
        restart(server)
        stop.set()
        writer.join(30)
        last = max(acked)
        assert seen.wait_for(lambda: any(e is not None and e.revision >= last for e in seen.values()), 30), \
            "the watch did not catch up after the restarts"
        seen.stop(watcher.stop)
        revisions = [e.revision for e in seen.values() if e is not None]
        assert revisions == sorted(set(revisions)), "the watch repeated or reordered an update"
        assert set(acked) <= set(revisions), f"the watch missed updates: {sorted(set(acked) - set(revisions))[:10]}"
        overruns = timer.overruns(CALL_MARGIN)
        assert not overruns, f"calls past their deadline: {overruns[:5]}"
    finally:
        nc.close()
        server.close()
