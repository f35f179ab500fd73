"""A group member written with natsio and natsio-pcgroups (Python 3.13+), for the interop tests.

Same arguments and records as ``member.py``, so one group can mix members of
both clients and the test checks them alike.
"""

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta


async def main() -> int:
    import natsio  # type: ignore[import-not-found]
    from natsio import pcgroups
    from natsio.jetstream import ConsumerConfig  # type: ignore[import-not-found]

    url, kind, stream, group, member, ack_wait = sys.argv[1:7]
    nc = await natsio.connect(*url.split(","))
    js = nc.jetstream()
    pid = os.getpid()
    subject = f"rec.{group}"

    async def handle(msg) -> None:  # type: ignore[no-untyped-def]
        md = msg.metadata
        rec = {"pid": pid, "member": member, "seq": md.stream_seq, "n": md.num_delivered, "subject": msg.subject,
               "id": int(msg.data)}
        await nc.publish(subject, json.dumps({"ev": "got", **rec}).encode())
        try:
            await msg.ack_sync(timeout=5.0)
        except Exception:
            return
        await nc.publish(subject, json.dumps({"ev": "acked", **rec}).encode())

    template = ConsumerConfig(ack_wait=timedelta(seconds=float(ack_wait)), max_ack_pending=1)
    consume = pcgroups.static_consume if kind == "static" else pcgroups.elastic_consume
    ctx = await consume(js, stream, group, member, handle, template)
    print("READY", flush=True)
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()
    await ctx.stop()
    await nc.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
