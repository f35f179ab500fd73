"""A bucket history over 64 raises KeyHistoryTooLargeError, by keyword or config."""

import asyncio
import os

import nats
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyHistoryTooLargeError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    for attempt in (lambda: js.create_key_value(bucket="HIST", history=65),
                    lambda: js.create_key_value(KeyValueConfig(bucket="HIST", history=65))):
        try:
            await attempt()
        except KeyHistoryTooLargeError:
            pass
        else:
            raise AssertionError("history 65 accepted")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
