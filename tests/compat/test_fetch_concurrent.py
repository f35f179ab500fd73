"""Several threads fetching from one nats-py pull subscription: each fetch gets its
own messages; together they get every message once (none lost, none twice).

nats-py allows the same with several tasks on one subscription; the last test
runs that form under nats-py itself, to show the property is nats-py's."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import TimeoutError
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until

TOTAL = 300
WORKERS = 4


def _publish_all(url: str, stream: str) -> None:
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
        for i in range(TOTAL):
            js.publish(f"{stream.lower()}.job", str(i).encode())


def test_threads_fetching_from_one_pull_subscription(nats_server: NatsServer) -> None:
    _publish_all(nats_server.url, "CONC")
    nc = nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        psub = js.pull_subscribe("conc.>", "workers")
        batches: list[list[bytes]] = []
        lock = threading.Lock()
        failures: list[BaseException] = []
        deadline = time.monotonic() + 60

        def worker(batch: int) -> None:
            try:
                while time.monotonic() < deadline:
                    with lock:
                        if sum(len(b) for b in batches) >= TOTAL:
                            return
                    try:
                        # 3 s: a fetch returns what it read by its timeout; one that a loaded machine
                        # let read too late would leave its messages to be delivered a second time.
                        msgs = psub.fetch(batch, timeout=3)
                    except TimeoutError:
                        continue
                    for m in msgs:
                        assert m.metadata.num_delivered == 1
                        m.ack()
                    with lock:
                        batches.append([m.data for m in msgs])
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(b,)) for b in (1, 5, 7, 16)[:WORKERS]]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
        counts = Counter(d for b in batches for d in b)
        assert sorted(int(d) for d in counts) == list(range(TOTAL)), "a message was lost"
        assert max(counts.values()) == 1, "a message was delivered to two fetches"
        assert all(b for b in batches)  # a fetch returns messages or raises TimeoutError
        info = psub.consumer_info()
        assert info.num_pending == 0 and info.num_redelivered == 0
        assert info.delivered.consumer_seq == TOTAL
    finally:
        nc.close()


def test_the_same_property_under_nats_py(nats_server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    _publish_all(nats_server.url, "CONCPY")

    async def main() -> tuple[Counter[bytes], int]:
        nc = await nats_py.connect(nats_server.url)
        js = nc.jetstream()
        psub = await js.pull_subscribe("concpy.>", "workers")
        got: list[bytes] = []
        deadline = time.monotonic() + 60

        async def worker(batch: int) -> None:
            while len(got) < TOTAL and time.monotonic() < deadline:
                try:
                    # nats-py's fetches share one queue: the one-message fetch takes what the
                    # others' pulls bring, and they wait out their timeout for a full batch
                    # (some 30 messages a round). A short round; a message that comes after
                    # it stays queued for the next fetch.
                    msgs = await psub.fetch(batch, timeout=0.25)
                except (nats_py.errors.TimeoutError, asyncio.TimeoutError):  # nats-py raises either
                    continue
                for m in msgs:
                    await m.ack()
                got.extend(m.data for m in msgs)

        await asyncio.gather(*(worker(b) for b in (1, 5, 7, 16)[:WORKERS]))
        info = await psub.consumer_info()
        await nc.close()
        return Counter(got), info.num_pending

    counts, pending = asyncio.run(main())
    assert sorted(int(d) for d in counts) == list(range(TOTAL))
    assert max(counts.values()) == 1
    assert pending == 0


def test_more_fetching_threads_than_the_consumer_has_pull_slots(nats_server: NatsServer) -> None:
    """max_waiting=2 and six threads each fetching once: the server refuses four of
    the pulls (409 Exceeded MaxWaiting) while two wait; each refused fetch asks again
    within its timeout, so every thread gets a message as they are published."""
    from natsjs_sync.js.api import ConsumerConfig

    threads_n = 6
    nc = nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        js.add_stream(name="SLOTS", subjects=["slots.>"])
        psub = js.pull_subscribe("slots.>", "few", config=ConsumerConfig(max_waiting=2))
        got: list[bytes] = []
        failures: list[BaseException] = []
        lock = threading.Lock()
        received = threading.Condition(lock)
        start = threading.Barrier(threads_n + 1, timeout=30)

        def worker() -> None:
            try:
                start.wait()
                msg = psub.fetch(1, timeout=15)[0]
                msg.ack()
                with received:
                    got.append(msg.data)
                    received.notify_all()
            except BaseException as exc:  # reported by the test thread
                with received:
                    failures.append(exc)
                    received.notify_all()

        threads = [threading.Thread(target=worker) for _ in range(threads_n)]
        for t in threads:
            t.start()
        start.wait()
        # Two pulls waiting before the first publish (if not in 10 s, the publishes go on anyway).
        wait_until(lambda: psub.consumer_info().num_waiting >= 2, timeout=10)
        for i in range(threads_n):
            js.publish("slots.job", str(i).encode())
            with received:  # one at a time: a refused fetch has to get a slot to be served
                assert received.wait_for(lambda n=i: len(got) + len(failures) > n, timeout=10), \
                    f"message {i} was not fetched within 10 s"
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
        assert sorted(got) == [str(i).encode() for i in range(threads_n)]
    finally:
        nc.close()
