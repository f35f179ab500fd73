"""Server URLs a connect accepts and refuses."""

import asyncio
import os
from urllib.parse import urlparse

import nats
from nats.aio.client import Client as NATS
from nats.errors import Error

URL = os.environ["NATS_URL"]
PORT = urlparse(URL).port


async def refused(**kwargs):
    nc = NATS()
    try:
        await nc.connect(**kwargs)
    except Error as e:
        return e
    raise AssertionError(f"connect({kwargs}) must be refused")


async def main():
    # The forms of one server: a URL, host:port, a list.
    for servers in (URL, f"127.0.0.1:{PORT}", [URL]):
        nc = await nats.connect(servers)
        assert nc.connected_url.port == PORT
        await nc.close()

    # nats:// and tls:// go together (the first one answers here).
    nc = await nats.connect([URL, "tls://127.0.0.1:1"], dont_randomize=True)
    assert sorted(s.scheme for s in nc.servers) == ["nats", "tls"]
    await nc.close()

    # WebSocket and TCP servers do not mix, and a bad port is no URL: both refused
    # before any connect, with the client's base error.
    await refused(servers=[URL, "ws://127.0.0.1:1"], allow_reconnect=False)
    await refused(servers=["ws://127.0.0.1:1", URL], allow_reconnect=False)
    await refused(servers="nats://127.0.0.1:port", allow_reconnect=False)
    await refused(servers=f"nats://127.0.0.1:{PORT}0000", allow_reconnect=False)


if __name__ == "__main__":
    asyncio.run(main())
