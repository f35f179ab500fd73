"""pull_subscribe_bind asks the server nothing, so a consumer that does not exist
shows when fetching: nobody serves the pull, ServiceUnavailableError (an APIError)."""

import asyncio
import os

import nats
from nats.js.errors import APIError, ServiceUnavailableError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="MISSING", subjects=["missing.>"])
    sub = await js.pull_subscribe_bind("nobody", stream="MISSING")
    try:
        await sub.fetch(1, timeout=2)
        raise AssertionError("fetched from a consumer that does not exist")
    except ServiceUnavailableError as exc:
        assert isinstance(exc, APIError), type(exc).__mro__
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
