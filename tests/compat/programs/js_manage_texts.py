"""JetStream management as nats-py has it: the invalid-name texts of update_stream,
delete_stream and delete_consumer, subscribing to a bound push consumer, a StreamConfig
named later, info equality and ClusterInfo.from_response's traffic_acc."""

import asyncio
import os

import nats
from nats.js.api import ClusterInfo, StreamConfig
from nats.js.errors import Error as JSError

URL = os.environ["NATS_URL"]


async def expect_value_error(call, text):
    try:
        await call()
    except ValueError as exc:
        assert str(exc) == text, str(exc)
    else:
        raise AssertionError(f"no ValueError ({text})")


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    # A config built without a name, named when it is sent.
    info = await js.add_stream(StreamConfig(), name="hi", subjects=["hi.>"])
    assert info.config.name == "hi"

    await expect_value_error(lambda: js.update_stream(StreamConfig(name="a.b")), "nats: invalid stream name: 'a.b'")
    await expect_value_error(lambda: js.update_stream(StreamConfig()), "nats: stream name is required")
    await expect_value_error(lambda: js.delete_stream("a.b"), "nats: invalid stream name: 'a.b'")
    await expect_value_error(lambda: js.delete_consumer("hi", "c.d"), "nats: invalid consumer name: 'c.d'")
    await expect_value_error(lambda: js.delete_consumer("", "c"), "nats: stream name is required")

    # Two answers about the same consumer are equal (the time of the answer aside).
    added = await js.add_consumer("hi", durable_name="pull")
    assert added == await js.consumer_info("hi", "pull")
    assert await js.stream_info("hi") == await js.stream_info("hi")

    # A push consumer already bound to a subscription.
    sub = await js.subscribe("hi.>", durable="pusher")
    try:
        await js.subscribe("hi.>", durable="pusher")
        raise AssertionError("bound a second subscription")
    except JSError as exc:
        # str() differs (nats-py: "nats: JetStream.Error ..."); the description is the same.
        assert exc.description == "consumer is already bound to a subscription", exc.description
    # A queue subscription names its consumer: another durable is refused.
    try:
        await js.subscribe("hi.>", queue="foo", durable="pusher")
        raise AssertionError("a queue subscription to another consumer")
    except JSError as exc:
        assert exc.description == "cannot create queue subscription 'foo' to consumer 'pusher'", exc.description
    await sub.unsubscribe()

    assert ClusterInfo.from_response({"leader": "n1", "traffic_acc": "SYS"}).traffic_acc == "SYS"
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
