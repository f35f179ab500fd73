"""A publish that must arrive, confirmed with flush(), when the connection is lost with it
on the wire: natsjs_sync's next flush says it may not have arrived, and the pattern below
publishes it again; nats-py's flush returns. The same code runs on both clients."""

import asyncio
import os

import nats
from nats.errors import ConnectionClosedError

from natsjs_sync.testing.faultproxy import FaultProxy

URL = os.environ["NATS_URL"]


async def publish_confirmed(nc, subject, data, attempts=5):
    """Publish until a flush confirms it (natsjs_sync may deliver it twice then)."""
    for _ in range(attempts):
        await nc.publish(subject, data)
        try:
            await nc.flush(timeout=10)
            return
        except ConnectionClosedError:
            raise
        except ConnectionError:  # natsjs_sync: lost with a connection, maybe: again
            continue
    raise RuntimeError(f"{subject}: no flush confirmed it")


async def wait_for(condition):
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in 20 s")


async def main():
    watcher = await nats.connect(URL)
    sub = await watcher.subscribe("must")
    await watcher.flush()

    reconnects = []

    async def reconnected_cb():
        reconnects.append(True)

    with FaultProxy(URL) as proxy:
        nc = await nats.connect(proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1,
                                reconnected_cb=reconnected_cb)
        await nc.flush()
        proxy.blackhole("to_server")
        await nc.publish("must", b"swallowed")
        await wait_for(lambda: proxy.client_frames("PUB") >= 1)  # on the wire, held there
        proxy.cut()  # and lost with the connection
        proxy.heal()
        await wait_for(lambda: reconnects and nc.is_connected)

        await publish_confirmed(nc, "must", b"again")
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"again", msg.data
        await nc.flush(timeout=10)  # vouches again
        await nc.close()
    await watcher.close()


if __name__ == "__main__":
    asyncio.run(main())
