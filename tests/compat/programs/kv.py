"""Key-value store: create, put/get/create/update/delete/purge, keys, history, watch, status."""

import asyncio
import os

import nats
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import (
    BadBucketError,
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats.js.kv import KV_DEL, KV_PURGE

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    kv = await js.create_key_value(KeyValueConfig(bucket="profiles", history=5, storage=StorageType.MEMORY))
    try:
        await kv.keys()
    except NoKeysError:
        pass
    else:
        raise AssertionError("keys() of an empty bucket must raise NoKeysError")

    rev = await kv.put("sue.color", b"blue")
    assert rev == 1
    entry = await kv.get("sue.color")
    assert entry.key == "sue.color" and entry.value == b"blue" and entry.revision == 1
    assert entry.bucket == "profiles"
    assert entry.operation not in (KV_DEL, KV_PURGE)

    rev = await kv.update("sue.color", b"green", last=1)
    assert rev == 2
    try:
        await kv.update("sue.color", b"red", last=1)
    except KeyWrongLastSequenceError:
        pass
    else:
        raise AssertionError("stale update accepted")

    await kv.create("bob.color", b"red")
    try:
        await kv.create("bob.color", b"red")
    except KeyWrongLastSequenceError:
        pass
    else:
        raise AssertionError("create of an existing key accepted")

    await kv.put("bob.size", b"L")
    assert sorted(await kv.keys()) == ["bob.color", "bob.size", "sue.color"]
    assert sorted(await kv.keys(filters=["color"])) == ["bob.color", "sue.color"]

    hist = await kv.history("sue.color")
    assert [e.value for e in hist] == [b"blue", b"green"]

    assert await kv.delete("bob.size")
    try:
        await kv.get("bob.size")
    except KeyNotFoundError as e:
        assert isinstance(e, KeyDeletedError) or e.op == KV_DEL
    else:
        raise AssertionError("deleted key still readable")

    await kv.purge("bob.color")
    try:
        await kv.get("bob.color")
    except KeyNotFoundError:
        pass

    try:
        await kv.get("nobody")
    except KeyNotFoundError:
        pass
    else:
        raise AssertionError("missing key found")

    watcher = await kv.watchall()
    seen = []
    while True:
        e = await watcher.updates(timeout=2)
        if e is None:
            break
        seen.append((e.key, e.operation))
    assert [op for key, op in seen if key == "sue.color"] not in ([KV_DEL], [KV_PURGE])
    assert ("bob.color", KV_PURGE) in seen
    await kv.put("sue.color", b"yellow")
    e = await watcher.updates(timeout=2)
    assert e.key == "sue.color" and e.value == b"yellow" and e.delta == 0
    await watcher.stop()

    keywatch = await kv.watch("sue.*", include_history=True)
    first = await keywatch.updates(timeout=2)
    assert first.value == b"blue"
    await keywatch.stop()

    assert await kv.purge_deletes(olderthan=-1)

    status = await kv.status()
    assert status.bucket == "profiles"
    assert status.history == 5
    assert status.values >= 1
    assert status.ttl in (None, 0)
    assert not status.marker_ttl

    kv2 = await js.key_value("profiles")
    assert (await kv2.get("sue.color")).value == b"yellow"

    await js.add_stream(name="KV_plain", subjects=["plain.>"])
    try:
        await js.key_value("plain")
    except BadBucketError:
        pass
    else:
        raise AssertionError("a plain stream is not a bucket")

    assert await js.delete_key_value("profiles") is True
    try:
        await js.key_value("profiles")
    except BucketNotFoundError:
        pass
    else:
        raise AssertionError("deleted bucket found")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
