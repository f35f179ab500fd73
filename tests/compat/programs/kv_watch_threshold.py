"""A watch's ``inactive_threshold=0`` (or None) means nats-py's default, five minutes,
for the consumer behind the watch: not the server's default for a zero, five seconds."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="THRESHOLD")
    for i, (given, expected) in enumerate(((0, 300.0), (None, 300.0), (2.5, 2.5))):
        watcher = await kv.watch(f"k{i}", inactive_threshold=given)
        infos = await js.consumers_info("KV_THRESHOLD")
        mine = [info.config.inactive_threshold for info in infos
                if info.config.filter_subject == f"$KV.THRESHOLD.k{i}"]
        assert mine == [expected], (given, mine)
        await watcher.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
