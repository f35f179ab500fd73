"""Buckets made by nats-py and by natsjs_sync interoperate: natsjs_sync's
``create_key_value`` with the defaults opens a bucket nats-py made, nats-py
opens one natsjs_sync made (with ``key_value``: its ``create_key_value`` asks for
``allow_direct`` off, which nats.go and natsjs_sync turn on), and per-key TTLs
work on both."""

from __future__ import annotations

import asyncio

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

nats_py = pytest.importorskip("nats", reason="nats-py is not installed")


def _nats_py(url: str, bucket: str) -> bytes:
    async def main() -> bytes:
        nc = await nats_py.connect(url)
        try:
            js = nc.jetstream()
            kv = await (js.key_value(bucket) if bucket == "made_by_sync" else js.create_key_value(bucket=bucket))
            await kv.create("from-py", b"py", msg_ttl=60)
            return (await kv.get("from-sync")).value if bucket == "made_by_sync" else b""
        finally:
            await nc.close()

    return asyncio.run(main())


@pytest.mark.server("2.11")  # per-key TTL (msg_ttl) on default buckets
@pytest.mark.parametrize("first", ["sync", "nats-py"])
def test_default_buckets_interoperate(nats_server: NatsServer, first: str) -> None:
    bucket = "made_by_sync" if first == "sync" else "made_by_py"
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        if first == "nats-py":
            _nats_py(nats_server.url, bucket)
        kv = js.create_key_value(bucket=bucket)
        kv.create("from-sync", b"sync", msg_ttl=60)
        if first == "sync":
            assert _nats_py(nats_server.url, bucket) == b"sync"
        assert kv.get("from-py").value == b"py"
        assert sorted(kv.keys()) == ["from-py", "from-sync"]
