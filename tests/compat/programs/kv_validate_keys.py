"""KV validate_keys: invalid keys are refused before anything is sent; with
validate_keys=False the key goes to the server as it is."""

import asyncio
import os

import nats
from nats.js.api import KeyValueConfig
from nats.js.errors import InvalidKeyError, KeyNotFoundError, KeyWrongLastSequenceError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    kv = await js.create_key_value(KeyValueConfig(bucket="vk", history=3))

    for bad in ("user@example.com", ".lead", "trail.", "", "sp ace"):
        for call in (
            lambda k=bad: kv.put(k, b"x"),
            lambda k=bad: kv.get(k),
            lambda k=bad: kv.create(k, b"x"),
            lambda k=bad: kv.update(k, b"x", last=1),
            lambda k=bad: kv.delete(k),
        ):
            try:
                await call()
            except InvalidKeyError:
                pass
            else:
                raise AssertionError(f"key {bad!r} must be refused")
    # Nothing reached the bucket.
    assert (await kv.status()).values == 0

    # The same key, unchecked: the server takes it (its subject is a valid subject).
    key = "user@example.com"
    rev = await kv.put(key, b"one", validate_keys=False)
    assert rev == 1
    entry = await kv.get(key, validate_keys=False)
    assert entry.key == key and entry.value == b"one" and entry.revision == 1
    rev = await kv.update(key, b"two", last=1, validate_keys=False)
    assert rev == 2
    try:
        await kv.create(key, b"three", validate_keys=False)
    except KeyWrongLastSequenceError:
        pass
    else:
        raise AssertionError("create of an existing key must fail")
    await kv.delete(key, validate_keys=False)
    try:
        await kv.get(key, validate_keys=False)
    except KeyNotFoundError:
        pass
    else:
        raise AssertionError("a deleted key is not found")
    rev = await kv.create(key, b"again", validate_keys=False)
    assert rev == 4
    assert (await kv.get(key, revision=2, validate_keys=False)).value == b"two"
    assert key in await kv.keys()

    # validate_keys=True is the default and accepts the valid alphabet.
    await kv.put("a-b_c=d/e.f", b"ok", validate_keys=True)
    assert (await kv.get("a-b_c=d/e.f")).value == b"ok"

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
