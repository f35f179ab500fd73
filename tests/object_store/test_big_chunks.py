"""Objects written with chunks over 8 MiB (a server whose max_payload allows
them) can be read back: the read's pull window was a fixed 8 MiB, and the
server never delivers a message larger than a pull's max_bytes, so such an
object could never be read."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

MIB = 1024 * 1024


@pytest.fixture
def big_payload_client() -> Iterator[nats.Client]:
    server = NatsServer(max_payload=16 * MIB)
    server.start()
    try:
        with nats.connect(server.url, name="big-chunks") as nc:
            yield nc
    finally:
        server.close()


def test_an_object_with_12_mib_chunks_reads_back(big_payload_client: nats.Client) -> None:
    nc = big_payload_client
    assert nc.max_payload >= 16 * MIB
    obs = nc.jetstream(timeout=30).create_object_store(bucket="BIG", storage="memory")
    data = os.urandom(2 * 12 * MIB + 12345)  # two full chunks and a short one
    info = obs.put("big", data, chunk_size=12 * MIB, timeout=60)
    assert (info.size, info.chunks) == (len(data), 3)
    with obs.get("big", timeout=20) as result:  # the old reader waited for ever, chunk by chunk
        got = hashlib.sha256()
        sizes = []
        for chunk in result.chunks():
            got.update(chunk)
            sizes.append(len(chunk))
    assert sizes == [12 * MIB, 12 * MIB, 12345]
    assert got.digest() == hashlib.sha256(data).digest()
