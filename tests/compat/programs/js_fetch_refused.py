"""A pull the server refuses with status 409 is "no messages yet" for fetch: it waits
out its timeout, then a batch of one raises TimeoutError and a larger batch returns
an empty list. Nothing raises the 409 itself (Exceeded MaxRequestBatch, Consumer
Deleted)."""

import asyncio
import json
import os
import time

import nats
from nats.errors import TimeoutError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="REFUSE", subjects=["refuse.>"])
    for _ in range(3):
        await js.publish("refuse.a", b"x")

    # nats-py's ConsumerConfig has no max_batch: make the consumer through the API.
    create = {"stream_name": "REFUSE", "config": {"durable_name": "small", "ack_policy": "explicit",
                                                  "max_batch": 2}}
    resp = await nc.request("$JS.API.CONSUMER.CREATE.REFUSE.small", json.dumps(create).encode(), timeout=5)
    assert b'"error"' not in resp.data, resp.data
    psub = await js.pull_subscribe_bind("small", stream="REFUSE")

    # Exceeded MaxRequestBatch: an empty list once the timeout has passed.
    start = time.monotonic()
    msgs = await psub.fetch(3, timeout=1)
    assert msgs == [], msgs
    assert time.monotonic() - start >= 0.5
    # Within the limit the same subscription works.
    (m,) = await psub.fetch(1, timeout=2)
    assert m.data == b"x"

    # Consumer Deleted while a fetch of one waits: TimeoutError at the deadline.
    await js.add_stream(name="GONE", subjects=["gone.>"])
    gsub = await js.pull_subscribe("gone.>", "doomed", stream="GONE")
    deleted = []

    async def delete_when_waiting(msg):
        for _ in range(200):
            info = await js.consumer_info("GONE", "doomed")
            if info.num_waiting:
                break
            await asyncio.sleep(0.01)
        deleted.append(await js.delete_consumer("GONE", "doomed"))

    await nc.subscribe("trigger", cb=delete_when_waiting)
    await nc.publish("trigger", b"")
    start = time.monotonic()
    try:
        await gsub.fetch(1, timeout=2)
    except TimeoutError:
        pass
    else:
        raise AssertionError("fetch from a deleted consumer returned messages")
    assert time.monotonic() - start >= 1.0
    for _ in range(500):  # the callback may still be finishing
        if deleted:
            break
        await asyncio.sleep(0.01)
    assert deleted == [True], deleted

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
