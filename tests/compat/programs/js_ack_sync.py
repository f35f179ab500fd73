"""msg.ack_sync(): waits for the server's confirmation and returns it (a message on
the request's inbox with no payload), not the acked message; a second ack of any
kind raises MsgAlreadyAckdError."""

import asyncio
import os

import nats
from nats.aio.msg import Msg
from nats.errors import MsgAlreadyAckdError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="ACKS", subjects=["acks.>"])
    await js.publish("acks.a", b"1")
    psub = await js.pull_subscribe("acks.>", "proc")

    (m,) = await psub.fetch(1, timeout=2)
    confirmation = await m.ack_sync()
    assert isinstance(confirmation, Msg), confirmation
    assert confirmation is not m
    assert confirmation.data == b"" and confirmation.reply == ""
    assert confirmation.subject.startswith("_INBOX."), confirmation.subject

    await js.publish("acks.a", b"2")
    (m,) = await psub.fetch(1, timeout=2)
    assert (await m.ack_sync(timeout=2)).data == b""
    try:
        await m.ack_sync()
    except MsgAlreadyAckdError:
        pass
    else:
        raise AssertionError("second ack_sync accepted")

    # Nothing is redelivered: both acks were confirmed.
    try:
        await psub.fetch(1, timeout=0.5)
    except nats.errors.TimeoutError:
        pass
    else:
        raise AssertionError("an acked message came back")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
