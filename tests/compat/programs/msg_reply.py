"""msg.reply: "" when the sender expects no answer, the inbox when it does; in callbacks,
next_msg, iteration over sub.messages, and on JetStream messages read from a stream."""

import asyncio
import os

import nats
from nats.aio.msg import Msg

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)

    seen = []
    done = asyncio.Event()

    async def cb(msg):
        seen.append(msg.reply)
        if len(seen) == 3:
            done.set()

    await nc.subscribe("r.cb", cb=cb)
    await nc.publish("r.cb", b"plain")
    await nc.publish("r.cb", b"with headers", headers={"A": "1"})
    await nc.publish("r.cb", b"asks", reply="r.answer")
    await nc.flush()
    for _ in range(100):
        if done.is_set():
            break
        await asyncio.sleep(0.05)
    assert seen == ["", "", "r.answer"], seen
    assert isinstance(seen[0], str)

    # A batch large enough to cross several socket reads, with and without replies.
    sub = await nc.subscribe("r.many")
    for i in range(200):
        await nc.publish("r.many", b"x" * i, reply="r.back" if i % 3 == 0 else "")
    await nc.flush()
    replies = [(await sub.next_msg(timeout=2)).reply for _ in range(200)]
    assert replies == ["r.back" if i % 3 == 0 else "" for i in range(200)]

    # Iterating sub.messages.
    it = await nc.subscribe("r.iter", max_msgs=1)
    await nc.publish("r.iter", b"one")
    async for msg in it.messages:
        assert msg.reply == ""
        assert isinstance(msg, Msg)

    # A request's reply subject is an inbox; the response has none.
    async def responder(msg):
        assert msg.reply.startswith("_INBOX.")
        await msg.respond(b"ok")

    await nc.subscribe("r.svc", cb=responder)
    resp = await nc.request("r.svc", b"?", timeout=2)
    assert resp.data == b"ok" and resp.reply == ""

    # JetStream: pulled messages carry their ack subject; a message read back
    # from the stream by sequence has no reply subject.
    js = nc.jetstream()
    await js.add_stream(name="RPLY", subjects=["rply.>"])
    await js.publish("rply.a", b"1")
    psub = await js.pull_subscribe("rply.>", "rc")
    (m,) = await psub.fetch(1, timeout=2)
    assert m.reply.startswith("$JS.ACK.RPLY.rc.")
    await m.ack()

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
