"""Server features by version (ADR-44): each newer option either works on the
connected server or fails at once with FeatureNotSupportedError, never silently
dropped and never waiting for its timeout. Run the suite with NATS_SERVER_BIN
pointing at 2.10, 2.11, 2.12 and the newest to see both sides."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BatchPublishError, FeatureNotSupportedError, InvalidResponseError
from natsjs_sync.jetstream import ConsumerConfig, JetStream, Stream, StreamConfig, _features
from natsjs_sync.jetstream._api import from_wire, to_wire
from natsjs_sync.jetstream.stream_config import StreamInfo
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until


def _name() -> str:
    return "F" + next_nuid()


def _later(seconds: float = 3600) -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


# ---------------------------------------------------------------------- no server


def test_version_parsing_and_the_table() -> None:
    assert _features.parse_version("2.11.3") == (2, 11, 3)
    assert _features.parse_version("v2.12.0-RC.1") == (2, 12, 0)
    assert _features.parse_version("2.14") == (2, 14, 0)
    assert _features.parse_version("") is None and _features.parse_version(None) is None
    versions = {k: f.version for k, f in _features.FEATURES.items()}
    assert versions["msg_ttl"] == (2, 11, 0) and versions["counters"] == (2, 12, 0)
    assert versions["consumer_reset"] == (2, 14, 0)
    # A feature asks for no more than the API level of the first release that has it
    # (nats-server's JSApiLevel: 2.12.0 to 2.12.4 are level 2, 2.12.5 is 3).
    first_levels = {(2, 11, 0): 1, (2, 12, 0): 2, (2, 14, 0): 4}
    assert {k: f.api_level for k, f in _features.FEATURES.items() if f.api_level > first_levels[f.version]} == {}
    assert _features.FEATURES["counters"].api_level == 2
    assert _features.FEATURES["priority_prioritized"].api_level == 1  # the server's rule for any priority policy


def test_require_names_the_feature_and_the_version() -> None:
    old = {"version": "2.10.26"}
    with pytest.raises(FeatureNotSupportedError) as info:
        _features.require(old, "msg_ttl")
    err = info.value
    assert isinstance(err, nats.JetStreamError)
    assert err.required == "2.11.0" and err.server_version == "2.10.26"
    assert "per-message TTL" in str(err) and "2.11.0" in str(err) and "2.10.26" in str(err)
    _features.require({"version": "2.11.0"}, "msg_ttl")  # exactly the version: fine
    _features.require({}, "consumer_reset")  # a server that says nothing is trusted
    with pytest.raises(FeatureNotSupportedError, match=r"2\.14\.0"):
        _features.require({"version": "2.12.8"}, "msg_ttl", "consumer_reset")


def test_configs_name_the_features_they_use() -> None:
    cfg = StreamConfig(name="x", allow_msg_ttl=True, subject_delete_marker_ttl=5.0, allow_msg_counter=True,
                       allow_atomic=True, allow_msg_schedules=True, persist_mode="async", allow_batched=True)
    assert set(_features.stream_config_features(cfg)) == {
        "msg_ttl", "limit_markers", "counters", "atomic_batch", "msg_schedules", "persist_mode", "fast_batch"}
    assert _features.stream_config_features(StreamConfig(name="x", persist_mode="default")) == []
    assert _features.consumer_config_features(ConsumerConfig(priority_policy="prioritized",
                                                             priority_groups=["g"])) == ["priority_prioritized"]
    assert _features.consumer_config_features(ConsumerConfig(priority_policy="pinned_client", priority_groups=["g"],
                                                             pause_until=_later())) == [
        "priority_groups", "consumer_pause"]
    assert _features.consumer_config_features(ConsumerConfig()) == []


def test_unknown_fields_survive_decode_and_encode() -> None:
    wire = {"type": "io.nats.jetstream.api.v1.stream_info_response",
            "config": {"name": "X", "subjects": ["x.>"], "max_age": 2_000_000_000, "future_flag": True,
                       "future_ttl": 7, "sources": [{"name": "Y", "future_src": {"a": 1}}]},
            "state": {"messages": 3, "future_count": 4}, "created": "2026-01-02T03:04:05Z"}
    info = from_wire(wire, StreamInfo)
    assert info.config.unknown_fields == {"future_flag": True, "future_ttl": 7}  # kept in wire form
    assert info.config.sources and info.config.sources[0].unknown_fields == {"future_src": {"a": 1}}
    assert info.state.unknown_fields == {"future_count": 4} and info.unknown_fields is None
    out = to_wire(info.config.replace(max_age=3.0, description="changed"))
    assert out["future_flag"] is True and out["future_ttl"] == 7 and out["max_age"] == 3_000_000_000
    assert out["sources"] == [{"name": "Y", "future_src": {"a": 1}}] and "unknown_fields" not in out
    with pytest.raises(InvalidResponseError):  # never msgspec's own error
        from_wire({"config": {"name": 5}}, StreamInfo)


def test_schedule_headers_as_the_adr_spells_them() -> None:
    from natsjs_sync.jetstream.publish_options import publish_headers

    features: list[str] = []
    at = datetime.datetime(2030, 1, 2, 3, 4, 5, 678, tzinfo=datetime.timezone.utc)
    h = publish_headers(None, schedule_at=at, schedule_target="t.out", features=features)
    assert dict(h or {}) == {"Nats-Schedule": "@at 2030-01-02T03:04:05Z", "Nats-Schedule-Target": "t.out"}
    assert features == ["msg_schedules"]
    features.clear()
    h = publish_headers({"App": "1"}, schedule_every=1.5, schedule_source="t.src", schedule_target="t.out",
                        schedule_ttl="never", schedule_rollup=True, features=features)
    assert dict(h or {}) == {"App": "1", "Nats-Schedule": "@every 1500ms", "Nats-Schedule-Target": "t.out",
                             "Nats-Schedule-Source": "t.src", "Nats-Schedule-TTL": "never",
                             "Nats-Schedule-Rollup": "sub"}
    assert features == ["schedule_patterns"]
    h = publish_headers(None, schedule_cron="@daily", schedule_time_zone="Asia/Tokyo", schedule_target="t.o",
                        schedule_ttl=300)
    assert dict(h or {}) == {"Nats-Schedule": "@daily", "Nats-Schedule-Time-Zone": "Asia/Tokyo",
                             "Nats-Schedule-Target": "t.o", "Nats-Schedule-TTL": "300s"}


def test_publish_option_checks_happen_before_sending(js: JetStream, stream: Stream) -> None:
    subj = f"{stream.name}.x"
    with pytest.raises(ValueError, match="schedule_target"):
        js.publish(subj, b"", schedule_at=_later())
    with pytest.raises(ValueError, match="exactly one"):
        js.publish(subj, b"", schedule_at=_later(), schedule_cron="@hourly", schedule_target=subj)
    with pytest.raises(ValueError, match="only goes with schedule_cron"):
        js.publish(subj, b"", schedule_every=5, schedule_time_zone="Europe/Amsterdam", schedule_target=subj)
    with pytest.raises(ValueError, match="at least 1"):
        js.publish(subj, b"", schedule_every=0.5, schedule_target=subj)
    with pytest.raises(ValueError, match="needs expected_last_subject_seq"):
        js.publish(subj, b"", expected_last_subject_seq_subject=f"{stream.name}.y")
    with pytest.raises(ValueError, match="retry_wait"):
        js.publish(subj, b"", retry_wait=0)
    assert stream.info().state.messages == 0


# ---------------------------------------------------------------------- gated calls


def _gated(js: JetStream, feature: str, call: Callable[[], Any]) -> Any:
    """``call`` works when the server has ``feature``; otherwise it raises at once."""
    if js.supports(feature):
        return call()
    started = time.monotonic()
    with pytest.raises(FeatureNotSupportedError) as info:
        call()
    assert time.monotonic() - started < 10  # a bug waits for the API timeout instead
    assert info.value.required == str(_features.FEATURES[feature].version)
    return None


def test_account_info_reports_the_api_level(js: JetStream) -> None:
    info = js.account_info()
    assert info.reserved_memory >= 0 and info.reserved_storage >= 0
    level = info.api.level or 0  # None: a server before 2.11, which sends no level
    assert (level >= 1) == js.supports("msg_ttl")
    assert (level >= 2) == js.supports("counters")
    assert js.server_version == js.nc.server_info["version"]
    with pytest.raises(KeyError):
        js.supports("no-such-feature")


def test_pause_resume_unpin_on_the_stream_handle(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="P", priority_policy="pinned_client", priority_groups=["g"]) \
        if js.supports("priority_groups") else stream.create_consumer(durable_name="P")
    paused = _gated(js, "consumer_pause", lambda: stream.pause_consumer("P", _later()))
    if paused is not None:
        assert paused.paused is True and paused.pause_until is not None
        assert stream.consumer("P").info().paused is True
        resumed = stream.resume_consumer("P")
        assert resumed.paused is False and stream.consumer("P").info().paused is False
    _gated(js, "consumer_unpin", lambda: stream.unpin_consumer("P", "g"))
    _gated(js, "consumer_pause", lambda: stream.create_consumer(durable_name="Q", pause_until=_later()))
    with pytest.raises(TypeError):
        stream.pause_consumer("P", 5)  # type: ignore[arg-type]


def test_msg_ttl_expires_or_is_refused(js: JetStream) -> None:
    name = _name()
    created = _gated(js, "msg_ttl", lambda: js.create_stream(name=name, subjects=[f"{name}.>"],
                                                             storage="memory", allow_msg_ttl=True))
    if created is None:
        # The stream without TTLs is made, but a TTL on a publish is refused before it goes out.
        st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        with pytest.raises(FeatureNotSupportedError):
            js.publish(f"{name}.a", b"x", ttl=1)
        with pytest.raises(FeatureNotSupportedError):
            js.publish_async(f"{name}.a", b"x", ttl=1)
        assert st.info().state.messages == 0
        js.delete_stream(name)
        return
    try:
        js.publish(f"{name}.a", b"x", ttl=1)
        js.publish(f"{name}.b", b"y")
        # The server removes the message after its TTL; nothing announces it.
        assert wait_until(lambda: created.info().state.messages == 1, timeout=10)
    finally:
        js.delete_stream(name)


def test_direct_get_batch_refused_before_2_11(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    try:
        js.publish(f"{name}.a", b"1")
        js.publish(f"{name}.b", b"2")
        got = _gated(js, "direct_get_batch", lambda: [m.seq for m in st.direct_get_batch(seq=1, batch=5)])
        assert got in (None, [1, 2])
        lasts = _gated(js, "direct_get_batch",
                       lambda: sorted(m.subject for m in st.direct_get_last_for_subjects([f"{name}.>"])))
        assert lasts in (None, [f"{name}.a", f"{name}.b"])
    finally:
        js.delete_stream(name)


def test_expected_last_subject_sequence_for_another_subject(js: JetStream, stream: Stream) -> None:
    a, b = f"{stream.name}.a", f"{stream.name}.b"
    js.publish(a, b"1")
    seq = js.publish(a, b"2").seq

    def check() -> None:
        js.publish(b, b"x", expected_last_subject_seq=seq, expected_last_subject_seq_subject=a)
        with pytest.raises(nats.WrongLastSequenceError):
            js.publish(b, b"y", expected_last_subject_seq=seq - 1, expected_last_subject_seq_subject=a)

    _gated(js, "expected_last_subject_seq_subject", check)


def test_streams_with_newer_options_are_refused_on_older_servers(js: JetStream) -> None:
    for feature, options in [("counters", {"allow_msg_counter": True}), ("atomic_batch", {"allow_atomic": True}),
                             ("msg_schedules", {"allow_msg_schedules": True}),
                             ("persist_mode", {"persist_mode": "async", "storage": "file"}),
                             ("fast_batch", {"allow_batched": True}),
                             ("limit_markers", {"allow_msg_ttl": True, "subject_delete_marker_ttl": 5.0})]:
        name = _name()
        kwargs: dict[str, Any] = {"storage": "memory", **options}
        st = _gated(js, feature, lambda n=name, kw=kwargs: js.create_stream(name=n, subjects=[f"{n}.>"], **kw))
        if st is not None:
            cfg = st.cached_info.config
            assert all(getattr(cfg, k) == v for k, v in options.items()), (feature, cfg)
            js.delete_stream(name)
        else:
            with pytest.raises(nats.StreamNotFoundError):
                js.stream(name)


# ---------------------------------------------------------------------- never lose a field


@pytest.mark.server("2.14")
def test_update_keeps_settings_made_by_another_tool(js: JetStream) -> None:
    name = _name()
    # Another tool makes the stream, straight through the API.
    raw = {"name": name, "subjects": [f"{name}.>"], "storage": "file", "allow_batched": True,
           "persist_mode": "async", "retention": "limits", "discard": "old", "num_replicas": 1}
    js.nc.request(f"$JS.API.STREAM.CREATE.{name}", to_json(raw), timeout=5)
    try:
        cfg = js.stream(name).cached_info.config
        assert cfg.allow_batched is True and cfg.persist_mode == "async"
        updated = js.update_stream(cfg.replace(description="changed by natsjs_sync")).cached_info.config
        assert updated.description == "changed by natsjs_sync"
        assert updated.allow_batched is True and updated.persist_mode == "async"
    finally:
        js.delete_stream(name)


def to_json(obj: Any) -> bytes:
    import json

    return json.dumps(obj).encode()


# ---------------------------------------------------------------------- counters (ADR-49)


@pytest.mark.server("2.12")
def test_counters(js: JetStream) -> None:
    name = _name()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_msg_counter=True, allow_direct=True)
    try:
        counter = js.counter(name)
        assert counter.value(f"{name}.hits") == 0
        assert counter.add(f"{name}.hits", 5) == 5
        assert counter.increment(f"{name}.hits") == 6
        assert counter.add(f"{name}.hits", -10) == -4
        big = 10**30  # beyond 64 bits: the server counts in big integers, and so do we
        assert counter.add(f"{name}.big", big) == big
        ack = js.publish(f"{name}.hits", b"", headers={"Nats-Incr": "+4"})
        assert ack.value == "0"  # the server's "val" reaches PubAck.value
        entry = counter.get(f"{name}.hits")
        assert (entry.subject, entry.value, entry.increment) == (f"{name}.hits", 0, 4)
        assert entry.sources == {}
        many = {e.subject: e.value for e in counter.get_multiple([f"{name}.>"])}
        assert many == {f"{name}.hits": 0, f"{name}.big": big}
        with pytest.raises(TypeError):
            counter.add(f"{name}.hits", 1.5)  # type: ignore[arg-type]
    finally:
        js.delete_stream(name)
    plain = _name()
    js.create_stream(name=plain, subjects=[f"{plain}.>"], storage="memory")
    try:
        with pytest.raises(nats.JetStreamError, match="allow_msg_counter"):
            js.counter(plain)
    finally:
        js.delete_stream(plain)


# ---------------------------------------------------------------------- atomic batches (ADR-50)


@pytest.mark.server("2.12")
def test_atomic_batch_commit_and_incomplete(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_atomic=True)
    try:
        with js.atomic_batch() as batch:
            batch.add(f"{name}.a", b"1")
            batch.add(f"{name}.b", b"2", headers={"k": "v"})
            batch.add(f"{name}.a", b"3", ack=True)
            ack = batch.commit(f"{name}.c", b"4")
        assert ack.batch_id == batch.batch_id and ack.batch_size == 4 and ack.seq == 4
        assert st.info().state.messages == 4 and st.get_msg(2).header("k") == "v"
        # A batch with a gap is abandoned by the server: nothing of it is stored.
        broken = js.atomic_batch()
        broken.add(f"{name}.a", b"x")
        broken._seq += 1  # lose a message on purpose
        with pytest.raises(BatchPublishError):
            broken.commit(f"{name}.a", b"y")
        assert st.info().state.messages == 4
        with pytest.raises(BatchPublishError, match="over"):
            broken.add(f"{name}.a", b"z")
        # Leaving the block without commit is an error too.
        with pytest.raises(BatchPublishError, match="without commit"), js.atomic_batch() as batch:
            batch.add(f"{name}.a", b"never")
        assert st.info().state.messages == 4
    finally:
        js.delete_stream(name)
    plain = _name()
    js.create_stream(name=plain, subjects=[f"{plain}.>"], storage="memory")
    try:
        with pytest.raises(BatchPublishError):  # the stream does not allow atomic batches
            js.atomic_batch().add(f"{plain}.a", b"x")
        with pytest.raises(ValueError):
            js.atomic_batch(batch_id="x" * 65)
    finally:
        js.delete_stream(plain)


@pytest.mark.server("2.12")
def test_atomic_batch_commit_without_a_message(js: JetStream) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_atomic=True)
    try:
        batch = js.atomic_batch()
        batch.add(f"{name}.a", b"1")
        batch.add(f"{name}.b", b"2")
        ack = _gated(js, "atomic_batch_eob", batch.commit)
        if ack is not None:
            assert ack.batch_size == 2 and st.info().state.messages == 2
    finally:
        js.delete_stream(name)


# ---------------------------------------------------------------------- schedules (ADR-51)


def _first_on(js: JetStream, stream: str, subject: str, wait: float = 10.0) -> nats.Msg:
    cons = js.create_consumer(stream, filter_subject=subject, ack_policy="none")
    return cons.next(timeout=wait)


@pytest.mark.server("2.12")
def test_schedule_at(js: JetStream) -> None:
    name = _name()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_msg_schedules=True)
    try:
        js.publish(f"{name}.sched.one", b"later", headers={"App": "x"},
                   schedule_at=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1),
                   schedule_target=f"{name}.out")
        msg = _first_on(js, name, f"{name}.out")
        assert msg.data == b"later" and msg.headers is not None and msg.headers.get("App") == "x"
        assert msg.headers.get("Nats-Scheduler") == f"{name}.sched.one"
    finally:
        js.delete_stream(name)


def test_schedule_patterns(js: JetStream) -> None:
    name = _name()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_msg_schedules=True,
                     allow_msg_ttl=True) if js.supports("msg_schedules") else \
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        js.publish(f"{name}.sensor", b"21.5")
        _gated(js, "schedule_patterns", lambda: js.publish(
            f"{name}.sched.sample", b"", schedule_every=1, schedule_source=f"{name}.sensor",
            schedule_target=f"{name}.sampled", schedule_ttl=60))
        _gated(js, "schedule_patterns", lambda: js.publish(
            f"{name}.sched.cron", b"tick", schedule_cron="0 0 5 * * *", schedule_time_zone="Europe/Amsterdam",
            schedule_target=f"{name}.out"))
        if js.supports("schedule_patterns"):
            msg = _first_on(js, name, f"{name}.sampled")
            assert msg.data == b"21.5" and msg.headers is not None and msg.headers.get("Nats-TTL") == "60s"
            js.stream(name).purge(subject=f"{name}.sched.sample")  # deleting the schedule stops it
    finally:
        js.delete_stream(name)


# ---------------------------------------------------------------------- consumer reset


def test_consumer_reset(js: JetStream, stream: Stream) -> None:
    for i in range(5):
        js.publish(f"{stream.name}.x", str(i).encode())
    cons = stream.create_consumer(durable_name="R")
    for msg in cons.fetch(5, max_wait=5):
        msg.ack_sync()
    reset = _gated(js, "consumer_reset", lambda: stream.reset_consumer("R", 2))
    if reset is None:
        return
    assert reset.reset_seq == 2 and reset.name == "R"
    again = [m.metadata.sequence.stream for m in cons.fetch(10, max_wait=2)]
    assert again == [2, 3, 4, 5]
    floor = js.reset_consumer(stream.name, "R")  # without a sequence: after the ack floor
    assert floor.reset_seq >= 1
    with pytest.raises(ValueError):
        js.reset_consumer(stream.name, "R", 0)


# ---------------------------------------------------------------------- async publish


def test_publish_async_has_its_own_ack_timeout(nc: nats.Client) -> None:
    js = JetStream(nc, timeout=30.0, publish_async_timeout=0.5)
    subject = "sink." + next_nuid()
    nc.subscribe(subject)  # someone receives it, nobody acknowledges it
    nc.flush()
    started = time.monotonic()
    fut = js.publish_async(subject, b"x")
    done = threading.Event()
    fut.add_done_callback(lambda _: done.set())
    assert done.wait(10)  # with the context's 30 s timeout this would wait 30 s
    assert isinstance(fut.exception(), nats.TimeoutError)
    assert time.monotonic() - started < 10
    with pytest.raises(ValueError):
        JetStream(nc, publish_async_timeout=0)


def test_repeated_header_values_survive_publish_options(js: JetStream, stream: Stream) -> None:
    hdrs = nats.Headers()
    hdrs.add("X-Multi", "one")
    hdrs.add("X-Multi", "two")
    ack = js.publish(f"{stream.name}.h", b"x", headers=hdrs, msg_id="m-1")
    stored = stream.get_msg(ack.seq).headers
    assert stored is not None and stored.get_all("X-Multi") == ["one", "two"] and stored["Nats-Msg-Id"] == "m-1"
    ack = js.publish_async(f"{stream.name}.h", b"y", headers={"X-List": ["a", "b"]}, msg_id="m-2").result(10)
    stored = stream.get_msg(ack.seq).headers
    assert stored is not None and stored.get_all("X-List") == ["a", "b"]


# ---------------------------------------------------------------------- ADR-44: required API level


def test_level_headers_ask_for_the_highest_level_of_the_features_used() -> None:
    new = {"version": "2.14.0"}
    assert _features.level_headers(new, []) is None
    assert _features.level_headers(new, ["msg_ttl"]) == {"Nats-Required-Api-Level": "1"}
    assert _features.level_headers(new, ["msg_ttl", "consumer_reset", "counters"]) == {
        "Nats-Required-Api-Level": "4"}
    # Servers before 2.12 do not know the header: never sent to them.
    assert _features.level_headers({"version": "2.11.4"}, ["msg_ttl"]) is None


def test_api_requests_using_newer_features_carry_the_required_level(nc: nats.Client, js: JetStream) -> None:
    if not js.supports("required_api_level"):
        pytest.skip(f"Nats-Required-Api-Level needs nats-server 2.12, this one is {js.server_version}")
    name = _name()
    with nats.connect(nc.connected_url) as monitor:
        seen = monitor.subscribe("$JS.API.STREAM.CREATE.*")
        monitor.flush()
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_msg_ttl=True)
        js.create_stream(name=name + "P", subjects=[f"{name}P.>"], storage="memory")
        requests = {}
        for _ in range(20):  # bounded: other tests may create streams on this server meanwhile
            msg = seen.next_msg(timeout=5)
            requests[msg.subject.rsplit(".", 1)[1]] = msg
            if name in requests and name + "P" in requests:
                break
        with_ttl, plain = requests[name], requests[name + "P"]
    try:
        assert with_ttl.headers is not None and with_ttl.headers.get("Nats-Required-Api-Level") == "1"
        assert not plain.headers or plain.headers.get("Nats-Required-Api-Level") is None
        # A server below the level asked for refuses, and the error says so.
        with pytest.raises(nats.ApiLevelNotSupportedError) as info:
            js._api.request(f"STREAM.INFO.{name}", None, headers={"Nats-Required-Api-Level": "999"})
        assert isinstance(info.value, FeatureNotSupportedError) and info.value.err_code == 10185
    finally:
        js.delete_stream(name)
        js.delete_stream(name + "P")


@pytest.mark.parametrize("ttl", [0, 0.0, None])
def test_a_publish_with_zero_ttl_sends_no_ttl(js: JetStream, ttl: float | None) -> None:
    # As nats.go: zero means no TTL (it used to go out as "Nats-TTL: 1s", and the
    # message vanished after a second). Works on any server: no header, no feature.
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        js.publish(f"{name}.a", b"x", ttl=ttl)
        js.publish_async(f"{name}.b", b"y", ttl=ttl).result(10)
        for subject in (f"{name}.a", f"{name}.b"):
            assert st.get_last_msg_for_subject(subject).header("Nats-TTL") is None
    finally:
        js.delete_stream(name)


@pytest.mark.parametrize("ttl", [-1, -0.5, float("nan"), ""])
def test_a_publish_with_a_ttl_no_header_can_say_is_refused_before_sending(js: JetStream, ttl: float | str) -> None:
    name = _name()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        with pytest.raises(nats.BadHeaderError):
            js.publish(f"{name}.a", b"x", ttl=ttl)
        with pytest.raises(nats.BadHeaderError):
            js.publish_async(f"{name}.a", b"x", ttl=ttl)
        assert st.info().state.messages == 0
    finally:
        js.delete_stream(name)
