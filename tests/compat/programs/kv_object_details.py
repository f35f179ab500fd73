"""KV and object-store details: reading a deleted or purged key raises
KeyNotFoundError carrying the marker's entry and op ("DEL"/"PURGE"); object headers
come back as they were put (a single value stays a str); get(writeinto=) accepts a
text file (the bytes go to its buffer)."""

import asyncio
import os
import tempfile

import nats
from nats.js.api import ObjectMeta
from nats.js.errors import KeyNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    kv = await js.create_key_value(bucket="DETAILS", history=5)
    await kv.put("deleted", b"v")
    await kv.delete("deleted")
    await kv.put("purged", b"v")
    await kv.purge("purged")
    for key, op, revision in (("deleted", "DEL", 2), ("purged", "PURGE", 4)):
        try:
            await kv.get(key)
        except KeyNotFoundError as e:
            assert e.op == op, (key, e.op)
            assert e.entry is not None and e.entry.key == key and e.entry.revision == revision, e.entry
        else:
            raise AssertionError(f"{key} read")

    obs = await js.create_object_store("DETAILS")
    headers = {"A": "1", "B": ["x", "y"]}
    await obs.put("f", b"data", meta=ObjectMeta(name="f", headers=headers))
    assert (await obs.get_info("f")).headers == headers
    assert (await obs.get("f")).info.headers == headers

    with tempfile.TemporaryFile("w+") as text:
        await obs.get("f", writeinto=text)
        text.seek(0)
        assert text.read() == "data"

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
