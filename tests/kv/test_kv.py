"""Key-value store: values, revisions, CAS, deletes, keys, history, watch, buckets."""

from __future__ import annotations

import itertools
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BucketExistsError, FeatureNotSupportedError, InvalidBucketNameError, InvalidKeyError
from natsjs_sync.jetstream import JetStream, KeyValue, KeyValueConfig, KeyValueOp
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until


def test_put_get_revisions(kv: KeyValue) -> None:
    r1 = kv.put("sue.color", b"blue")
    r2 = kv.put("sue.color", "green")
    e = kv.get("sue.color")
    assert (e.key, e.value, e.revision, e.operation) == ("sue.color", b"green", r2, KeyValueOp.PUT)
    assert e.bucket == kv.bucket and e.created is not None
    assert kv.get("sue.color", revision=r1).value == b"blue"
    with pytest.raises(nats.KeyNotFoundError):
        kv.get("sue.size")
    kv.put("other", b"x")
    with pytest.raises(nats.KeyNotFoundError):  # a revision of another key
        kv.get("sue.color", revision=r2 + 1)


def test_create_update_cas(kv: KeyValue) -> None:
    r1 = kv.create("k", b"1")
    with pytest.raises(nats.KeyExistsError):
        kv.create("k", b"again")
    r2 = kv.update("k", b"2", last=r1)
    with pytest.raises(nats.WrongLastSequenceError):
        kv.update("k", b"3", last=r1)
    kv.delete("k")
    r4 = kv.create("k", b"back")  # create succeeds over a deleted key
    assert r4 > r2 and kv.get("k").value == b"back"
    kv.purge("k")
    assert kv.create("k", b"after purge") > r4


def test_delete_purge_and_history(kv: KeyValue) -> None:
    for i in range(3):
        kv.put("h", str(i).encode())
    kv.delete("h")
    with pytest.raises(nats.KeyDeletedError):
        kv.get("h")
    hist = kv.history("h")
    assert [(e.value, e.operation) for e in hist] == [(b"0", KeyValueOp.PUT), (b"1", KeyValueOp.PUT),
                                                     (b"2", KeyValueOp.PUT), (b"", KeyValueOp.DEL)]
    last = hist[-1].revision
    with pytest.raises(nats.WrongLastSequenceError):
        kv.delete("h", last=last - 1)
    kv.purge("h")
    assert [e.operation for e in kv.history("h")] == [KeyValueOp.PURGE]
    with pytest.raises(nats.KeyNotFoundError):
        kv.history("never")


def test_keys_filtered_on_server(kv: KeyValue) -> None:
    with pytest.raises(nats.errors.NoKeysError):
        kv.keys()
    for k in ("users.a", "users.b", "orders.1", "orders.2", "gone"):
        kv.put(k, b"v")
    kv.put("users.a", b"v2")
    kv.delete("gone")
    assert sorted(kv.keys()) == ["orders.1", "orders.2", "users.a", "users.b"]
    assert sorted(kv.keys("users.*")) == ["users.a", "users.b"]
    assert sorted(kv.keys("users.a", "orders.>")) == ["orders.1", "orders.2", "users.a"]
    assert sorted(kv.keys(filters=["orders.*"])) == ["orders.1", "orders.2"]


def test_list_keys_streams_them_and_can_stop_early(kv: KeyValue) -> None:
    assert list(kv.list_keys()) == []  # an empty bucket: the listing just ends
    for i in range(50):
        kv.put(f"k.{i:02d}", b"v")
    kv.put("other", b"v")
    kv.delete("k.07")
    assert sorted(kv.list_keys("k.*")) == [f"k.{i:02d}" for i in range(50) if i != 7]
    assert list(kv.list_keys(filters=["other"])) == ["other"]
    with kv.list_keys() as lister:
        first = list(itertools.islice(lister, 3))
    assert len(first) == 3 and set(first) <= set(kv.keys())
    lister.stop()  # stopping twice is fine
    # Every listing deleted its consumer on the server, the one stopped early too.
    stream = kv._js.stream(kv.stream_name)
    assert wait_until(lambda: stream.info().state.consumer_count == 0, timeout=10)


def test_purge_deletes(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.delete("a")
    kv.purge("b")
    kv.put("c", b"1")
    assert kv.purge_deletes(older_than=0) == 2
    assert kv.status().values == 1
    with pytest.raises(nats.KeyNotFoundError):
        kv.history("a")


def test_watch_initial_marker_and_updates(kv: KeyValue) -> None:
    kv.put("w.1", b"a")
    kv.put("w.1", b"b")
    kv.put("w.2", b"c")
    kv.put("x", b"not watched")
    got = []
    with kv.watch("w.*") as w:
        for entry in w:
            got.append(None if entry is None else (entry.key, entry.value))
            if entry is None:
                kv.put("w.3", b"d")
                kv.delete("w.1")
            if len(got) == 5:
                break
    assert got == [("w.1", b"b"), ("w.2", b"c"), None, ("w.3", b"d"), ("w.1", b"")]


def test_watch_options(kv: KeyValue) -> None:
    empty = kv.watch_all()
    assert empty.next(timeout=2) is None  # nothing yet: the marker at once
    empty.stop()
    r1 = kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"x")
    kv.delete("b")
    with kv.watch("a", include_history=True) as w:
        assert [w.next(2).value, w.next(2).value, w.next(2)] == [b"1", b"2", None]  # type: ignore[union-attr]
    with kv.watch_all(ignore_deletes=True) as w:
        first = w.next(2)
        assert first is not None and first.key == "a" and w.next(2) is None
    with kv.watch_all(meta_only=True) as w:
        e = w.next(2)
        assert e is not None and e.key == "a" and e.value == b""
    with kv.watch("a", resume_from_revision=r1) as w:
        assert w.next(2).value == b"1"  # type: ignore[union-attr]
    with kv.watch_all(updates_only=True) as w:
        with pytest.raises(nats.TimeoutError):
            w.next(timeout=0.3)
        kv.put("c", b"new")
        e = w.next(2)
        assert e is not None and e.key == "c"


def test_watch_stop_from_another_thread(kv: KeyValue) -> None:
    w = kv.watch_all(updates_only=True)
    ended = threading.Event()

    def reader() -> None:
        for _ in w:
            pass
        ended.set()

    t = threading.Thread(target=reader)
    t.start()
    w.stop()
    assert ended.wait(5)
    t.join(5)


def test_bad_keys_and_buckets(js: JetStream, kv: KeyValue) -> None:
    for bad in ("", ".a", "a.", "a..b", "a b", "a*", "a>", "ä"):
        with pytest.raises(InvalidKeyError):
            kv.put(bad, b"x")
    with pytest.raises(InvalidKeyError):
        kv.watch("a.>.b")
    with pytest.raises(TypeError):
        kv.put("k", 42)  # type: ignore[arg-type]
    for bad in ("", "a.b", "a b", "a*"):
        with pytest.raises(InvalidBucketNameError):
            js.create_key_value(bucket=bad)
    with pytest.raises(ValueError):
        js.create_key_value(bucket="toomuch", history=65)
    with pytest.raises(nats.BucketNotFoundError):
        js.key_value("nope" + next_nuid())


def test_bucket_management(js: JetStream) -> None:
    bucket = "m" + next_nuid()
    kv = js.create_key_value(KeyValueConfig(bucket=bucket, history=3, ttl=3600.0, description="d",
                                            metadata={"team": "x"}, compression=True, storage="memory"))
    try:
        st = kv.status()
        assert (st.bucket, st.history, st.ttl, st.is_compressed, st.backing_store) == (bucket, 3, 3600.0, True,
                                                                                     "JetStream")
        assert st.metadata["team"] == "x"
        assert (st.description, st.storage, st.replicas) == ("d", "memory", 1)
        cfg = st.stream_info.config
        assert cfg.name == f"KV_{bucket}" and cfg.subjects == [f"$KV.{bucket}.>"]
        assert cfg.allow_direct and cfg.allow_rollup_hdrs and cfg.deny_delete and cfg.discard == "new"
        assert cfg.duplicate_window == 120.0
        # Same config: fine; another: BucketExistsError; update changes it.
        js.create_key_value(bucket=bucket, history=3, ttl=3600.0, description="d", metadata={"team": "x"},
                            compression=True, storage="memory")
        with pytest.raises(BucketExistsError):
            js.create_key_value(bucket=bucket, history=4, storage="memory")
        js.update_key_value(bucket=bucket, history=4, storage="memory")
        assert js.key_value(bucket).status().history == 4
        assert bucket in list(js.key_value_store_names())
        assert bucket in [s.bucket for s in js.key_value_stores()]
    finally:
        assert js.delete_key_value(bucket)
    with pytest.raises(nats.BucketNotFoundError):
        js.delete_key_value(bucket)


@pytest.mark.server("2.11")
def test_per_key_ttl_and_limit_markers(js: JetStream) -> None:
    bucket = "t" + next_nuid()
    kv = js.create_key_value(bucket=bucket, limit_marker_ttl=5.0, storage="memory")
    try:
        assert kv.status().limit_marker_ttl == 5.0
        kv.create("short", b"x", ttl=1)
        assert kv.get("short").value == b"x"
        # The server removes the key after its TTL and leaves a marker; a watcher sees it.
        with kv.watch("short", updates_only=True) as w:
            e = w.next(timeout=10)
        assert e is not None and e.operation in (KeyValueOp.DEL, KeyValueOp.PURGE)
        with pytest.raises(nats.KeyNotFoundError):
            kv.get("short")
        assert kv.create("short", b"again") > 0
    finally:
        js.delete_key_value(bucket)


def test_sources_and_mirror(js: JetStream) -> None:
    a, b, m = ("s" + next_nuid() for _ in range(3))
    src = js.create_key_value(bucket=a, storage="memory")
    try:
        src.put("k1", b"from-a")
        agg = js.create_key_value(bucket=b, storage="memory", sources=[{"name": a}])  # type: ignore[list-item]
        mirror = js.create_key_value(bucket=m, storage="memory", mirror={"name": a})  # type: ignore[arg-type]
        with agg.watch("k1") as w:
            e = w.next(timeout=10)
            if e is None:
                e = w.next(timeout=10)
        assert e is not None and e.value == b"from-a"
        with mirror.watch("k1") as w:
            e = w.next(timeout=10)
            if e is None:
                e = w.next(timeout=10)
        assert e is not None and e.value == b"from-a"
        assert mirror.get("k1").value == b"from-a"
    finally:
        for bucket in (a, b, m):
            try:
                js.delete_key_value(bucket)
            except nats.NatsError:
                pass


def test_status_config_reads_the_bucket_back(js: JetStream) -> None:
    bucket = "c" + next_nuid()
    kv = js.create_key_value(bucket=bucket, history=3, ttl=60.0, max_value_size=1024, description="d",
                             storage="memory", metadata={"team": "a"})
    try:
        cfg = kv.status().config
        assert (cfg.bucket, cfg.history, cfg.ttl, cfg.max_value_size, cfg.description, cfg.storage) == (
            bucket, 3, 60.0, 1024, "d", "memory")
        assert cfg.metadata is not None and cfg.metadata["team"] == "a" and cfg.direct is True
        # The config read back makes the same bucket: it is opened, not refused.
        assert js.create_key_value(cfg).bucket == bucket
        with pytest.raises(BucketExistsError):
            js.create_key_value(cfg.replace(history=4))
    finally:
        js.delete_key_value(bucket)


def test_limit_markers_and_key_ttls_need_2_11(js: JetStream) -> None:
    bucket = "m" + next_nuid()
    if js.supports("limit_markers"):
        kv = js.create_key_value(bucket=bucket, limit_marker_ttl=5.0, storage="memory")
        assert kv.status().config.limit_marker_ttl == 5.0
        js.delete_key_value(bucket)
        return
    with pytest.raises(FeatureNotSupportedError, match=r"2\.11"):
        js.create_key_value(bucket=bucket, limit_marker_ttl=5.0, storage="memory")
    with pytest.raises(nats.BucketNotFoundError):
        js.key_value(bucket)
    kv = js.create_key_value(bucket=bucket, storage="memory")
    try:
        with pytest.raises(FeatureNotSupportedError):
            kv.create("k", b"v", ttl=5)
        with pytest.raises(FeatureNotSupportedError):
            kv.purge("k", ttl=5)
        with pytest.raises(nats.errors.NoKeysError):
            kv.keys()
    finally:
        js.delete_key_value(bucket)


def test_none_means_no_limit_for_every_optional_limit(js: JetStream) -> None:
    bucket = "none" + next_nuid()
    kv = js.create_key_value(bucket=bucket, history=2, ttl=None, max_bytes=None, max_value_size=None,
                             limit_marker_ttl=None, storage="memory")
    try:
        cfg = kv.status().config
        assert (cfg.ttl, cfg.max_bytes, cfg.max_value_size) == (0.0, -1, -1)
        assert kv.put("k", b"v") == 1
    finally:
        js.delete_key_value(bucket)
    obs = js.create_object_store(bucket=bucket, ttl=None, max_bytes=None, storage="memory")
    try:
        assert obs.put_bytes("o", b"x").size == 1
        assert obs.status().ttl == 0.0
    finally:
        js.delete_object_store(bucket)
    stream = js.create_stream(name=bucket, subjects=[f"{bucket}.>"], storage="memory", max_consumers=None,
                              max_msgs=None, max_bytes=None, max_age=None, max_msgs_per_subject=None,
                              max_msg_size=None)
    try:
        cfg = stream.info().config
        assert (cfg.max_msgs, cfg.max_bytes, cfg.max_age, cfg.max_msg_size) == (-1, -1, 0.0, -1)
        assert js.update_stream(cfg.replace(max_bytes=None, max_age=None)).config.max_bytes == -1
    finally:
        js.delete_stream(bucket)


def test_a_watch_of_values_past_the_servers_max_pending_stays_connected(small_pending_server: object) -> None:
    """100 values of 60 KB (6 MB) on a server whose ``max_pending`` is 1 MiB: a watcher's pulls are bounded
    by bytes, so the server never queues more than it allows and never cuts the client off as a slow
    consumer (which made the watch heal over and over: 25 s for the initial values)."""
    from natsjs_sync.testing import NatsServer

    assert isinstance(small_pending_server, NatsServer)
    errors: list[BaseException] = []
    with nats.connect(small_pending_server.url, name="kv-watch-bytes", error_cb=errors.append) as nc:
        kv = nc.jetstream().create_key_value(bucket="WB" + next_nuid()[-8:], history=1)
        for i in range(100):
            kv.put(f"k{i}", i.to_bytes(4, "big") * 15_000)
        with kv.watch_all() as w:
            values = {}
            while (entry := w.next(timeout=10)) is not None:
                values[entry.key] = entry.value
        assert values == {f"k{i}": i.to_bytes(4, "big") * 15_000 for i in range(100)}
        assert errors == []
        assert "Slow Consumer" not in small_pending_server.read_log()
        nc.jetstream().delete_key_value(kv.bucket)
