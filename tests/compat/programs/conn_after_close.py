"""A closed client connects again with connect(): requests, subscriptions and callbacks
work as on a new client; connect() on a connected client is refused."""

import asyncio
import os

import nats
from nats.aio.client import Client as NATS

URL = os.environ["NATS_URL"]


async def main():
    closed = []

    async def closed_cb():
        closed.append(True)

    nc = await nats.connect(URL, closed_cb=closed_cb)
    try:
        await nc.request("missing", timeout=1)
        raise AssertionError("no NoRespondersError")
    except nats.errors.NoRespondersError:
        pass
    await nc.close()
    assert nc.is_closed and closed == [True]

    await nc.connect(URL, closed_cb=closed_cb)
    assert nc.is_connected and not nc.is_closed
    try:
        await nc.request("missing", timeout=1)
        raise AssertionError("no NoRespondersError")
    except nats.errors.NoRespondersError:
        pass
    sub = await nc.subscribe("again")
    await nc.publish("again", b"hello")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"hello"
    await nc.close()
    assert nc.is_closed and closed == [True, True]

    # The two-step form, closed and connected again.
    nc = NATS()
    await nc.connect(URL)
    await nc.close()
    await nc.connect(URL)
    await nc.flush()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
