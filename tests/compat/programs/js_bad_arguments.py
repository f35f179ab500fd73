"""Bad arguments come out where nats-py refuses them, as the same exceptions with the
same texts: a fetch heartbeat over half the timeout is the server's 400 (an
APIError); a stream with no name, a bad name, compression "s3" or list-shaped
metadata are ValueErrors raised before anything is sent. An empty object name is
refused under either client (a class each: the except clause names both)."""

import asyncio
import os

import nats
import nats.js.errors
from nats.errors import TimeoutError

URL = os.environ["NATS_URL"]


async def refused(make, cls):
    try:
        await make()
    except cls as exc:
        return exc
    raise AssertionError(f"not refused with {cls.__name__}")


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="ARGS", subjects=["args.>"])
    psub = await js.pull_subscribe("args.>", "d")

    # The server answers a heartbeat over half of the pull's expires, before delivering.
    await js.publish("args.a", b"1")
    for batch in (1, 5):
        err = await refused(lambda b=batch: psub.fetch(b, timeout=1, heartbeat=0.8), nats.js.errors.APIError)
        assert err.code == 400, err.code
        assert err.description == "Bad Request - heartbeat value too large", err.description
    # Under half of it the fetch works, and the message was not taken by the refusals. (5 s: a fetch
    # returns what it read by its timeout, and a loaded machine may read late.)
    (m,) = await psub.fetch(1, timeout=5, heartbeat=2.4)
    assert m.data == b"1"
    await m.ack()
    try:
        # (A heartbeat of 0.95 s: two of 0.45 s went missing in this client's fetch when a loaded
        # machine held the reading thread for 0.9 s, and it ended with "missed idle heartbeats".)
        await psub.fetch(1, timeout=2, heartbeat=0.95)
    except TimeoutError:
        pass
    else:
        raise AssertionError("an empty stream gave a message")

    texts = []
    for make in (
        lambda: js.add_stream(),
        lambda: js.add_stream(subjects=["noname.>"]),
        lambda: js.add_stream(name="a.b", subjects=["ab.>"]),
        lambda: js.add_stream(name="S3", subjects=["s3.>"], compression="s3"),
        lambda: js.add_stream(name="META", subjects=["meta.>"], metadata=["a"]),
    ):
        texts.append(str(await refused(make, ValueError)))
    assert texts == [
        "nats: stream name is required",
        "nats: stream name is required",
        "nats: invalid stream name: 'a.b'",
        "nats: invalid store compression type: s3",
        "nats: invalid metadata format",
    ], texts
    # Nothing was made by the refused calls.
    names = sorted([si.config.name for si in await js.streams_info()])
    assert names == ["ARGS"], names

    obs = await js.create_object_store("ARGSOBJ")
    for make in (lambda: obs.get(""), lambda: obs.get_info("")):
        await refused(make, (nats.js.errors.ObjectNotFoundError, nats.js.errors.InvalidObjectNameError))

    await nc.close()
    print("ok")


asyncio.run(main())
