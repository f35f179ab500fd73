"""Issue 20, an object get that was waiting when the connection dropped goes on
at once after the reconnect (it stayed silent for two heartbeats, ~10 s).

To be sure the get was waiting on a pull request the old connection took with
it, the fault proxy holds all traffic from the moment the get is opened: the
get's first pull request is seen going out (the proxy counts it), nothing can
answer it, and the connection is then cut while the server restarts.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ..recovery import FAST, Events, restart

RESUME_BOUND = 5.0


@pytest.fixture
def proxied() -> Iterator[tuple[NatsServer, FaultProxy, nats.Client, Events]]:
    server = NatsServer()
    server.start()
    proxy = FaultProxy(server.url).start()
    ev = Events()
    nc = nats.connect(proxy.url, name="obj-resume", **FAST, **ev.kwargs())
    try:
        yield server, proxy, nc, ev
    finally:
        nc.close()
        proxy.close()
        server.close()


def test_a_waiting_object_get_resumes_at_once_after_a_reconnect(
        proxied: tuple[NatsServer, FaultProxy, nats.Client, Events]) -> None:
    server, proxy, nc, ev = proxied
    obs = nc.jetstream(timeout=10).create_object_store(bucket="OBJ", storage="file")
    data = bytes(range(256)) * 4096 * 4  # 4 MB in 32 chunks
    obs.put("big", data, chunk_size=128 * 1024)
    result = obs.get("big")
    got: list[bytes] = []
    done = threading.Event()
    finished: list[float] = []

    def read() -> None:
        try:
            got.append(result.read())
            finished.append(time.monotonic())
        except nats.NatsError as exc:
            got.append(repr(exc).encode())
        finally:
            done.set()

    try:
        pubs = proxy.client_frames("PUB") + proxy.client_frames("HPUB")
        proxy.blackhole()
        reader = threading.Thread(target=read, name="test-object-reader", daemon=True)
        reader.start()
        # The get's pull request left on the connection that is about to die.
        assert wait_until(lambda: proxy.client_frames("PUB") + proxy.client_frames("HPUB") > pubs, timeout=10)
        back = restart(server)
        proxy.cut()  # the held connection is reset; what it held is gone with it
        proxy.heal()
        assert ev.reconnected.wait(10)
        done.wait(max(0.1, back + RESUME_BOUND - time.monotonic()))
        print(f"object get: finished {finished[0] - back:.2f} s after the server was back" if finished
              else "object get: still waiting")
        assert finished, f"the object get stayed silent {RESUME_BOUND} s after the server was back"
        assert hashlib.sha256(got[0]).digest() == hashlib.sha256(data).digest()
    finally:
        proxy.heal()
        result.close()
        done.wait(10)
