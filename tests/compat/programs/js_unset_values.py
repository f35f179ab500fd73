"""Values the server did not send read as None, not 0: APIStats.level of a reply
without one, KeyValue status marker_ttl of a bucket without limit markers."""

import asyncio
import os

import nats
from nats.js.api import APIStats

URL = os.environ["NATS_URL"]


async def main():
    stats = APIStats.from_response({"total": 1, "errors": 0})
    assert stats.level is None, stats.level
    assert (stats.total, stats.errors) == (1, 0)

    nc = await nats.connect(URL)
    js = nc.jetstream()
    assert isinstance((await js.account_info()).api.level, int)
    kv = await js.create_key_value(bucket="UNSET")
    status = await kv.status()
    assert status.marker_ttl is None, status.marker_ttl
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
