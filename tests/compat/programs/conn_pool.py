"""The server pool: read it, replace it, reconnect from the new one."""

import asyncio
import os
from urllib.parse import urlparse

import nats
from nats.errors import ConnectionClosedError, Error

URL = os.environ["NATS_URL"]
PORT = urlparse(URL).port
DEAD = "nats://127.0.0.1:1"


async def until(condition):
    for _ in range(400):
        if condition():
            return True
        await asyncio.sleep(0.025)
    return False


async def main():
    reconnected = []

    async def on_reconnected():
        reconnected.append(True)

    async def on_error(e):
        pass

    nc = await nats.connect(URL, dont_randomize=True, reconnect_time_wait=0.1, connect_timeout=5,
                            reconnected_cb=on_reconnected, error_cb=on_error)
    pool = nc.server_pool
    assert [s.uri.port for s in pool] == [PORT] and pool[0].reconnects == 0
    pool[0].reconnects = 99  # a copy: the client's pool is not changed
    assert nc.server_pool[0].reconnects == 0

    # A new pool is for the next reconnect: the connection in use stays.
    nc.set_server_pool([DEAD, URL])
    assert sorted(s.uri.port for s in nc.server_pool) == sorted([1, PORT])
    assert sorted(u.port for u in nc.servers) == sorted([1, PORT])
    assert nc.is_connected and nc.connected_url.port == PORT

    # A bad URL changes nothing.
    try:
        nc.set_server_pool(["nats://127.0.0.1:port"])
    except Error:
        pass
    else:
        raise AssertionError("a bad URL must be refused")
    assert sorted(s.uri.port for s in nc.server_pool) == sorted([1, PORT])

    # The next reconnect chooses from it: the dead server fails, the live one answers.
    await nc.force_reconnect()
    assert await until(lambda: reconnected and nc.is_connected), "no reconnect"
    assert nc.connected_url.port == PORT
    await nc.flush()

    await nc.close()
    try:
        nc.set_server_pool([URL])
    except ConnectionClosedError:
        pass
    else:
        raise AssertionError("a closed client has no pool to set")


if __name__ == "__main__":
    asyncio.run(main())
