"""nats-py's ``fetch(batch, timeout=None)`` has no time limit: when nothing is
available its pull carries no ``expires`` and stays open until the whole batch came.
The last test runs the same steps under nats-py itself, to show it is nats-py's
behaviour."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until

NEXT = "$JS.API.CONSUMER.MSG.NEXT.NOLIMIT.worker"


def _setup(url: str) -> None:
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name="NOLIMIT", subjects=["nolimit"])


def _consumer(url: str) -> Any:
    with nats.connect(url) as nc:
        return nc.jetstream().consumer_info("NOLIMIT", "worker")


def test_fetch_without_timeout_waits_for_the_whole_batch(nats_server: NatsServer) -> None:
    _setup(nats_server.url)
    with nats.connect(nats_server.url) as spy, nats.connect(nats_server.url) as nc:
        pulls = spy.subscribe(NEXT)
        spy.flush()
        js = nc.jetstream()
        psub = js.pull_subscribe("nolimit", "worker")
        got: list[Any] = []
        fetcher = threading.Thread(target=lambda: got.append(psub.fetch(3, timeout=None)))
        fetcher.start()
        assert wait_until(lambda: _consumer(nats_server.url).num_waiting == 1)
        js.publish("nolimit", b"1")
        assert wait_until(lambda: _consumer(nats_server.url).num_ack_pending == 1)
        assert _consumer(nats_server.url).num_waiting == 1  # the pull is still open for two more
        js.publish("nolimit", b"2")
        js.publish("nolimit", b"3")
        fetcher.join(timeout=10)
        assert not fetcher.is_alive()
        assert [m.data for m in got[0]] == [b"1", b"2", b"3"]
        bodies = []
        while True:
            try:
                bodies.append(json.loads(pulls.next_msg(timeout=0.5).data))
            except nats.TimeoutError:
                break
        waiting = [b for b in bodies if not b.get("no_wait")]
        assert waiting and all("expires" not in b for b in waiting), bodies


def test_nats_py_waits_the_same(nats_server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    _setup(nats_server.url)

    async def main() -> list[bytes]:
        nc = await nats_py.connect(nats_server.url)
        try:
            js = nc.jetstream()
            psub = await js.pull_subscribe("nolimit", "worker")
            fetch = asyncio.create_task(psub.fetch(3, timeout=None))
            for _ in range(250):
                if (await js.consumer_info("NOLIMIT", "worker")).num_waiting == 1:
                    break
                await asyncio.sleep(0.02)
            await js.publish("nolimit", b"1")
            for _ in range(250):
                if (await js.consumer_info("NOLIMIT", "worker")).num_ack_pending == 1:
                    break
                await asyncio.sleep(0.02)
            assert (await js.consumer_info("NOLIMIT", "worker")).num_waiting == 1
            await js.publish("nolimit", b"2")
            await js.publish("nolimit", b"3")
            return [bytes(m.data) for m in await asyncio.wait_for(fetch, 10)]
        finally:
            await nc.close()

    assert asyncio.run(main()) == [b"1", b"2", b"3"]
