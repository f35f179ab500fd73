"""Smaller JetStream-management behaviours: streams_info(offset=) and consumers_info
give one page of the server's list (up to 256), streams_info_iterator answers offset
and total; get_msg(direct=True) asks the direct-get responders straight away (no
responders when the stream is missing or does not allow direct gets); a push
subscription whose config has filter_subjects is filtered by those alone; an
ephemeral pull consumer's config carries its name."""

import asyncio
import os

import nats
from nats.errors import NoRespondersError
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

URL = os.environ["NATS_URL"]
STREAMS = 260


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    for i in range(STREAMS):
        await js.add_stream(name=f"PG{i:03d}", subjects=[f"pg{i:03d}.>"], storage="memory")

    page = await js.streams_info()
    assert len(page) == 256, len(page)
    assert [s.config.name for s in page[:2]] == ["PG000", "PG001"]
    page = await js.streams_info(offset=1)
    assert len(page) == 256 and page[0].config.name == "PG001"
    assert [s.config.name for s in await js.streams_info(offset=STREAMS - 1)] == [f"PG{STREAMS - 1:03d}"]
    assert await js.streams_info(offset=STREAMS) == []
    it = await js.streams_info_iterator(offset=10)
    assert (it.offset, it.total) == (10, STREAMS)
    assert [s.config.name for s in it][:1] == ["PG010"]

    for i in range(3):
        await js.add_consumer("PG000", durable_name=f"c{i}")
    assert sorted(c.name for c in await js.consumers_info("PG000")) == ["c0", "c1", "c2"]
    assert len(await js.consumers_info("PG000", offset=1)) == 2

    # Direct gets go straight to the responders.
    await js.publish("pg000.a", b"plain")
    for stream in ("NOSUCH", "PG000"):
        try:
            await js.get_msg(stream, 1, direct=True)
        except NoRespondersError:
            pass
        else:
            raise AssertionError(f"direct get from {stream} answered")
    try:
        await js.get_msg("NOSUCH", 1)
    except NotFoundError:
        pass
    else:
        raise AssertionError("get_msg from a missing stream answered")
    await js.add_stream(name="DIRECT", subjects=["direct.>"], allow_direct=True)
    await js.publish("direct.a", b"1", headers={"X": "1"})
    await js.publish("direct.b", b"2")
    m = await js.get_msg("DIRECT", 1, direct=True)
    assert (m.subject, m.seq, m.data, m.headers["X"]) == ("direct.a", 1, b"1", "1")
    m = await js.get_msg("DIRECT", subject="direct.b", direct=True)
    assert (m.seq, m.data) == (2, b"2")
    try:
        await js.get_msg("DIRECT", 9, direct=True)
    except NotFoundError:
        pass
    else:
        raise AssertionError("direct get of a missing message answered")

    # A push subscription filtered by filter_subjects only.
    await js.add_stream(name="FS", subjects=["fs.>"])
    for s in ("fs.a", "fs.b", "fs.c"):
        await js.publish(s, s.encode())
    sub = await js.subscribe("fs.a", config=ConsumerConfig(filter_subjects=["fs.a", "fs.b"]))
    cfg = (await sub.consumer_info()).config
    assert cfg.filter_subject is None and cfg.filter_subjects == ["fs.a", "fs.b"], cfg
    got = [(await sub.next_msg(timeout=2)).data for _ in range(2)]
    assert got == [b"fs.a", b"fs.b"], got
    await sub.unsubscribe()

    # An ephemeral pull consumer is named by the client.
    psub = await js.pull_subscribe("fs.>", stream="FS")
    info = await psub.consumer_info()
    assert info.config.name == info.name and info.config.durable_name is None, info.config
    assert len(await psub.fetch(3, timeout=2)) == 3

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
