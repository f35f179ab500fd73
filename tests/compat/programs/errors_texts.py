"""The texts of the errors nats-py raises for bad names and fetch arguments, and for
a fetch that gets nothing: a program matching on str(err) sees the same text."""

import asyncio
import os

import nats
from nats.errors import TimeoutError
from nats.js.api import ConsumerConfig

URL = os.environ["NATS_URL"]


async def text_of(make, cls=ValueError):
    try:
        await make()
    except cls as exc:
        return str(exc)
    raise AssertionError(f"not refused with {cls.__name__}")


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="TEXTS", subjects=["texts.>"])
    psub = await js.pull_subscribe("texts.>", "d")

    cases = [
        (lambda: js.stream_info("a.b"), "nats: invalid stream name: 'a.b'"),
        (lambda: js.stream_info(""), "nats: stream name is required"),
        (lambda: js.add_stream(name="a b"), "nats: invalid stream name: 'a b'"),
        (lambda: js.consumer_info("TEXTS", "a.b"), "nats: invalid consumer name: 'a.b'"),
        (lambda: js.consumer_info("a>b", "d"), "nats: invalid stream name: 'a>b'"),
        (lambda: js.consumer_info("TEXTS", ""), "nats: consumer name is required"),
        (lambda: js.add_consumer("TEXTS", ConsumerConfig(durable_name="a.b")),
         "nats: invalid consumer name: 'a.b'"),
        (lambda: js.add_consumer("a*", ConsumerConfig(durable_name="ok")), "nats: invalid stream name: 'a*'"),
        (lambda: js.purge_stream("a/b"), "nats: invalid stream name: 'a/b'"),
        (lambda: js.get_msg("a.b", 1), "nats: invalid stream name: 'a.b'"),
        (lambda: js.consumers_info("a.b"), "nats: invalid stream name: 'a.b'"),
        (lambda: psub.fetch(0), "nats: invalid batch size"),
        (lambda: psub.fetch(1, timeout=0), "nats: invalid fetch timeout"),
        (lambda: psub.fetch(1, timeout=-1), "nats: invalid fetch timeout"),
    ]
    for make, expected in cases:
        got = await text_of(make)
        assert got == expected, (got, expected)

    for batch in (1, 3):
        try:
            await psub.fetch(batch, timeout=0.3)
        except TimeoutError as exc:
            assert str(exc) == "nats: timeout", str(exc)
        except asyncio.TimeoutError as exc:
            # nats-py's own fetch raises a bare asyncio.TimeoutError when its wait runs
            # out at another step (seen on a loaded machine); natsjs_sync's TimeoutError
            # is always caught above, with the text.
            assert nats.__name__ == "nats" and type(exc) is asyncio.TimeoutError, exc
        else:
            raise AssertionError("a fetch of an empty stream returned")

    await nc.close()
    print("ok")


asyncio.run(main())
