"""The tour of nats-py's JetStream example: publish, pull one by one, ephemeral,
durable and queue push subscribers, and an ordered consumer read to the end."""

import asyncio
import os

import nats
from nats.errors import TimeoutError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="sample-stream", subjects=["foo"])

    for i in range(10):
        ack = await js.publish("foo", f"hello world: {i}".encode())
        assert ack.stream == "sample-stream" and ack.seq == i + 1
        assert "sample-stream" in repr(ack)

    psub = await js.pull_subscribe("foo", "psub")
    seen = []
    for _ in range(10):
        msgs = await psub.fetch(1)
        for msg in msgs:
            assert "foo" in repr(msg)
            seen.append(msg.data)
            await msg.ack()
    assert seen == [f"hello world: {i}".encode() for i in range(10)]

    # Reads that must get a message wait longer than next_msg's default (1 s): a loaded machine
    # can take that long.
    sub = await js.subscribe("foo")
    msg = await sub.next_msg(timeout=10)
    assert msg.data == b"hello world: 0"
    await msg.ack()

    sub = await js.subscribe("foo", durable="myapp")
    msg = await sub.next_msg(timeout=10)
    await msg.ack()
    assert (await sub.consumer_info()).name == "myapp"

    got = {"a": 0, "b": 0}
    done = asyncio.Event()

    def counter(name):
        async def cb(msg):
            got[name] += 1
            await msg.ack()
            if got["a"] + got["b"] == 20:
                done.set()
        return cb

    await js.subscribe("foo", "workers", cb=counter("a"))
    await js.subscribe("foo", "workers", cb=counter("b"))
    for i in range(10):
        await js.publish("foo", f"hello world: {i}".encode())
    for _ in range(200):
        if done.is_set():
            break
        await asyncio.sleep(0.05)
    # The group's consumer delivers all 20 stored messages, each to one member.
    assert got["a"] + got["b"] == 20, got

    osub = await js.subscribe("foo", ordered_consumer=True)
    data = bytearray()
    for _ in range(20):
        msg = await osub.next_msg(timeout=10)
        data.extend(msg.data)
    try:
        msg = await osub.next_msg(timeout=0.5)
    except TimeoutError:
        pass  # the end: no 21st message
    else:
        raise AssertionError(f"a message past the 20 stored: {msg.data!r}")
    assert len(data) == 2 * sum(len(f"hello world: {i}") for i in range(10))

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
