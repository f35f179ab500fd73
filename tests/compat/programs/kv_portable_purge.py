"""The portable code docs/migrating.rst gives for two key-value differences: purging
the keys under a prefix one by one (no wildcard key), and telling a deleted key's
entry by ``op`` and a false ``value`` (``None`` in nats-py, ``b""`` here)."""

import asyncio
import os

import nats
from nats.js.errors import KeyNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="PORTABLE", history=5)
    await kv.put("hello.a", b"1")
    await kv.put("hello.b", b"2")
    await kv.put("other", b"3")

    for key in await kv.keys(filters=["hello."]):
        if key.startswith("hello."):
            await kv.purge(key)
    assert await kv.keys() == ["other"]

    try:
        await kv.get("hello.a")
        raise AssertionError("got a purged key")
    except KeyNotFoundError as exc:
        assert exc.op == "PURGE", exc.op
        assert not exc.entry.value, exc.entry
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
