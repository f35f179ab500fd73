"""msg.respond(data) sends the request's headers back, changes made to them included;
a request without headers gets a reply without headers."""

import asyncio
import os

import nats

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)

    async def service(msg):
        if msg.headers is not None:
            msg.headers["quux"] = "quuz"
        await msg.respond(b"OK!")

    await nc.subscribe("svc", cb=service)
    await nc.flush()

    resp = await nc.request("svc", b"hi", timeout=2, headers={"foo": "bar", "hello": "world"})
    assert resp.data == b"OK!"
    assert resp.headers is not None
    assert dict(resp.headers) == {"foo": "bar", "hello": "world", "quux": "quuz"}, resp.headers

    resp = await nc.request("svc", b"hi", timeout=2)
    assert resp.data == b"OK!"
    assert resp.headers is None, resp.headers

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
