"""Object store: create, put/get (bytes, file objects), info, list, meta, delete, status."""

import asyncio
import io
import os
import tempfile

import nats
from nats.js.api import ObjectMeta, ObjectStoreConfig, StorageType
from nats.js.errors import NotFoundError, ObjectNotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    obs = await js.create_object_store("files", config=ObjectStoreConfig(description="test files",
                                                                         storage=StorageType.MEMORY))
    info = await obs.put("hello.txt", b"hello world")
    assert info.name == "hello.txt" and info.size == 11 and info.bucket == "files"
    assert info.digest.startswith("SHA-256=")

    big = os.urandom(300_000)
    info = await obs.put("big.bin", io.BytesIO(big),
                         meta=ObjectMeta(description="random", headers={"Owner": ["ops"]}))
    assert info.size == 300_000 and info.chunks > 1
    assert info.description == "random"

    res = await obs.get("hello.txt")
    assert res.data == b"hello world"
    assert res.info.name == "hello.txt"

    with tempfile.TemporaryFile() as f:
        res = await obs.get("big.bin", writeinto=f)
        f.seek(0)
        assert f.read() == big

    got = await obs.get_info("big.bin")
    assert got.description == "random"
    assert got.headers == {"Owner": ["ops"]}
    got.description = "changed"  # the info objects are plain mutable dataclasses

    await obs.update_meta("hello.txt", ObjectMeta(name="hello.txt", description="greeting"))
    assert (await obs.get_info("hello.txt")).description == "greeting"

    names = sorted(i.name for i in await obs.list())
    assert names == ["big.bin", "hello.txt"], names

    await obs.delete("hello.txt")
    try:
        await obs.get("hello.txt")
    except ObjectNotFoundError as e:
        assert isinstance(e, NotFoundError)
    else:
        raise AssertionError("deleted object still readable")
    try:
        await obs.get_info("never-there")
    except ObjectNotFoundError:
        pass
    else:
        raise AssertionError("missing object found")

    status = await obs.status()
    assert status.bucket == "files"
    assert status.description == "test files"
    assert not status.sealed
    assert status.storage_type == StorageType.MEMORY
    assert status.size > 300_000

    await obs.seal()
    assert (await obs.status()).sealed

    obs2 = await js.object_store("files")
    assert (await obs2.get("big.bin")).data == big
    assert await js.delete_object_store("files") is True
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
