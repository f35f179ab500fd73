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
from natsjs_sync.jetstream.object_models import encode_info, encode_name
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


def test_an_object_whose_chunk_size_was_not_recorded_reads_back(big_payload_client: nats.Client) -> None:
    """A writer that leaves the chunk size out of the info (other clients may):
    the read's window came from the average chunk, 4.5 MiB for a 9 MiB chunk and
    a 1-byte one, so the 9 MiB chunk was never delivered (TimeoutError)."""
    nc = big_payload_client
    js = nc.jetstream(timeout=30)
    obs = js.create_object_store(bucket="NOSIZE", storage="memory")
    data = os.urandom(9 * MIB + 1)
    info = obs.put("odd", data, chunk_size=9 * MIB, timeout=60)
    assert (info.size, info.chunks) == (len(data), 2)
    # The same info as another client writes it: no options, so no chunk size.
    unrecorded = encode_info(info.replace(options=None))
    assert b"max_chunk_size" not in unrecorded
    js.publish(f"$O.NOSIZE.M.{encode_name('odd')}", unrecorded, headers={"Nats-Rollup": "sub"})
    assert obs.get_info("odd").options is None
    with obs.get("odd", timeout=20) as result:
        assert [len(c) for c in result.chunks()] == [9 * MIB, 1]
    assert obs.get_bytes("odd", timeout=20) == data
