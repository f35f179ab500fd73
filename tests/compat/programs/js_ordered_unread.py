"""An ordered consumer with idle heartbeats that nobody has read yet: its consumer,
deleted, is made anew from the next stream sequence, and the messages come once, in order."""

import asyncio
import os

import nats
from nats.js.errors import NotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="UNREAD", subjects=["unread.*"], storage="memory")
    for m in ["1", "2", "3"]:
        await js.publish("unread.1", m.encode())

    sub = await js.subscribe("unread.1", ordered_consumer=True, idle_heartbeat=0.5)
    orig_name = (await sub.consumer_info()).name
    await js.delete_consumer("UNREAD", orig_name)

    # Nobody reads: the missed heartbeats alone bring a new consumer (bounded wait).
    name = orig_name
    for _ in range(400):
        try:
            name = (await sub.consumer_info()).name
        except NotFoundError:
            name = orig_name
        if name != orig_name:
            break
        await asyncio.sleep(0.05)
    assert name != orig_name, "the deleted consumer was not made anew"

    await js.publish("unread.1", b"4")
    got = [(await sub.next_msg(timeout=5)).data for _ in range(4)]
    assert got == [b"1", b"2", b"3", b"4"], got
    await sub.unsubscribe()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
