"""Per-key TTLs on a bucket made with the defaults (nats-py makes buckets that allow them)."""

import asyncio
import os
import warnings

import nats
from nats.js.errors import KeyNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="sessions")
    await kv.create("short", b"x", msg_ttl=3)  # read back below before it goes, also on a loaded machine
    await kv.create("long", b"y", msg_ttl=3600)
    assert (await kv.get("short")).value == b"x"
    gone = False
    for _ in range(150):  # bounded: about 15 s
        try:
            await kv.get("short")
        except KeyNotFoundError:
            gone = True
            break
        await asyncio.sleep(0.1)
    assert gone, "the key outlived its TTL"
    assert (await kv.get("long")).value == b"y"
    # nats-py 2.16 ignores a TTL on a delete marker, with a DeprecationWarning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await kv.delete("long", msg_ttl=3600)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    await kv.purge("long", msg_ttl=3600)
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
