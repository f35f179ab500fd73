"""The two-step NATS() then connect(), connection callbacks and a failed first connect."""

import asyncio
import os

from nats.aio.client import Client as NATS
from nats.errors import ConnectionClosedError, NoServersError

URL = os.environ["NATS_URL"]


async def main():
    events = []

    async def disconnected_cb():
        events.append("disconnected")

    async def reconnected_cb():
        events.append("reconnected")

    async def closed_cb():
        events.append("closed")

    async def error_cb(e):
        events.append(("error", type(e).__name__))

    nc = NATS()
    assert not nc.is_connected
    assert nc.is_closed is False
    await nc.connect(
        servers=[URL],
        name="two-step",
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        closed_cb=closed_cb,
        dont_randomize=True,
        flush_timeout=2,
        reconnect_time_wait=0.2,
    )
    assert nc.is_connected
    assert [s.port for s in nc.servers] == [int(URL.rsplit(":", 1)[1])]
    assert nc.discovered_servers == []

    # force_reconnect moves to a server of the pool; reconnected_cb follows.
    await nc.force_reconnect()
    for _ in range(100):
        if "reconnected" in events:
            break
        await asyncio.sleep(0.05)
    assert "reconnected" in events, events
    assert nc.stats["reconnects"] == 1

    await nc.close()
    assert nc.is_closed
    assert "closed" in events
    assert events.count("disconnected") == 2, events

    try:
        await nc.publish("foo", b"bar")
    except ConnectionClosedError:
        pass
    else:
        raise AssertionError("publish after close must fail")

    # A failed first connect: the client object stays usable for inspection.
    errors = []

    async def failing_error_cb(e):
        errors.append(e)

    nc2 = NATS()
    try:
        # (nats-py keeps retrying a failed first connect with allow_reconnect=False:
        # a bounded number of attempts is how a nats-py program gives up.)
        await nc2.connect(servers=["nats://127.0.0.1:1"], error_cb=failing_error_cb,
                          connect_timeout=1, max_reconnect_attempts=1)
    except NoServersError:
        pass
    else:
        raise AssertionError("connect should fail")
    assert errors, "error_cb must hear of the failed connect"
    assert nc2.last_error is not None
    assert not nc2.is_connected


if __name__ == "__main__":
    asyncio.run(main())
