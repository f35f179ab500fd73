"""nats-py's two-step connect() with a tls:// URL to a server without TLS: TLS is used
when the server requires it, so this server is reached in plain text."""

import asyncio
import os

from nats.aio.client import Client as NATS

URL = os.environ["NATS_URL"]


async def main():
    nc = NATS()
    await nc.connect([URL.replace("nats://", "tls://")], allow_reconnect=False, connect_timeout=5)
    assert nc.is_connected
    sub = await nc.subscribe("tls.scheme")
    await nc.publish("tls.scheme", b"plain")
    assert (await sub.next_msg(timeout=2)).data == b"plain"
    assert nc.connected_url.scheme == "tls"
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
