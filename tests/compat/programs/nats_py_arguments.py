"""nats-py's less common arguments and attributes: request(old_style=True) (a
subscription of its own per request), RawStreamMsg.hdrs (the headers as the stream
API sends them: base64 of the wire form), ClusterInfo.leader_since and traffic_acc."""

import asyncio
import base64
import os

import nats
from nats.errors import NoRespondersError, TimeoutError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)

    async def echo(msg):
        await msg.respond(b"re: " + msg.data)

    await nc.subscribe("svc.echo", cb=echo)
    resp = await nc.request("svc.echo", b"one", timeout=5, old_style=True)
    assert resp.data == b"re: one", resp.data
    assert resp.subject.startswith("_INBOX."), resp.subject
    resp = await nc.request("svc.echo", b"two", 2, True)
    assert resp.data == b"re: two"
    try:
        await nc.request("svc.nobody", b"", timeout=2, old_style=True)
    except NoRespondersError:
        pass
    else:
        raise AssertionError("old-style request to nobody answered")
    await nc.subscribe("svc.quiet")
    try:
        await nc.request("svc.quiet", b"", timeout=0.3, old_style=True)
    except TimeoutError:
        pass
    else:
        raise AssertionError("old-style request to a quiet subscriber answered")
    # The request's own subscriptions are gone: the new style still works.
    assert (await nc.request("svc.echo", b"three", timeout=2)).data == b"re: three"

    js = nc.jetstream()
    await js.add_stream(name="RAW", subjects=["raw.>"])
    await js.publish("raw.a", b"1", headers={"A": "x", "B": "y"})
    await js.publish("raw.b", b"2")
    with_headers = await js.get_msg("RAW", 1)
    assert isinstance(with_headers.hdrs, str)
    wire = base64.b64decode(with_headers.hdrs)
    assert wire.startswith(b"NATS/1.0\r\n") and b"A: x\r\n" in wire and wire.endswith(b"\r\n\r\n"), wire
    assert (await js.get_last_msg("RAW", "raw.a")).hdrs == with_headers.hdrs
    assert (await js.get_msg("RAW", 2)).hdrs is None

    cluster = (await js.stream_info("RAW")).cluster
    assert cluster.leader
    # A single server sends neither.
    assert cluster.leader_since is None and cluster.traffic_acc is None

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
