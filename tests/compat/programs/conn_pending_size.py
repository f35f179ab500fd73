"""A publish that takes the write buffer past ``pending_size`` sends it before returning."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL, pending_size=1024)
    sub = await nc.subscribe("pending.size")
    await nc.flush()

    # Under the limit: buffered, sent later by the flusher.
    await nc.publish("pending.size", b"s" * 100)
    # Past it: written to the socket before publish returns.
    for _ in range(20):
        await nc.publish("pending.size", b"x" * 2000)
        assert nc.pending_data_size == 0, nc.pending_data_size

    got = [await sub.next_msg(timeout=5) for _ in range(21)]
    assert [len(m.data) for m in got] == [100] + [2000] * 20
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
