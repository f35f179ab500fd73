"""JetStream publish: sync acks, headers, dedupe, expected stream, publish_async."""

import asyncio
import os

import nats
from nats.js.api import PubAck
from nats.js.errors import APIError, BadRequestError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream(timeout=5)
    await js.add_stream(name="EVENTS", subjects=["events.>"])

    ack = await js.publish("events.a", b"first")
    assert isinstance(ack, PubAck)
    assert ack.stream == "EVENTS" and ack.seq == 1 and not ack.duplicate

    ack = await js.publish("events.b", b"second", headers={"Nats-Msg-Id": "id-2"}, timeout=2)
    assert ack.seq == 2
    ack = await js.publish("events.b", b"second", headers={"Nats-Msg-Id": "id-2"})
    assert ack.seq == 2 and ack.duplicate

    ack = await js.publish("events.c", b"third", stream="EVENTS")
    assert ack.seq == 3
    try:
        await js.publish("events.c", b"wrong", stream="OTHER")
    except BadRequestError as e:
        assert isinstance(e, APIError)
    else:
        raise AssertionError("expected-stream mismatch accepted")

    futures = []
    for i in range(50):
        futures.append(await js.publish_async(f"events.async.{i}", str(i).encode(), wait_stall=5))
    assert js.publish_async_pending() >= 0
    await js.publish_async_completed()
    assert js.publish_async_pending() == 0
    seqs = [f.result().seq for f in futures]
    assert seqs == list(range(4, 54))

    info = await js.stream_info("EVENTS")
    assert info.state.messages == 53
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
