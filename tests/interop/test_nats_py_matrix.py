"""nats-py 2.16 and natsjs_sync on one server, the cells tests/test_interop_nats_py.py
leaves out: each making the other's bucket, per-key TTLs on a default bucket,
objects of every size with metadata and links, JetStream messages with headers."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BucketExistsError
from natsjs_sync.jetstream import ObjectMeta
from natsjs_sync.protocol.headers import Headers

from ..conftest import wait_until
from .test_nodejs_jetstream import CHUNK, SIZES, data

nats_py = pytest.importorskip("nats", reason="nats-py is part of the test extra")


def with_nats_py(url: str, body: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    """Run ``body(nc, js)`` on a nats-py connection."""
    async def main() -> Any:
        nc = await nats_py.connect(url)
        try:
            return await body(nc, nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())


def test_each_client_makes_the_others_bucket(nats_url: str) -> None:
    async def make(nc: Any, js: Any) -> None:
        kv = await js.create_key_value(bucket="bypy", history=4)
        await kv.put("k", b"from nats-py")

    with_nats_py(nats_url, make)
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        kv = js.create_key_value(bucket="bypy", history=4)  # the same bucket: opened
        assert kv.get("k").value == b"from nats-py"
        with pytest.raises(BucketExistsError):  # another history is another bucket
            js.create_key_value(bucket="bypy", history=2)
        ours = js.create_key_value(bucket="byus", history=4)
        ours.put("k", b"from us")

    async def reopen(nc: Any, js: Any) -> bytes:
        # nats-py 2.16 sends allow_direct=false unless told (direct=None), so its create
        # of a bucket nats.go or we made (direct get on, as nats.go makes them) is refused
        # unless it asks for direct get too; with it, the configs are identical.
        kv = await js.create_key_value(bucket="byus", history=4, direct=True)
        return bytes((await kv.get("k")).value)

    assert with_nats_py(nats_url, reopen) == b"from us"


def test_per_key_ttl_on_a_default_bucket(nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        kv = js.create_key_value(bucket="ttl")
        if not js.supports("msg_ttl"):
            with pytest.raises(nats.FeatureNotSupportedError):
                kv.create("short", b"x", ttl=1)
            return
        assert kv.status().stream_info.config.allow_msg_ttl  # as nats-py makes buckets
        kv.create("short", b"x", ttl=3)  # long enough to be read back on a loaded machine before it goes
        kv.put("stays", b"y")
        assert kv.get("short").value == b"x"

        def expired() -> bool:
            try:
                kv.get("short")
            except nats.KeyNotFoundError:
                return True
            return False

        # Without limit markers the server removes it silently: nothing to wait on but the key.
        assert wait_until(expired, timeout=15)
        assert kv.get("stays").value == b"y"


def test_objects_of_every_size_both_ways(nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        obs = nc.jetstream().create_object_store(bucket="ours")
        for name, size in SIZES.items():
            obs.put(name, data(size), meta=ObjectMeta(description=f"{name} object",
                                                      headers={"K": [name]}))
        obs.add_link("link", obs.get_info("plus1"))

    async def read_ours_write_theirs(nc: Any, js: Any) -> dict[str, Any]:
        from nats.js.api import ObjectMeta as PyMeta

        out: dict[str, Any] = {}
        ours = await js.object_store("ours")
        for name in [*SIZES, "link"]:
            result = await asyncio.wait_for(ours.get(name), 10)  # an empty object used to hang here
            info = await ours.get_info(name)
            out[name] = (hashlib.sha256(result.data).hexdigest(), info.size, info.description,
                         dict(info.headers or {}).get("K"))
        theirs = await js.create_object_store("theirs")
        for name, size in SIZES.items():
            await theirs.put(name, data(size), meta=PyMeta(name=name, description=f"py {name}",
                                                          headers={"K": name}))
        await theirs.put("gone", b"bye")
        await theirs.delete("gone")
        return out

    got = with_nats_py(nats_url, read_ours_write_theirs)
    for name, size in SIZES.items():
        assert got[name][:3] == (hashlib.sha256(data(size)).hexdigest(), size, f"{name} object")
        assert got[name][3] in (name, [name])
    assert got["link"][0] == hashlib.sha256(data(CHUNK + 1)).hexdigest()
    with nats.connect(nats_url) as nc:
        obs = nc.jetstream().object_store("theirs")
        for name, size in SIZES.items():
            info = obs.get_info(name)
            assert (info.size, info.description, info.headers) == (size, f"py {name}", {"K": name})  # as put
            assert obs.get_bytes(name) == data(size)
        assert obs.get_info("gone", show_deleted=True).deleted  # written with "mtime": ""
        assert sorted(i.name for i in obs.list()) == sorted(SIZES)
        obs.update_meta("one", ObjectMeta(description="changed by us"))

    async def read_update(nc: Any, js: Any) -> str:
        return str((await (await js.object_store("theirs")).get_info("one")).description)

    assert with_nats_py(nats_url, read_update) == "changed by us"


def test_messages_with_headers_both_ways(nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        js.create_stream(name="PYX", subjects=["pyx.>"])
        hdrs = Headers()
        hdrs["X-One"] = "1"
        hdrs["X-Two"] = "2"
        ack = js.publish("pyx.ours", data(300), headers=hdrs, msg_id="ours-1")

    async def both(nc: Any, js: Any) -> tuple[Any, int]:
        psub = await js.pull_subscribe("pyx.ours", "pyreader")
        msgs = await psub.fetch(1, timeout=5)
        await msgs[0].ack()
        seen = (msgs[0].data == data(300), dict(msgs[0].headers or {}), msgs[0].metadata.sequence.stream)
        pa = await js.publish("pyx.theirs", data(301), headers={"X-Py": "yes"})
        return seen, pa.seq

    (same_data, headers, seq), their_seq = with_nats_py(nats_url, both)
    assert same_data and seq == ack.seq
    assert headers["X-One"] == "1" and headers["X-Two"] == "2" and headers["Nats-Msg-Id"] == "ours-1"
    with nats.connect(nats_url) as nc:
        cons = nc.jetstream().create_consumer("PYX", durable_name="ours", filter_subject="pyx.theirs")
        msg = cons.next(timeout=5)
        assert msg.data == data(301) and msg.headers is not None and msg.headers["X-Py"] == "yes"
        assert msg.metadata.sequence.stream == their_seq
        msg.ack_sync()
