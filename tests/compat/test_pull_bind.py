"""``pull_subscribe_bind`` asks the server nothing, as nats-py's: a user allowed only
to pull from the consumer (``CONSUMER.MSG.NEXT``) and to ack can bind and fetch.
The same program runs under nats-py, to show it is nats-py's behaviour."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

PULLER = {"user": "puller", "password": "p", "permissions": {
    "publish": ["$JS.API.CONSUMER.MSG.NEXT.BIND.worker", "$JS.ACK.BIND.worker.>"],
    "subscribe": ["_INBOX.>"],
}}
ADMIN = {"user": "admin", "password": "a"}


@pytest.fixture
def server() -> Any:
    with NatsServer(users=[PULLER, ADMIN]) as srv:
        with nats.connect(srv.url, user="admin", password="a") as nc:
            js = nc.jetstream()
            js.add_stream(name="BIND", subjects=["bind.>"])
            js.add_consumer("BIND", durable_name="worker")
            js.publish("bind.a", b"only")
        yield srv


def test_a_user_allowed_only_to_pull_binds_and_fetches(server: NatsServer) -> None:
    with nats.connect(server.url, user="puller", password="p") as nc:
        sub = nc.jetstream().pull_subscribe_bind("worker", stream="BIND")
        (msg,) = sub.fetch(1, timeout=5)
        assert msg.data == b"only"
        msg.ack_sync()


def test_nats_py_binds_the_same(server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

    async def main() -> bytes:
        nc = await nats_py.connect(server.url, user="puller", password="p")
        try:
            sub = await nc.jetstream().pull_subscribe_bind("worker", stream="BIND")
            (msg,) = await sub.fetch(1, timeout=5)
            return bytes(msg.data)
        finally:
            await nc.close()

    assert asyncio.run(main()) == b"only"
