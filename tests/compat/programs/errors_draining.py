"""A callback still running while the client drains may not subscribe: nats-py
raises ConnectionDrainingError."""

import asyncio
import os

import nats
from nats.errors import ConnectionDrainingError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    raised = []

    async def late(msg):
        for _ in range(500):
            if nc.is_draining:
                break
            await asyncio.sleep(0.01)
        try:
            await nc.subscribe("drain.late")
        except ConnectionDrainingError as e:
            raised.append(e)

    await nc.subscribe("drain.cb", cb=late)
    await nc.publish("drain.cb", b"")
    await nc.flush()
    await nc.drain()
    assert len(raised) == 1, raised


if __name__ == "__main__":
    asyncio.run(main())
