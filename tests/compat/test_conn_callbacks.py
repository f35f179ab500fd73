"""Connection callbacks at the moments nats-py calls them, against a cluster.

The single-server cases run as a program under both clients
(``programs/conn_callbacks.py``).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.testing.server import NatsCluster


def test_the_first_connect_to_a_cluster_discovers_its_servers_silently(nats_cluster: NatsCluster) -> None:
    events: list[str] = []
    closed = threading.Event()

    def on_closed() -> None:
        events.append("closed")
        closed.set()

    nc = nats.connect(nats_cluster.urls[0], dont_randomize=True, closed_cb=on_closed,
                      discovered_server_cb=lambda: events.append("discovered"))
    nc.flush(timeout=5)  # the INFO the server sends after CONNECT is read before the PONG
    assert sorted(u.port for u in nc.discovered_servers) == sorted(n.port for n in nats_cluster.nodes[1:])
    nc.close()
    assert closed.wait(10)
    assert events == ["closed"]  # connection callbacks run in order: none was pending


def test_the_first_connect_to_a_cluster_under_nats_py(nats_cluster: NatsCluster) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

    async def main() -> tuple[list[str], int]:
        events: list[str] = []

        async def discovered() -> None:
            events.append("discovered")

        nc = await nats_py.connect(nats_cluster.urls[0], dont_randomize=True, discovered_server_cb=discovered)
        await nc.flush()
        found = len(nc.discovered_servers)
        await nc.close()
        return events, found

    events, found = asyncio.run(main())
    assert events == [] and found == 2
