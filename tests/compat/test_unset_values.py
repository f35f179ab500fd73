"""Values the server did not send, and the server's nanosecond times, read as nats-py
reads them (``programs/js_unset_values.py`` shows the nats-py side)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.jetstream._api import from_wire
from natsjs_sync.jetstream.context import APIStats
from natsjs_sync.jetstream.stream_config import StreamInfo
from natsjs_sync.protocol.nuid import next_nuid

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
COUNT = 20


@pytest.fixture
def streams(js: JetStream) -> Iterator[list[str]]:
    """Names of the streams a test makes; all are deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        js.delete_stream(name)


def _stream(js: JetStream, streams: list[str], allow_direct: bool) -> str:
    name = "T" + next_nuid()
    streams.append(name)
    js.add_stream(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct)
    for i in range(COUNT):
        js.publish(f"{name}.{i}", b"x")
    return name


def _stored_times(js: JetStream, name: str) -> dict[int, int]:
    """Each message's stored time in nanoseconds, from the delivery metadata."""
    psub = js.pull_subscribe(f"{name}.>", durable="times", stream=name)
    times: dict[int, int] = {}
    for _ in range(COUNT):  # bounded: each fetch returns at least one message or raises
        for msg in psub.fetch(COUNT, timeout=5):
            times[msg.metadata.sequence.stream] = msg.metadata.timestamp_ns
        if len(times) == COUNT:
            break
    assert len(times) == COUNT
    return times


def _cut(ns: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(microseconds=ns // 1000)


def test_api_stats_level_is_none_when_not_sent(js: JetStream) -> None:
    assert APIStats.from_response({"total": 1, "errors": 0}).level is None
    # Servers from 2.11 send it; 2.10 sends none, which reads as None too.
    level = js.account_info().api.level
    assert isinstance(level, int) if js.supports("msg_ttl") else level is None


def test_marker_ttl_of_a_bucket_without_markers_is_none(js: JetStream) -> None:
    bucket = "u" + next_nuid()
    kv = js.create_key_value(bucket=bucket)
    try:
        status = kv.status()
        assert status.marker_ttl is None
        assert status.limit_marker_ttl == 0  # the native name keeps its number
    finally:
        js.delete_key_value(bucket)


@pytest.mark.parametrize("allow_direct", [False, True], ids=["api", "direct"])
def test_message_times_are_cut_to_microseconds_not_rounded(js: JetStream, streams: list[str],
                                                           allow_direct: bool) -> None:
    """The stored time of a message read back (API ``time`` or ``Nats-Time-Stamp``)
    is the delivered one cut to microseconds; rounding moved about half of them."""
    name = _stream(js, streams, allow_direct)
    times = _stored_times(js, name)
    stream = js.stream(name)
    for seq, ns in times.items():
        raw = stream.get_last_msg_for_subject(f"{name}.{seq - 1}") if allow_direct else stream.get_msg(seq)
        assert raw.seq == seq
        assert raw.time == _cut(ns), (seq, ns)


def test_api_times_are_cut_to_microseconds(nc: nats.Client, js: JetStream, streams: list[str]) -> None:
    name = _stream(js, streams, allow_direct=False)
    resp = json.loads(nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=5).data)
    resp["created"] = "2024-12-31T23:59:59.9999996Z"
    info = from_wire(resp, StreamInfo)
    assert info.created == datetime.datetime(2024, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)
