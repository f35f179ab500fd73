"""The end of a subscription: unsubscribe() after the message limit was reached
(max_msgs= or unsubscribe(limit=)) is accepted; a second unsubscribe(), a second
drain() and an unsubscribe() after drain() raise BadSubscriptionError."""

import asyncio
import os

import nats
from nats.errors import BadSubscriptionError

URL = os.environ["NATS_URL"]


async def refused(what, call):
    try:
        await call()
    except BadSubscriptionError:
        pass
    else:
        raise AssertionError(f"{what} accepted")


async def main():
    nc = await nats.connect(URL)

    sub = await nc.subscribe("end.max", max_msgs=1)
    await nc.publish("end.max", b"1")
    await sub.next_msg(timeout=2)
    await sub.unsubscribe()

    sub = await nc.subscribe("end.limit")
    await sub.unsubscribe(limit=1)
    await nc.publish("end.limit", b"1")
    await sub.next_msg(timeout=2)
    await sub.unsubscribe()

    got = []

    async def cb(msg):
        got.append(msg)

    sub = await nc.subscribe("end.cb", cb=cb, max_msgs=1)
    await nc.publish("end.cb", b"1")
    await nc.flush()
    for _ in range(200):
        if got:
            break
        await asyncio.sleep(0.01)
    assert len(got) == 1
    await sub.unsubscribe()
    await refused("drain after unsubscribe", sub.drain)

    sub = await nc.subscribe("end.twice")
    await sub.unsubscribe()
    await refused("second unsubscribe", sub.unsubscribe)

    sub = await nc.subscribe("end.drain")
    await sub.drain()
    await refused("second drain", sub.drain)
    await refused("unsubscribe after drain", sub.unsubscribe)

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
