"""Object store: put from str, bytes and a file, get into a file, watch with its
initial-state marker, list with and without deletes, show_deleted."""

import asyncio
import io
import os
import tempfile

import nats
from nats.errors import TimeoutError
from nats.js.api import ObjectMeta
from nats.js.errors import NotFoundError, ObjectDeletedError, ObjectNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    obs = await js.create_object_store("files")

    try:
        await obs.list()
    except NotFoundError:
        pass
    else:
        raise AssertionError("list of an empty store raises NotFoundError")

    # An empty store: the watcher says so with None at once.
    watcher = await obs.watch()
    assert await watcher.updates(timeout=2) is None

    info = await obs.put("a.txt", "text data")
    assert info.name == "a.txt" and info.size == 9
    await obs.put("b.bin", b"\x00\x01" * 1000)
    await obs.put("c.dat", io.BytesIO(b"from a file" * 100), meta=ObjectMeta(description="bytes io"))

    names = []
    for _ in range(3):
        upd = await watcher.updates(timeout=2)
        names.append(upd.name)
    assert names == ["a.txt", "b.bin", "c.dat"]
    try:
        await watcher.updates(timeout=0.2)
    except TimeoutError:
        pass
    else:
        raise AssertionError("no more updates")
    await watcher.stop()

    with tempfile.TemporaryFile() as f:
        await obs.get("c.dat", writeinto=f)
        f.seek(0)
        assert f.read() == b"from a file" * 100
    res = await obs.get("b.bin")
    assert res.data == b"\x00\x01" * 1000 and res.info.size == 2000
    assert (await obs.get_info("c.dat")).description == "bytes io"

    await obs.delete("a.txt")
    try:
        await obs.get_info("a.txt")
    except ObjectNotFoundError:
        pass
    else:
        raise AssertionError("deleted")
    deleted = await obs.get_info("a.txt", show_deleted=True)
    assert deleted.deleted and deleted.size == 0
    try:
        await obs.get("a.txt")
    except (ObjectNotFoundError, ObjectDeletedError):
        pass
    else:
        raise AssertionError("deleted")

    # ignore_deletes given: the same answer from nats-py and natsjs_sync.
    listed = sorted(i.name for i in await obs.list(ignore_deletes=False))
    assert listed == ["a.txt", "b.bin", "c.dat"], listed
    live = sorted(i.name for i in await obs.list(ignore_deletes=True))
    assert live == ["b.bin", "c.dat"], live

    # A watcher for updates only sees what comes next, with no marker.
    later = await obs.watch(updates_only=True)
    await obs.put("d.txt", b"new")
    upd = await later.updates(timeout=2)
    assert upd.name == "d.txt"
    await later.stop()

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
