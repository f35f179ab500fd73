"""Stream management, message get/delete, direct get, API errors."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import JetStreamNotEnabledError, NoStreamResponseError
from natsjs_sync.jetstream import JetStream, Stream, StreamConfig, StreamSource, SubjectTransform
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until


def _name() -> str:
    return "T" + next_nuid()


def test_create_info_update_delete(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_age=3600.0,
                                       duplicate_window=30.0, metadata={"team": "a"}, storage="memory"))
    try:
        cfg = st.cached_info.config
        assert cfg.max_age == 3600.0 and cfg.duplicate_window == 30.0  # seconds both ways
        assert cfg.metadata and cfg.metadata["team"] == "a"
        # Same config again is fine; a different one is "name in use".
        js.create_stream(name=name, subjects=[f"{name}.>"], max_age=3600.0, duplicate_window=30.0,
                         metadata={"team": "a"}, storage="memory")
        with pytest.raises(nats.StreamNameInUseError):
            js.create_stream(name=name, subjects=[f"{name}.other"], storage="memory")
        st2 = js.update_stream(cfg.replace(max_msgs=10))
        assert st2.cached_info.config.max_msgs == 10
        st3 = js.create_or_update_stream(name=name, subjects=[f"{name}.>"], storage="memory", max_msgs=20)
        assert st3.info().config.max_msgs == 20
        assert name in list(js.stream_names())
        assert name in [i.config.name for i in js.list_streams(subject=f"{name}.x")]
        assert list(js.stream_names(subject="nomatch.zzz")) == []
        assert js.stream_name_by_subject(f"{name}.q") == name
    finally:
        assert js.delete_stream(name) is True
    with pytest.raises(nats.StreamNotFoundError):
        js.stream(name)
    with pytest.raises(nats.StreamNotFoundError):
        js.delete_stream(name)


def test_bad_names_send_nothing(js: JetStream) -> None:
    for bad in ("", "a.b", "a b", "a*", "a>"):
        with pytest.raises(nats.BadSubjectError):
            js.create_stream(name=bad, subjects=["x.y"])
    with pytest.raises(TypeError):
        js.create_stream("ORDERS")  # type: ignore[arg-type]


def test_publish_without_stream_and_without_jetstream(js: JetStream, nc: nats.Client) -> None:
    with pytest.raises(NoStreamResponseError):
        js.publish("nostream." + next_nuid(), b"x", retry_attempts=0)
    nojs = nc.jetstream(api_prefix="$NOJS.API")
    with pytest.raises(JetStreamNotEnabledError):
        nojs.account_info()


def test_get_purge_delete(js: JetStream, stream: Stream) -> None:
    n = stream.name
    for i in range(10):
        js.publish(f"{n}.{'a' if i < 5 else 'b'}", f"m{i}".encode(), headers={"X-I": str(i)})
    m = stream.get_msg(3)
    assert (m.seq, m.subject, m.data) == (3, f"{n}.a", b"m2")
    assert m.headers is not None and m.headers["X-I"] == "2"
    assert stream.get_last_msg_for_subject(f"{n}.a").seq == 5
    assert stream.get_next_msg_for_subject(f"{n}.b", seq=2).seq == 6
    with pytest.raises(nats.MsgNotFoundError):
        stream.get_msg(99)
    assert stream.delete_msg(2) is True
    assert stream.secure_delete_msg(4) is True
    with pytest.raises(nats.MsgNotFoundError):
        stream.get_msg(2)
    info = stream.info(deleted_details=True)
    assert info.state.messages == 8
    assert sorted(info.state.deleted or []) == [2, 4]
    info = stream.info(subjects_filter=f"{n}.>")
    assert info.state.subjects == {f"{n}.a": 3, f"{n}.b": 5}
    assert stream.purge(subject=f"{n}.a") == 3
    assert stream.purge(keep=2) == 3
    assert stream.info().state.messages == 2
    assert stream.purge() == 2


def test_direct_get_single(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    try:
        for i in range(20):
            js.publish(f"{name}.k{i % 4}", f"v{i}".encode(), msg_id=f"id{i}")
        m = st.get_msg(7)
        assert (m.seq, m.data) == (7, b"v6")
        assert m.headers is not None and m.headers["Nats-Msg-Id"] == "id6"
        last = st.get_last_msg_for_subject(f"{name}.k1")
        assert last.data == b"v17"
        with pytest.raises(nats.MsgNotFoundError):
            st.get_last_msg_for_subject(f"{name}.none")
    finally:
        js.delete_stream(name)


def test_nats_py_direct_get_msg_asks_each_way(js: JetStream) -> None:
    """nats-py's get_msg(direct=True) and the native stream reads go through one direct get."""
    name = _name()
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    try:
        for i in range(8):
            js.publish(f"{name}.k{i % 2}", f"v{i}".encode())
        assert js.get_msg(name, 3, direct=True).data == b"v2"
        assert js.get_msg(name, subject=f"{name}.k1", direct=True).data == b"v7"
        assert js.get_msg(name, 4, subject=f"{name}.k1", direct=True, next=True).seq == 4
        assert js.get_msg(name, subject=f"{name}.k0", direct=True, next=True).seq == 1
        assert js.get_msg(name, 2, subject=f"{name}.k0", direct=True).seq == 7
        with pytest.raises(nats.MsgNotFoundError):
            js.get_msg(name, 99, direct=True)
        with pytest.raises(nats.MsgNotFoundError):
            js.get_msg(name, subject=f"{name}.none", direct=True)
    finally:
        js.delete_stream(name)


@pytest.mark.server("2.11")
def test_direct_get_batch_and_multi_last(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    try:
        for i in range(20):
            js.publish(f"{name}.k{i % 4}", f"v{i}".encode(), msg_id=f"id{i}")
        batch = list(st.direct_get_batch(seq=5, batch=6))
        assert [b.seq for b in batch] == list(range(5, 11))
        by_subject = list(st.direct_get_batch(seq=1, batch=10, subject=f"{name}.k2"))
        assert [b.data for b in by_subject] == [b"v2", b"v6", b"v10", b"v14", b"v18"]
        lasts = {r.subject: r.data for r in st.direct_get_last_for_subjects([f"{name}.k0", f"{name}.k3"])}
        assert lasts == {f"{name}.k0": b"v16", f"{name}.k3": b"v19"}
    finally:
        js.delete_stream(name)


@pytest.mark.server("2.11")
def test_config_features_round_trip(js: JetStream) -> None:
    """Sources, subject transforms, compression, TTLs and counters reach the server and work."""
    src, agg = _name(), _name()
    js.create_stream(name=src, subjects=[f"{src}.>"], storage="memory")
    try:
        st = js.create_stream(StreamConfig(
            name=agg, storage="file", compression="s2", allow_msg_ttl=True, subject_delete_marker_ttl=60.0,
            subjects=[f"{agg}.in.>"],
            subject_transform=SubjectTransform(src=f"{agg}.in.>", dest=f"{agg}.moved.>"),
            sources=[StreamSource(name=src)],
        ))
        cfg = st.cached_info.config
        assert cfg.compression == "s2" and cfg.allow_msg_ttl and cfg.subject_delete_marker_ttl == 60.0
        assert cfg.sources and cfg.sources[0].name == src
        js.publish(f"{src}.x", b"from-source")
        js.publish(f"{agg}.in.y", b"local", ttl=30)
        # Sourcing is asynchronous and the server offers no event for it: poll, bounded.
        assert wait_until(lambda: st.info().state.messages == 2, timeout=10)
        subjects = st.info(subjects_filter=">").state.subjects or {}
        assert set(subjects) == {f"{src}.x", f"{agg}.moved.y"}
        ttl_msg = st.get_last_msg_for_subject(f"{agg}.moved.y")
        assert ttl_msg.header("Nats-TTL")  # the server may rewrite it when delete markers are on
    finally:
        js.delete_stream(agg)
        js.delete_stream(src)


def test_api_errors_name_their_stream_and_consumer(js: JetStream, stream: Stream) -> None:
    missing = _name()
    with pytest.raises(nats.StreamNotFoundError) as info:
        js.stream(missing)
    assert str(info.value) == f"stream {missing!r} not found (code=404, err_code=10059)"
    assert info.value.stream == missing
    with pytest.raises(nats.StreamNotFoundError, match=f"stream {missing!r} not found"):
        js.delete_stream(missing)
    with pytest.raises(nats.ConsumerNotFoundError) as cinfo:
        stream.consumer("nobody", timeout=5)
    assert str(cinfo.value) == f"consumer 'nobody' of stream {stream.name!r} not found (code=404, err_code=10014)"
    assert (cinfo.value.stream, cinfo.value.consumer) == (stream.name, "nobody")
    with pytest.raises(nats.ConsumerNotFoundError, match="consumer 'nobody' of stream"):
        stream.delete_consumer("nobody", timeout=5)
    with pytest.raises(nats.MsgNotFoundError, match=f"stream {stream.name!r}"):
        stream.get_msg(99, timeout=5)
    with pytest.raises(nats.StreamNameInUseError, match=f"stream {stream.name!r}"):
        js.create_stream(name=stream.name, subjects=[f"{stream.name}.other"], storage="memory")
    kv = js.create_key_value(bucket="errs" + next_nuid(), storage="memory")
    try:
        with pytest.raises(nats.WrongLastSequenceError, match=r"^nats: wrong last sequence") as info:
            kv.update("k", b"v", last=7)  # nats-py's text; the key and bucket as attributes
        assert (info.value.key, info.value.bucket) == ("k", kv.bucket)  # type: ignore[attr-defined]
    finally:
        js.delete_key_value(kv.bucket)
