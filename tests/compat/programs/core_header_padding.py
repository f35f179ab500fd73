"""Header names with blanks around them are sent without the padding, as nats-py sends them."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    sub = await nc.subscribe("padded")
    await nc.publish("padded", b"x", headers={" X-Padded ": "v", "Plain": "w"})
    msg = await sub.next_msg(timeout=5)
    assert msg.headers["X-Padded"] == "v", msg.headers
    assert msg.headers["Plain"] == "w", msg.headers
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
