"""Buckets and objects written by nats-py are read by natsjs_sync, and the reverse:
byte for byte, revision for revision, digest for digest."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

import natsjs_sync
from natsjs_sync.jetstream import KeyValueOp
from natsjs_sync.testing import NatsServer

nats_py = pytest.importorskip("nats", reason="nats-py is part of the test extra")

BIG = os.urandom(1_000_003)  # several chunks, an odd size


def test_kv_written_by_nats_py_read_by_us(nats_server: NatsServer) -> None:
    async def write() -> list[int]:
        nc = await nats_py.connect(nats_server.url)
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="fromnatspy", history=5)
        revs = [await kv.put("user.sue", b"blue"), await kv.put("user.sue", b"green"),
                await kv.put("user.bob", b"\x00\xff binary")]
        await kv.delete("user.bob")
        await nc.close()
        return revs

    revs = asyncio.run(write())
    with natsjs_sync.connect(nats_server.url) as nc:
        kv = nc.jetstream().key_value("fromnatspy")
        assert kv.get("user.sue").value == b"green" and kv.get("user.sue").revision == revs[1]
        assert kv.get("user.sue", revision=revs[0]).value == b"blue"
        with pytest.raises(natsjs_sync.KeyDeletedError):
            kv.get("user.bob")
        assert [e.operation for e in kv.history("user.bob")] == [KeyValueOp.PUT, KeyValueOp.DEL]
        assert kv.keys() == ["user.sue"]
        assert kv.status().history == 5


def test_kv_written_by_us_read_by_nats_py(nats_server: NatsServer) -> None:
    with natsjs_sync.connect(nats_server.url) as nc:
        kv = nc.jetstream().create_key_value(bucket="fromus", history=3)
        r1 = kv.put("a", b"1")
        r2 = kv.put("a", b"\x00two")
        kv.put("b", b"x")
        kv.purge("b")

    async def read() -> None:
        nc = await nats_py.connect(nats_server.url)
        kv = await nc.jetstream().key_value("fromus")
        e = await kv.get("a")
        assert (e.value, e.revision) == (b"\x00two", r2)
        assert (await kv.get("a", revision=r1)).value == b"1"
        from nats.js.errors import KeyNotFoundError as NatsPyKeyNotFound

        with pytest.raises(NatsPyKeyNotFound):  # nats-py's KeyDeletedError is one too
            await kv.get("b")
        assert await kv.keys() == ["a"]
        await nc.close()

    asyncio.run(read())


def test_object_written_by_nats_py_read_by_us(nats_server: NatsServer) -> None:
    async def write() -> str:
        nc = await nats_py.connect(nats_server.url)
        obs = await nc.jetstream().create_object_store("pyobjs")
        info = await obs.put("data.bin", BIG)
        await nc.close()
        return str(info.digest)

    digest = asyncio.run(write())
    with natsjs_sync.connect(nats_server.url) as nc:
        obs = nc.jetstream().object_store("pyobjs")
        info = obs.get_info("data.bin")
        assert info.digest == digest and info.size == len(BIG)
        assert obs.get_bytes("data.bin") == BIG  # the digest was verified on the way


def test_object_written_by_us_read_by_nats_py(nats_server: NatsServer) -> None:
    with natsjs_sync.connect(nats_server.url) as nc:
        obs = nc.jetstream().create_object_store(bucket="ourobjs")
        info = obs.put("data.bin", BIG, chunk_size=100_000)

    async def read() -> None:
        nc = await nats_py.connect(nats_server.url)
        obs = await nc.jetstream().object_store("ourobjs")
        result = await obs.get("data.bin")
        assert result.data == BIG
        assert result.info.digest == info.digest
        assert result.info.size == len(BIG) and result.info.chunks == 11
        assert hashlib.sha256(result.data).digest() == hashlib.sha256(BIG).digest()
        await nc.close()

    asyncio.run(read())
