"""Streams shaped as nats-py's documentation shows them: sources and mirrors,
work-queue retention, discard new, per-subject limits, deduplication,
republish, subject transforms and message TTLs read back."""

import asyncio
import os

import nats
from nats.js.api import (
    DiscardPolicy,
    RePublish,
    RetentionPolicy,
    StreamSource,
    SubjectTransform,
)
from nats.js.errors import BadRequestError, NotFoundError, ServerError

URL = os.environ["NATS_URL"]


async def wait_for(predicate):
    for _ in range(100):
        if await predicate():
            return True
        await asyncio.sleep(0.05)
    return False


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    # Sources: one stream aggregating several.
    await js.add_stream(name="R-US", subjects=["us.orders.>"])
    await js.add_stream(name="R-EU", subjects=["eu.orders.>"])
    info = await js.add_stream(name="R-ALL", sources=[StreamSource(name="R-US"), StreamSource(name="R-EU")])
    assert sorted(s.name for s in info.config.sources) == ["R-EU", "R-US"]
    await js.publish("us.orders.1", b"us")
    await js.publish("eu.orders.1", b"eu")

    async def sourced():
        return (await js.stream_info("R-ALL")).state.messages == 2

    assert await wait_for(sourced)

    # A mirror.
    info = await js.add_stream(name="R-US-COPY", mirror=StreamSource(name="R-US"))
    assert info.config.mirror.name == "R-US"

    async def mirrored():
        return (await js.stream_info("R-US-COPY")).state.messages == 1

    assert await wait_for(mirrored)
    copy = await js.get_last_msg("R-US-COPY", "us.orders.1")
    assert copy.data == b"us"

    # Work queue: a message goes once it is acked; overlapping consumers are refused.
    await js.add_stream(name="JOBS", subjects=["jobs.>"], retention=RetentionPolicy.WORK_QUEUE)
    await js.publish("jobs.a", b"1")
    psub = await js.pull_subscribe("jobs.>", "worker")
    (m,) = await psub.fetch(1, timeout=2)
    await m.ack_sync()
    assert (await js.stream_info("JOBS")).state.messages == 0
    try:
        await js.pull_subscribe("jobs.>", "second")
    except (BadRequestError, ServerError) as err:
        assert err.err_code is not None
    else:
        raise AssertionError("a second overlapping work-queue consumer must be refused")

    # Discard new with a message limit: the stream refuses the extra message.
    await js.add_stream(name="FULL", subjects=["full"], max_msgs=2, discard=DiscardPolicy.NEW)
    await js.publish("full", b"1")
    await js.publish("full", b"2")
    try:
        await js.publish("full", b"3")
    except nats.js.errors.APIError as err:
        assert err.err_code == 10077, err
    else:
        raise AssertionError("discard new must refuse")

    # Per-subject limit.
    await js.add_stream(name="LAST", subjects=["last.>"], max_msgs_per_subject=1)
    for i in range(3):
        await js.publish("last.k", str(i).encode())
    info = await js.stream_info("LAST")
    assert info.state.messages == 1 and (await js.get_last_msg("LAST", "last.k")).data == b"2"

    # Deduplication by message id.
    await js.add_stream(name="DEDUP", subjects=["dedup"], duplicate_window=60)
    first = await js.publish("dedup", b"x", headers={"Nats-Msg-Id": "id-1"})
    again = await js.publish("dedup", b"x", headers={"Nats-Msg-Id": "id-1"})
    assert not first.duplicate and again.duplicate and again.seq == first.seq

    # Republish: read the config, change it in place, update (as nats-py's docs do).
    await js.add_stream(name="DASH", subjects=["dash.src.>"])
    info = await js.stream_info("DASH")
    config = info.config
    config.republish = RePublish(src="dash.src.>", dest="dash.out.>")
    config.max_msgs = 100
    updated = await js.update_stream(config)
    assert updated.config.max_msgs == 100
    assert updated.config.republish.dest == "dash.out.>"
    live = await nc.subscribe("dash.out.>")
    await js.publish("dash.src.1", b"live")
    got = await live.next_msg(timeout=2)
    assert got.subject == "dash.out.1" and got.data == b"live"
    assert got.headers["Nats-Stream"] == "DASH"

    # A consumer config changed in place too.
    cinfo = await js.consumer_info("JOBS", "worker")
    ccfg = cinfo.config
    ccfg.description = "the only worker"
    ccfg.max_ack_pending = 10
    cinfo = await js.add_consumer("JOBS", ccfg)
    assert cinfo.config.description == "the only worker" and cinfo.config.max_ack_pending == 10

    # Subject transform on the way in.
    await js.add_stream(name="XF", subjects=["xf.in.>"],
                        subject_transform=SubjectTransform(src="xf.in.>", dest="xf.stored.>"))
    await js.publish("xf.in.a", b"t")
    stored = await js.get_msg("XF", 1)
    assert stored.subject == "xf.stored.a"

    # A stream that does not exist.
    try:
        await js.get_last_msg("NOPE", "x")
    except NotFoundError:
        pass
    else:
        raise AssertionError("no such stream")

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
