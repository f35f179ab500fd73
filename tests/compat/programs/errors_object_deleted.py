"""A deleted object: reading it raises ObjectNotFoundError, changing its meta raises
ObjectDeletedError, deleting it again raises ObjectNotFoundError."""

import asyncio
import os

import nats
from nats.js.api import ObjectMeta
from nats.js.errors import ObjectDeletedError, ObjectNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    obs = await js.create_object_store("GONEOBJ")
    await obs.put("gone", b"data")
    await obs.delete("gone")
    for what, call in (("get", lambda: obs.get("gone")), ("get_info", lambda: obs.get_info("gone")),
                       ("delete", lambda: obs.delete("gone"))):
        try:
            await call()
        except ObjectNotFoundError:
            pass
        else:
            raise AssertionError(f"{what} of a deleted object succeeded")
    try:
        await obs.update_meta("gone", ObjectMeta(name="renamed"))
    except ObjectDeletedError:
        pass
    else:
        raise AssertionError("the meta of a deleted object changed")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
