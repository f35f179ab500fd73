"""Key-value errors as nats-py raises them (texts, the server's description) and
watch()/watchall() with nats-py's inactive_threshold and headers_only."""

import asyncio
import os

import nats
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="TEXTS", history=5)

    try:
        await kv.get("missing")
        raise AssertionError("got a missing key")
    except KeyNotFoundError as exc:
        assert str(exc) == "nats: key not found", str(exc)

    await kv.put("age", b"1")
    await kv.delete("age")
    try:
        await kv.get("age")
        raise AssertionError("got a deleted key")
    except KeyNotFoundError as exc:
        assert str(exc) == "nats: key not found", str(exc)
        assert exc.op == "DEL"

    rev = await kv.put("name", b"x")
    try:
        await kv.get("age", revision=rev)  # a revision of another key
        raise AssertionError("got another key's revision")
    except KeyNotFoundError as exc:
        assert str(exc) == "nats: key not found: expected '$KV.TEXTS.age', but got '$KV.TEXTS.name'", str(exc)
    try:
        await kv.create("name", b"y")
        raise AssertionError("created an existing key")
    except KeyWrongLastSequenceError as exc:
        assert exc.description.startswith("wrong last sequence"), exc.description
        assert str(exc) == f"nats: {exc.description}", str(exc)
    try:
        await kv.update("name", b"z", last=1)
        raise AssertionError("updated at a wrong revision")
    except KeyWrongLastSequenceError as exc:
        assert exc.description == "wrong last sequence: 3", exc.description
        assert str(exc) == "nats: wrong last sequence: 3", str(exc)

    w = await kv.watch("name", headers_only=True, inactive_threshold=30)
    entry = await w.updates(timeout=5)
    assert entry.key == "name", entry  # headers_only changes nothing in nats-py (meta_only does)
    await w.stop()
    w = await kv.watchall(inactive_threshold=30)
    entry = await w.updates(timeout=5)
    assert entry.key in ("age", "name"), entry
    await w.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
