"""A first connect that timed out, then close(); a server that timed out before the
next one worked; client_id and client_ip after close(); ServerVersion's parts."""

import asyncio
import os
import socket

from nats.aio.client import Client as NATS
from nats.aio.client import ServerVersion

URL = os.environ["NATS_URL"]


def silent_server():
    """A listener that takes the TCP connection and never sends INFO."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, f"nats://127.0.0.1:{sock.getsockname()[1]}"


async def main():
    silent, silent_url = silent_server()
    events = []

    async def disconnected_cb():
        events.append("disconnected")

    async def closed_cb():
        events.append("closed")

    errors = []

    async def error_cb(e):
        errors.append(e)

    # A first connect that timed out: close() still calls disconnected_cb, then closed_cb.
    nc = NATS()
    try:
        await nc.connect(servers=[silent_url], connect_timeout=0.5, allow_reconnect=False,
                         disconnected_cb=disconnected_cb, closed_cb=closed_cb)
        raise AssertionError("connected to a server that never spoke")
    except TimeoutError:
        pass
    await nc.close()
    assert events == ["disconnected", "closed"], events

    # The silent server first, then a working one: the timeout is reported to error_cb. (The
    # working one must connect within the same timeout: 0.5 s is in a loaded machine's reach.)
    events.clear()
    nc = NATS()
    await nc.connect(servers=[silent_url, URL], connect_timeout=2, dont_randomize=True,
                     error_cb=error_cb, disconnected_cb=disconnected_cb)
    assert nc.is_connected
    for _ in range(200):
        if errors:
            break
        await asyncio.sleep(0.05)
    assert len(errors) == 1 and isinstance(errors[0], TimeoutError), errors

    assert isinstance(nc.client_id, int) and nc.client_ip
    version = nc.connected_server_version
    assert version.major >= 2
    await nc.close()
    assert nc.client_id is None and nc.client_ip is None
    assert events == ["disconnected"], events
    silent.close()

    v = ServerVersion("2.11.1-beta+syn2")
    assert (v.major, v.minor, v.patch) == (2, 11, 1)
    assert (v.prerelease, v.build, v.dev) == ("beta", "syn2", "beta+syn2"), (v.prerelease, v.build, v.dev)
    assert ServerVersion("2.10.0-RC.1").dev == "RC.1"
    assert str(v) == repr(v) == "<nats server v2.11.1-beta+syn2>", str(v)
    try:
        major = ServerVersion("not-a-version").major
        raise AssertionError(f"a bad version string was parsed: {major}")
    except ValueError as exc:
        assert "is not a valid Semantic Version" in str(exc)


if __name__ == "__main__":
    asyncio.run(main())
