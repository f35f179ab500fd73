"""Object store: put/get from every kind of source, streaming, digests, links, meta, watch."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import ObjectStoreError
from natsjs_sync.jetstream import JetStream, ObjectMeta, ObjectStore
from natsjs_sync.jetstream.object_models import encode_name
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def obs(js: JetStream) -> Iterator[ObjectStore]:
    bucket = "o" + next_nuid()
    store = js.create_object_store(bucket=bucket, storage="memory")
    yield store
    try:
        js.delete_object_store(bucket)
    except nats.NatsError:
        pass


def test_put_get_bytes_and_info(obs: ObjectStore) -> None:
    data = os.urandom(300_000)
    info = obs.put("blob", data, meta=ObjectMeta(description="random", metadata={"k": "v"}), chunk_size=64 * 1024)
    assert (info.size, info.chunks) == (300_000, 5)
    assert info.digest == "SHA-256=" + __import__("base64").urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
    got = obs.get_info("blob")
    assert (got.name, got.size, got.description, got.metadata, got.nuid) == ("blob", 300_000, "random", {"k": "v"},
                                                                           info.nuid)
    assert got.mtime is not None
    assert obs.get_bytes("blob") == data
    with obs.get("blob") as result:
        assert result.read(10) == data[:10]
        assert result.read(100_000) == data[10:100_010]
        assert result.read() == data[100_010:]
        assert result.read() == b""


def test_sources_str_path_filelike_and_progress(obs: ObjectStore, tmp_path: Path) -> None:
    obs.put("text", "héllo")
    assert obs.get_string("text") == "héllo"
    src = tmp_path / "in.bin"
    payload = os.urandom(200_001)
    src.write_bytes(payload)
    seen: list[tuple[int, int | None]] = []
    info = obs.put_file(src, progress=lambda done, total: seen.append((done, total)))
    assert info.name == "in.bin" and seen[-1] == (200_001, 200_001)
    obs.put("path", src)  # an os.PathLike is read as a file
    assert obs.get_bytes("path") == payload

    class Trickle(io.RawIOBase):  # short reads, not seekable
        def __init__(self, data: bytes):
            self.data, self.pos = data, 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), 1000, len(self.data) - self.pos)
            b[:n] = self.data[self.pos:self.pos + n]
            self.pos += n
            return n

    obs.put("trickle", Trickle(payload), chunk_size=50_000)
    assert obs.get_info("trickle").chunks == 5
    out = tmp_path / "out.bin"
    got_progress: list[int] = []
    obs.get_file("trickle", out, progress=lambda done, total: got_progress.append(done))
    assert out.read_bytes() == payload and got_progress[-1] == len(payload)
    with pytest.raises(TypeError):
        obs.put("bad", 123)


def test_empty_object_and_iteration(obs: ObjectStore) -> None:
    info = obs.put("empty", b"")
    assert (info.size, info.chunks) == (0, 0)
    assert obs.get_bytes("empty") == b""
    obs.put("three", b"abcdefghi", chunk_size=3)
    with obs.get("three") as r:
        assert list(r) == [b"abc", b"def", b"ghi"]


def test_replace_purges_old_chunks_and_delete(obs: ObjectStore) -> None:
    first = obs.put("x", b"1" * 1000, chunk_size=100)
    second = obs.put("x", b"2" * 500, chunk_size=100)
    assert first.nuid != second.nuid
    st = obs._stream.info(subjects_filter=f"$O.{obs.bucket}.C.>")
    assert set((st.state.subjects or {}).keys()) == {f"$O.{obs.bucket}.C.{second.nuid}"}
    assert obs.get_bytes("x") == b"2" * 500
    obs.delete("x")
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_info("x")
    assert obs.get_info("x", show_deleted=True).deleted
    assert obs._stream.info().state.messages == 1  # only the deleted marker
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_bytes("never")


def test_digest_mismatch_detected(obs: ObjectStore, js: JetStream) -> None:
    info = obs.put("d", b"good data " * 100, chunk_size=100)
    # Someone else's writer stored a wrong digest.
    obs._publish_meta(info.replace(digest="SHA-256=" + "A" * 43 + "="), None)
    with pytest.raises(nats.DigestMismatchError):
        obs.get_bytes("d")


def test_meta_update_rename_links(obs: ObjectStore, js: JetStream) -> None:
    obs.put("a", b"data-a")
    renamed = obs.update_meta("a", ObjectMeta(name="b", description="moved"))
    assert renamed.name == "b"
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_info("a")
    assert obs.get_bytes("b") == b"data-a" and obs.get_info("b").description == "moved"
    obs.put("c", b"c")
    with pytest.raises(ObjectStoreError):
        obs.update_meta("b", ObjectMeta(name="c"))
    link = obs.add_link("link-b", obs.get_info("b"))
    assert link.is_link and obs.get_bytes("link-b") == b"data-a"
    with pytest.raises(ObjectStoreError):
        obs.add_link("c", obs.get_info("b"))  # an object, not a link, has that name
    with pytest.raises(ObjectStoreError):
        obs.add_link("l2", link)
    other = js.create_object_store(bucket="other" + next_nuid(), storage="memory")
    try:
        blink = other.add_bucket_link("to-first", obs)
        assert blink.options is not None and blink.options.link is not None
        assert blink.options.link.bucket == obs.bucket and blink.options.link.name is None
        cross = other.add_link("cross", obs.get_info("c"))
        assert other.get_bytes("cross") == b"c" and cross.is_link
    finally:
        js.delete_object_store(other.bucket)


def test_list_watch_status_seal(obs: ObjectStore, js: JetStream) -> None:
    with pytest.raises(nats.ObjectNotFoundError):  # nothing to list, as nats.go and nats-py say it
        obs.list()
    for n in ("one", "two", "three"):
        obs.put(n, n.encode())
    obs.delete("two")
    assert sorted(i.name for i in obs.list()) == ["one", "three"]
    assert sorted(i.name for i in obs.list(show_deleted=True)) == ["one", "three", "two"]
    with obs.watch() as w:
        names = [w.next(2), w.next(2), w.next(2), w.next(2)]
        assert sorted(i.name for i in names if i is not None) == ["one", "three", "two"] and names[-1] is None
        obs.put("four", b"4")
        new = w.next(5)
        assert new is not None and new.name == "four"
    st = obs.status()
    assert st.bucket == obs.bucket and not st.sealed and st.size > 0
    assert obs.bucket in list(js.object_store_names())
    obs.seal()
    assert obs.status().sealed
    with pytest.raises(nats.JetStreamError):
        obs.put("five", b"5")


def test_names_and_errors(js: JetStream) -> None:
    with pytest.raises(nats.BucketNotFoundError):
        js.object_store("missing" + next_nuid())
    with pytest.raises(ValueError):
        js.create_object_store(bucket="bad name")
    assert encode_name("a/b c.txt") == "YS9iIGMudHh0"
