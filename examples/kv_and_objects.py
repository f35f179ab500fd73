"""Key-value and object stores: the Propan page's example, without asyncio.

The Propan documentation reaches the stores through nats-py; the same calls,
``await`` removed, work on natsjs_sync's JetStream context. Two things are
made explicit that the original glosses over: ``get`` returns an entry (the
bytes are ``entry.value``), and files are opened in binary mode.

    python examples/kv_and_objects.py [nats://host:4222]
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import natsjs_sync as nats


def main(url: str, file_size: int = 3 * 1024 * 1024 + 17) -> dict[str, Any]:
    nc = nats.connect(url)
    js = nc.jetstream()

    # JS Key-Value Storage
    storage = js.create_key_value(bucket="propan_kv")
    storage.put("hello", b"propan!")
    assert storage.get("hello").value == b"propan!"

    # JS Object Storage
    objects = js.create_object_store("propan-obs")
    with tempfile.TemporaryDirectory() as tmp:
        obj_name = os.path.join(tmp, "file.mp4")
        with open(obj_name, "wb") as f:
            f.write(os.urandom(file_size))

        with open(obj_name, "rb") as f:
            info = objects.put("file.mp4", f)  # streamed in chunks, never read whole

        copy_name = os.path.join(tmp, "copy-file.mp4")
        with open(copy_name, "wb") as f:
            objects.get("file.mp4", writeinto=f)  # nats-py's argument name

        with open(obj_name, "rb") as a, open(copy_name, "rb") as b:
            identical = a.read() == b.read()

    result = {"kv_value": storage.get("hello").value, "object_size": info.size, "chunks": info.chunks,
              "digest": info.digest, "copy_identical": identical}
    nc.close()
    return result


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for key, value in main(url).items():
            print(f"{key:>15}: {value}")
