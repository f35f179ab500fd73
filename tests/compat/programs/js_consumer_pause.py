"""Pausing and resuming a consumer with nats-py's arguments (an RFC 3339 time)."""

import asyncio
import datetime
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(name="WORK", subjects=["work.>"])
    await js.add_consumer("WORK", durable_name="slow")
    until = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    resp = await js.pause_consumer("WORK", "slow", until.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    assert resp.paused is True
    info = await js.consumer_info("WORK", "slow")
    assert info.paused is True
    resp = await js.resume_consumer("WORK", "slow")
    assert resp.paused is False
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
