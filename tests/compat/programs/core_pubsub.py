"""Core messaging: publish, subscribe with and without a callback, request/reply, headers."""

import asyncio
import os

import nats
from nats.errors import NoRespondersError, TimeoutError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL, name="core-pubsub")
    assert nc.is_connected

    received = []
    done = asyncio.Event()

    async def handler(msg):
        received.append((msg.subject, msg.data))
        if len(received) == 3:
            done.set()

    await nc.subscribe("greet.*", cb=handler)
    for who in ("joe", "sue", "bob"):
        await nc.publish(f"greet.{who}", f"hello {who}".encode())
    await nc.flush()
    for _ in range(100):
        if done.is_set():
            break
        await asyncio.sleep(0.05)
    assert received == [("greet.joe", b"hello joe"), ("greet.sue", b"hello sue"), ("greet.bob", b"hello bob")]

    # A subscription without a callback, read with next_msg; no reply subject means "".
    sub = await nc.subscribe("updates")
    await nc.publish("updates", b"one", headers={"Trace": "abc"})
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"one"
    assert not msg.reply
    assert msg.headers == {"Trace": "abc"}
    assert msg.header == {"Trace": "abc"}
    try:
        await sub.next_msg(timeout=0.1)
    except TimeoutError:
        pass
    else:
        raise AssertionError("next_msg should time out")
    await sub.unsubscribe()

    # Request / reply.
    async def responder(msg):
        await msg.respond(msg.data.upper())

    await nc.subscribe("svc.upper", "workers", cb=responder)
    resp = await nc.request("svc.upper", b"shout", timeout=2)
    assert resp.data == b"SHOUT"

    try:
        await nc.request("svc.nobody", b"", timeout=1)
    except NoRespondersError:
        pass
    else:
        raise AssertionError("expected NoRespondersError")

    # unsubscribe with a limit: the subscription ends after that many messages.
    limited = await nc.subscribe("limited")
    await limited.unsubscribe(limit=2)
    for i in range(5):
        await nc.publish("limited", str(i).encode())
    await nc.flush()
    got = [(await limited.next_msg(timeout=2)).data for _ in range(2)]
    assert got == [b"0", b"1"]

    assert nc.stats["out_msgs"] >= 5
    assert nc.stats["in_msgs"] >= 5
    assert nc.max_payload > 0
    assert nc.client_id is not None
    assert nc.connected_url.port > 0
    assert nc.connected_server_version.major >= 2
    assert nc.client_ip is not None
    assert not nc.is_closed

    await nc.drain()
    assert nc.is_closed


if __name__ == "__main__":
    asyncio.run(main())
