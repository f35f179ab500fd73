"""Object store refusals as nats-py raises them: reading, deleting and updating in a
deleted store, update_meta() of an object that never existed, a rename onto a live object."""

import asyncio
import os

import nats
from nats.js.api import ObjectMeta
from nats.js.errors import NotFoundError, ObjectAlreadyExists, ObjectDeletedError, ObjectNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    obs = await js.create_object_store("KEPT")
    await obs.put("one", b"1")
    await obs.put("two", b"2")
    try:
        await obs.update_meta("never", ObjectMeta(name="never"))
        raise AssertionError("updated an object that never existed")
    except ObjectDeletedError:
        pass
    try:
        await obs.update_meta("one", ObjectMeta(name="two"))
        raise AssertionError("renamed onto a live object")
    except ObjectAlreadyExists:
        pass
    assert (await obs.get("two")).data == b"2"

    gone = await js.create_object_store("GONE")
    await gone.put("a", b"x")
    await js.delete_object_store("GONE")
    for call in (lambda: gone.get("a"), lambda: gone.get_info("a"), lambda: gone.delete("a")):
        try:
            await call()
            raise AssertionError("used a deleted store")
        except ObjectNotFoundError:
            pass
    try:
        await gone.update_meta("a", ObjectMeta(name="a", description="d"))
        raise AssertionError("updated in a deleted store")
    except ObjectDeletedError:
        pass
    for call in (lambda: gone.put("b", b"y"), lambda: gone.status()):
        try:
            await call()
            raise AssertionError("used a deleted store")
        except NotFoundError:
            pass
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
