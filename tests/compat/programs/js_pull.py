"""Pull consumers: pull_subscribe, fetch, bind, filter_subjects, metadata and acks."""

import asyncio
import os
import time

import nats
from nats.errors import TimeoutError
from nats.js.api import ConsumerConfig

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="JOBS", subjects=["jobs.>"])
    for i in range(10):
        await js.publish(f"jobs.{'even' if i % 2 == 0 else 'odd'}", f"job {i}".encode())

    psub = await js.pull_subscribe("jobs.>", "workers")
    msgs = await psub.fetch(3, timeout=2)
    assert [m.data for m in msgs] == [b"job 0", b"job 1", b"job 2"]
    for m in msgs:
        assert m.metadata.stream == "JOBS"
        assert m.metadata.num_delivered == 1
        await m.ack()
    assert msgs[0].metadata.sequence.stream == 1
    assert msgs[2].metadata.sequence.consumer == 3

    # Fewer available than asked: what there is comes back promptly.
    start = time.monotonic()
    msgs = await psub.fetch(100, timeout=10)
    assert len(msgs) == 7
    assert time.monotonic() - start < 5, "fetch waited for a full batch"
    for m in msgs:
        await m.ack_sync()

    try:
        await psub.fetch(1, timeout=0.5)
    except TimeoutError:
        pass
    else:
        raise AssertionError("fetch with nothing pending must raise TimeoutError")

    info = await psub.consumer_info()
    assert info.num_ack_pending == 0
    assert info.delivered.consumer_seq == 10
    # The timed-out fetch's request waits on the server until it expires there
    # (on the server's clock): let it end, or the next message could go to it.
    for _ in range(100):
        if info.num_waiting == 0:
            break
        await asyncio.sleep(0.05)
        info = await psub.consumer_info()
    assert info.num_waiting == 0

    # Bind to the existing durable.
    bound = await js.pull_subscribe_bind("workers", stream="JOBS")
    await js.publish("jobs.odd", b"late")
    msgs = await bound.fetch(1, timeout=2)
    assert msgs[0].data == b"late"
    await msgs[0].nak(delay=0.1)
    msgs = await bound.fetch(1, timeout=5)
    assert msgs[0].data == b"late" and msgs[0].metadata.num_delivered == 2
    await msgs[0].term()

    # A consumer filtering on several subjects.
    fsub = await js.pull_subscribe("", "evens", stream="JOBS",
                                   config=ConsumerConfig(filter_subjects=["jobs.even"]))
    msgs = await fsub.fetch(10, timeout=2)
    assert [m.data for m in msgs] == [f"job {i}".encode() for i in range(0, 10, 2)]
    for m in msgs:
        await m.in_progress()
        await m.ack()

    # Ephemeral pull subscription.
    eph = await js.pull_subscribe("jobs.odd", durable=None, stream="JOBS")
    msgs = await eph.fetch(2, timeout=2)
    assert [m.data for m in msgs] == [b"job 1", b"job 3"]
    await eph.unsubscribe()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
