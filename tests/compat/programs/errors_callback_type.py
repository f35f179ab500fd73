"""A callback that is not a function is refused with nats-py's classes: subscribe
raises nats.errors.Error, connect raises InvalidCallbackTypeError (a callable is
what both clients want; nats-py also wants it to be a coroutine function)."""

import asyncio
import os

import nats
from nats.errors import Error, InvalidCallbackTypeError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    for bad in (42, "cb"):
        try:
            await nc.subscribe("cb.bad", cb=bad)
        except Error:
            pass
        else:
            raise AssertionError(f"cb={bad!r} accepted")
    try:
        await nats.connect(URL, error_cb=42)
    except InvalidCallbackTypeError:
        pass
    else:
        raise AssertionError("error_cb=42 accepted")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
