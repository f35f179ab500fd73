"""``set_server_pool``: the next reconnect goes to a server of the new pool (both clients)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

FAST = {"reconnect_time_wait": 0.1, "connect_timeout": 2, "dont_randomize": True}


def test_the_next_reconnect_uses_the_new_pool() -> None:
    with NatsServer(jetstream=False) as a, NatsServer(jetstream=False) as b:
        back = threading.Event()
        nc = nats.connect(a.url, reconnected_cb=back.set, **FAST)
        try:
            nc.set_server_pool([b.url])
            assert nc.connected_url.port == a.port  # the connection in use stays
            nc.force_reconnect()
            assert back.wait(10)
            assert nc.connected_url.port == b.port
            assert [s.uri.port for s in nc.server_pool] == [b.port]
        finally:
            nc.close()


def test_a_server_kept_in_the_new_pool_keeps_its_failed_attempts() -> None:
    with NatsServer(jetstream=False) as a:
        dead = "nats://127.0.0.1:1"
        failed = threading.Event()
        nc = nats.connect([a.url, dead], error_cb=lambda e: failed.set(), **FAST)
        try:
            nc.force_reconnect()  # a goes to the back of the pool: the dead server is tried first
            assert failed.wait(10)
            before = {s.uri.port: s.reconnects for s in nc.server_pool}
            assert before[1] >= 1
            nc.set_server_pool([dead, a.url])
            after = {s.uri.port: s.reconnects for s in nc.server_pool}
            assert after[1] >= before[1]
        finally:
            nc.close()


def test_the_next_reconnect_uses_the_new_pool_under_nats_py() -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    with NatsServer(jetstream=False) as a, NatsServer(jetstream=False) as b:

        async def main() -> int:
            back = asyncio.Event()

            async def reconnected() -> None:
                back.set()

            nc = await nats_py.connect(a.url, reconnected_cb=reconnected, **FAST)
            nc.set_server_pool([b.url])
            await nc.force_reconnect()
            await asyncio.wait_for(back.wait(), 10)
            port = nc.connected_url.port
            await nc.close()
            return port

        assert asyncio.run(main()) == b.port
