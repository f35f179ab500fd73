"""A slow consumer: SlowConsumerError reaches error_cb with the subject (nats-py once per
dropped message, natsjs_sync once per episode); code that takes it as a signal, not as a
count of dropped messages, runs on both clients."""

import asyncio
import os

import nats
from nats.errors import SlowConsumerError

URL = os.environ["NATS_URL"]


async def main():
    slow_subjects = set()
    reports = []

    async def error_cb(e):
        if isinstance(e, SlowConsumerError):
            reports.append(e)
            slow_subjects.add(e.subject)  # a signal: this subscription drops messages

    nc = await nats.connect(URL, error_cb=error_cb)

    async def handler(msg):
        for _ in range(400):  # hold the subscription up until it has dropped some
            if reports:
                return
            await asyncio.sleep(0.05)

    await nc.subscribe("slow", cb=handler, pending_msgs_limit=5)
    for i in range(20):
        await nc.publish("slow", b"%d" % i)
    await nc.flush()
    for _ in range(400):
        if reports:
            break
        await asyncio.sleep(0.05)

    assert slow_subjects == {"slow"}, slow_subjects
    assert 1 <= len(reports) < 20, len(reports)  # a count of nothing portable
    assert all("slow" in str(e) for e in reports)
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
