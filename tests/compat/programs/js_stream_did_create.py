"""StreamInfo.did_create: set by the create that made the stream, so a created stream's
info equals stream_info() once it is cleared."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    jsm = nc.jsm()

    created = await jsm.add_stream(name="hello", subjects=["hello", "hello.>"])
    assert created.did_create is True, created.did_create

    current = await jsm.stream_info("hello")
    assert current.did_create is None
    assert created != current
    created.did_create = None
    current.cluster = None
    assert created == current
    assert "did_create" not in current.as_dict()
    assert (await jsm.add_stream(name="other")).as_dict()["did_create"] is True
    await nc.close()


asyncio.run(main())
