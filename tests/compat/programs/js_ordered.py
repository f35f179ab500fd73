"""An ordered push consumer with idle heartbeats and flow control."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="TICKS", subjects=["ticks.>"])
    for i in range(20):
        await js.publish(f"ticks.{i % 3}", str(i).encode())

    sub = await js.subscribe("ticks.>", ordered_consumer=True, idle_heartbeat=1.0, flow_control=True)
    got = []
    for _ in range(20):
        msg = await sub.next_msg(timeout=3)
        got.append(int(msg.data))
    assert got == list(range(20))
    info = await sub.consumer_info()
    assert info.name
    assert info.num_pending == 0
    await sub.unsubscribe()

    # With a callback.
    seen = []
    done = asyncio.Event()

    async def cb(msg):
        seen.append(int(msg.data))
        if len(seen) == 7:
            done.set()

    csub = await js.subscribe("ticks.1", cb=cb, ordered_consumer=True)
    for _ in range(100):
        if done.is_set():
            break
        await asyncio.sleep(0.05)
    assert seen == list(range(1, 20, 3))
    await csub.unsubscribe()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
