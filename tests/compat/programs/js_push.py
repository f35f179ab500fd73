"""Push consumers: durable, queue groups, callbacks, manual acks, bind, sub.messages."""

import asyncio
import os

import nats
from nats.errors import TimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="FEED", subjects=["feed.*"])
    for i in range(6):
        await js.publish("feed.items", f"item {i}".encode())

    # Durable push consumer read with next_msg.
    sub = await js.subscribe("feed.items", durable="reader")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"item 0"
    await msg.ack()
    info = await sub.consumer_info()
    assert info.name == "reader"
    await sub.unsubscribe()

    # Bind to a push consumer made beforehand.
    made = await js.add_consumer("FEED", ConsumerConfig(durable_name="bound", deliver_subject=nc.new_inbox(),
                                                        ack_policy=AckPolicy.EXPLICIT))
    bound = await js.subscribe_bind(stream="FEED", consumer="bound", config=made.config)
    msg = await bound.next_msg(timeout=2)
    assert msg.data == b"item 0"
    await msg.ack()
    await bound.unsubscribe()

    # A callback with automatic acks, in a queue group.
    seen = []
    done = asyncio.Event()

    async def worker(msg):
        seen.append(msg.data)
        if len(seen) == 6:
            done.set()

    qsub = await js.subscribe("feed.items", queue="workers", cb=worker)
    for _ in range(100):
        if done.is_set():
            break
        await asyncio.sleep(0.05)
    assert sorted(seen) == sorted(f"item {i}".encode() for i in range(6))
    await qsub.unsubscribe()

    # Manual acks with a deliver policy, iterating sub.messages.
    await js.publish("feed.news", b"headline")
    news = await js.subscribe("feed.news", deliver_policy=DeliverPolicy.LAST, manual_ack=True)
    async for msg in news.messages:
        assert msg.data == b"headline"
        assert msg.metadata.sequence.stream == 7
        await msg.ack()
        break
    try:
        await news.next_msg(timeout=0.2)
    except TimeoutError:
        pass
    else:
        raise AssertionError("only one news message")
    await news.unsubscribe()

    # Ephemeral consumer with opt_start_seq.
    tail = await js.subscribe("feed.items", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                              config=ConsumerConfig(opt_start_seq=5), inactive_threshold=5.0)
    msg = await tail.next_msg(timeout=2)
    assert msg.data == b"item 4"
    await tail.unsubscribe()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
