"""A message whose header block holds no header (an empty dict of headers, as
nats-py and nats.go publish it) is read as having no headers: None."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    sub = await nc.subscribe("empty.>")
    await nc.publish("empty.core", b"x", headers={})
    msg = await sub.next_msg(timeout=5)
    assert msg.headers is None, msg.headers
    assert msg.header is None

    js = nc.jetstream()
    await js.add_stream(name="EMPTYHDR", subjects=["stored.>"])
    await js.publish("stored.one", b"y", headers={})
    psub = await js.pull_subscribe("stored.one", "reader")
    (stored,) = await psub.fetch(1, timeout=5)
    assert stored.data == b"y" and stored.headers is None, stored.headers
    got = await js.get_msg("EMPTYHDR", 1)
    assert got.data == b"y" and got.headers is None, got.headers
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
