"""Spark reads at scale: a batch read creates no consumer where the server can
serve its range by batched direct get (2.11+, ``allow_direct``); elsewhere the
consumers one query's read holds at once are capped (``maxConsumers``); and a
read's generator closed by the garbage collector never takes the connection's lock.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.spark import NatsConfig, config
from natsjs_sync.spark.helpers import iter_range
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


@pytest.fixture
def nc(server: NatsServer) -> Iterator[nats.Client]:
    client = nats.connect(server.url, name="scale-test")
    yield client
    client.close()


def _stream(nc: nats.Client, prefix: str, n: int, allow_direct: bool, subjects: int = 3) -> str:
    """A fresh stream of ``n`` messages ``str(i)`` on ``<name>.<i % subjects>``."""
    name = prefix + next_nuid()[:8]
    js = nc.jetstream()
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct, storage="memory")
    for i in range(n):
        js.publish_async(f"{name}.{i % subjects}", str(i).encode())
    js.publish_async_complete(timeout=60)
    return name


def _collect_holding_the_lock(client: nats.Client) -> bool:
    """``gc.collect()`` on a thread that holds the connection's lock; False when it never returned."""
    lock = client._conn.lock
    done = threading.Event()

    def run() -> None:
        with lock:
            gc.collect()
        done.set()

    threading.Thread(target=run, name="collect-under-lock", daemon=True).start()
    return done.wait(10.0)


def test_a_pulled_read_collected_while_the_lock_is_held_hands_its_release_to_the_timer_thread(
        server: NatsServer, nc: nats.Client) -> None:
    name = _stream(nc, "GCREAD", 20, allow_direct=False)  # no direct get: the consumer path
    cfg = NatsConfig(servers=server.url, name="gc-read")
    shared = cfg.client()
    was = gc.isenabled()
    gc.disable()  # only the collect below closes the generator
    try:
        rows = iter_range(cfg, name, 1, 20, batch=5)
        assert next(rows)[1] == 1  # the read now holds its consumer and its inbox
        assert nc.jetstream().stream(name).info().state.consumer_count == 1
        box: list[Any] = [rows]
        box.append(box)  # a cycle: only the cyclic collector closes it
        del rows, box
        ok = _collect_holding_the_lock(shared)
        if not ok:  # wedged for good: keep the teardown from closing it (that would hang too)
            with config._lock:
                config._clients.clear()
        assert ok, "the read's generator took the connection's lock when collected: deadlocked"
        assert wait_until(lambda: nc.jetstream().stream(name).info().state.consumer_count == 0, timeout=10.0), \
            "the collected read's consumer was not deleted"
        assert shared.is_connected
    finally:
        if was:
            gc.enable()
