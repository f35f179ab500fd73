"""What the ops tests share: a cluster configuration with a system account, and a poll."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import natsjs_sync as nats
from natsjs_sync.monitor import SystemClient
from natsjs_sync.testing import NatsCluster

from ..conftest import wait_until

#: A system account "SYS" and an application account "APP" with JetStream.
ACCOUNTS: dict[str, Any] = {
    "accounts": {
        "SYS": {"users": [{"user": "sys", "password": "sys"}]},
        "APP": {"jetstream": "enabled", "users": [{"user": "app", "password": "app"}]},
    },
    "system_account": "SYS",
}

#: Polls server state that offers nothing to wait on; each probe is a whole request
#: (or a whole CLI check), so not too often.
eventually = functools.partial(wait_until, interval=0.2)


@contextlib.contextmanager
def system_cluster(name: str) -> Iterator[NatsCluster]:
    """A 3-node cluster with :data:`ACCOUNTS`, once every server answers a system ping.

    The routes are up when the cluster starts, but a server's interest in the
    system account's requests reaches its peers a moment later: a gathered
    request sent in that moment misses a server and waits its whole timeout.
    """
    with NatsCluster(3, name=name, config=ACCOUNTS) as cluster:
        with nats.connect(cluster.urls[0], user="sys", password="sys") as nc:
            client = SystemClient(nc, timeout=2.0)
            assert eventually(lambda: len(client.ping(expected=3)) == 3, timeout=30.0), "a server never answered"
        yield cluster


def replicated_stream(cluster: NatsCluster, name: str) -> list[int]:
    """An R3 file stream ``name`` on ``<name lower case>.>`` holding one message, made by the
    APP user; returns the indexes of the nodes that do not lead it (the ones to stop)."""
    with nats.connect(cluster.url, user="app", password="app") as nc:
        js = nc.jetstream(timeout=20.0)
        js.create_stream(name=name, subjects=[f"{name.lower()}.>"], num_replicas=3, storage="file")
        js.publish(f"{name.lower()}.1", b"x")
        info = js.stream(name).info().cluster
        assert info is not None and info.leader
    return [i for i, n in enumerate(cluster.nodes) if n.server_name != info.leader]
