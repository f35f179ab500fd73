"""Object store calls and settings whose effect a user relies on, against a real
server: bucket update and create-or-update, listing stores, reading a deleted
object's info, the watch options, and ttl / max_bytes / compression."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, ObjectInfo, ObjectStore
from natsjs_sync.jetstream.object_models import encode_name
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until


@pytest.fixture
def buckets(js: JetStream) -> Iterator[list[str]]:
    """Names of object stores a test makes; all are deleted afterwards."""
    made: list[str] = []
    yield made
    for bucket in made:
        try:
            js.delete_object_store(bucket)
        except nats.NatsError:
            pass


def _bucket(buckets: list[str]) -> str:
    name = "c" + next_nuid()
    buckets.append(name)
    return name


@pytest.fixture
def obs(js: JetStream, buckets: list[str]) -> ObjectStore:
    return js.create_object_store(bucket=_bucket(buckets), storage="memory")


def _drain(watcher: nats.jetstream.ObjectWatcher) -> list[ObjectInfo]:
    """The infos a watcher reports before its end-of-current-values marker."""
    seen: list[ObjectInfo] = []
    for _ in range(100):
        info = watcher.next(timeout=5)
        if info is None:
            return seen
        seen.append(info)
    raise AssertionError("the watcher never marked the end of the current values")


# ---------------------------------------------------------------------- bucket management


def test_update_object_store_changes_settings_and_keeps_objects(js: JetStream, buckets: list[str]) -> None:
    name = _bucket(buckets)
    with pytest.raises(nats.BucketNotFoundError):
        js.update_object_store(bucket=name, storage="memory")
    store = js.create_object_store(bucket=name, storage="memory", ttl=60.0, description="first")
    store.put("a", b"kept")
    updated = js.update_object_store(bucket=name, storage="memory", ttl=120.0, description="second")
    status = updated.status()
    assert status.ttl == 120.0 and status.description == "second"
    assert updated.get_bytes("a") == b"kept"


def test_create_or_update_object_store(js: JetStream, buckets: list[str]) -> None:
    name = _bucket(buckets)
    made = js.create_or_update_object_store(bucket=name, storage="memory")
    made.put("a", b"1")
    again = js.create_or_update_object_store(bucket=name, storage="memory", description="now described")
    assert again.status().description == "now described"
    assert again.get_bytes("a") == b"1"


def test_object_stores_lists_every_bucket_with_its_status(js: JetStream, buckets: list[str]) -> None:
    first = js.create_object_store(bucket=_bucket(buckets), storage="memory", description="one")
    js.create_object_store(bucket=_bucket(buckets), storage="memory")
    first.put("a", b"12345")
    statuses = {s.bucket: s for s in js.object_stores()}
    assert set(buckets) <= set(statuses)
    assert statuses[first.bucket].description == "one"
    assert statuses[first.bucket].size > 0
    assert set(buckets) <= set(js.object_store_names())


# ---------------------------------------------------------------------- objects


def test_get_show_deleted_reads_a_deleted_objects_info(obs: ObjectStore) -> None:
    obs.put("a", b"gone soon")
    obs.delete("a")
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get("a")
    with obs.get("a", show_deleted=True) as result:
        assert result.info.deleted is True and result.info.name == "a"
        assert result.read() == b""
    assert obs.get_info("a", show_deleted=True).deleted is True


def test_watch_include_history_reports_every_version(js: JetStream, obs: ObjectStore) -> None:
    obs.put("a", b"1")
    obs.put("b", b"x")
    # Each put rolls the object's earlier infos up, so history is only left when
    # an info is written without a rollup, as a client that does not roll up would:
    # write a's info again, plainly, after b's.
    stream = js.stream(f"OBJ_{obs.bucket}")
    meta = stream.get_last_msg_for_subject(f"$O.{obs.bucket}.M.{encode_name('a')}")
    js.publish(meta.subject, meta.data)
    with obs.watch() as w:
        assert [i.name for i in _drain(w)] == ["b", "a"]  # the newest info of each object
    with obs.watch(include_history=True) as w:
        assert [i.name for i in _drain(w)] == ["a", "b", "a"]  # every info still in the bucket


def test_watch_ignore_deletes_skips_deleted_objects(obs: ObjectStore) -> None:
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.delete("b")
    with obs.watch() as w:
        assert [(i.name, i.deleted) for i in _drain(w)] == [("a", False), ("b", True)]
    with obs.watch(ignore_deletes=True) as w:
        assert [i.name for i in _drain(w)] == ["a"]
        obs.delete("a")
        obs.put("c", b"3")
        info = w.next(timeout=5)
        assert info is not None and info.name == "c"  # the delete of "a" was passed over


def test_watch_updates_only_starts_with_the_next_change(obs: ObjectStore) -> None:
    obs.put("a", b"old")
    with obs.watch(updates_only=True) as w:
        obs.put("b", b"new")
        info = w.next(timeout=5)
        assert info is not None and info.name == "b"  # neither "a" nor an end marker came first


# ---------------------------------------------------------------------- bucket settings


def test_ttl_removes_objects_once_they_are_older(js: JetStream, buckets: list[str]) -> None:
    store = js.create_object_store(bucket=_bucket(buckets), storage="memory", ttl=1.0)
    assert store.status().ttl == 1.0
    store.put("a", b"short-lived")

    def gone() -> bool:
        try:
            store.get_info("a")
        except nats.ObjectNotFoundError:
            return True
        return False

    assert wait_until(gone, timeout=15, interval=0.2)


def test_max_bytes_refuses_an_object_that_does_not_fit(js: JetStream, buckets: list[str]) -> None:
    store = js.create_object_store(bucket=_bucket(buckets), storage="memory", max_bytes=4096)
    store.put("small", b"x" * 100)
    with pytest.raises(nats.JetStreamError):
        store.put("big", b"y" * 10_000)
    assert store.get_bytes("small") == b"x" * 100
    with pytest.raises(nats.ObjectNotFoundError):
        store.get_info("big")


def test_compression_stores_s2_and_reads_back_the_same_bytes(js: JetStream, buckets: list[str]) -> None:
    store = js.create_object_store(bucket=_bucket(buckets), storage="file", compression=True)
    status = store.status()
    assert status.is_compressed is True
    assert status.stream_info.config.compression == "s2"
    data = b"compress me " * 20_000
    store.put("big", data)
    assert store.get_bytes("big") == data
