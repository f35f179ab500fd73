"""pull_subscribe_bind and PullSubscription as nats-py has them: the stream-name text,
the buffer counters, a fetch after unsubscribe() timing out, and a name/durable_name
mismatch refused by the server (error 10017)."""

import asyncio
import os

import nats
from nats.errors import TimeoutError
from nats.js.errors import BadRequestError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="BIND", subjects=["bind.>"])
    await js.add_consumer("BIND", durable_name="worker")
    for i in range(3):
        await js.publish("bind.a", str(i).encode())

    try:
        await js.pull_subscribe_bind("worker")
        raise AssertionError("bound without a stream")
    except ValueError as exc:
        assert str(exc) == "nats: stream name is required", str(exc)

    sub = await js.pull_subscribe_bind("worker", stream="BIND")
    assert sub.pending_msgs == 0 and sub.pending_bytes == 0
    msgs = await sub.fetch(2, timeout=5)
    assert [m.data for m in msgs] == [b"0", b"1"]
    for m in msgs:
        await m.ack()
    assert sub.delivered == 2, sub.delivered

    await sub.unsubscribe()
    try:
        await sub.fetch(1, timeout=0.5)
        raise AssertionError("a fetch after unsubscribe() returned a message")
    except TimeoutError:
        pass
    info = await js.consumer_info("BIND", "worker")
    assert info.num_pending == 1, info.num_pending  # the last message is still there

    try:
        await js.add_consumer("BIND", name="one", durable_name="other")
        raise AssertionError("name and durable_name that differ were taken")
    except BadRequestError as exc:
        assert exc.err_code == 10017, exc
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
