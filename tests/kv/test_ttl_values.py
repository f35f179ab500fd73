"""A KV ``ttl`` of zero means "no expiry", as in nats.go: no ``Nats-TTL`` header
is sent (a zero used to be rounded up to ``Nats-TTL: 1s`` and the key vanished
after a second). A negative ``ttl`` is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, KeyValue
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def ttl_kv(js: JetStream) -> Iterator[KeyValue]:
    bucket = "ttl" + next_nuid()
    kv = js.create_key_value(bucket=bucket, limit_marker_ttl=5.0, storage="memory")
    try:
        yield kv
    finally:
        js.delete_key_value(bucket)


def _stored_ttl(js: JetStream, kv: KeyValue, key: str) -> str | None:
    raw = js.stream(f"KV_{kv.bucket}").get_last_msg_for_subject(f"$KV.{kv.bucket}.{key}")
    return raw.header("Nats-TTL")


@pytest.mark.server("2.11")
@pytest.mark.parametrize("ttl", [0, 0.0])
def test_create_with_zero_ttl_sends_no_ttl(js: JetStream, ttl_kv: KeyValue, ttl: float) -> None:
    ttl_kv.create("k", b"v", ttl=ttl)
    assert _stored_ttl(js, ttl_kv, "k") is None
    assert ttl_kv.get("k").value == b"v"


@pytest.mark.server("2.11")
def test_purge_with_zero_ttl_leaves_a_marker_without_ttl(js: JetStream, ttl_kv: KeyValue) -> None:
    ttl_kv.put("k", b"v")
    ttl_kv.purge("k", ttl=0)
    assert _stored_ttl(js, ttl_kv, "k") is None


@pytest.mark.server("2.11")
def test_a_positive_ttl_is_still_sent(js: JetStream, ttl_kv: KeyValue) -> None:
    ttl_kv.create("k", b"v", ttl=30)
    assert _stored_ttl(js, ttl_kv, "k") == "30s"


@pytest.mark.server("2.11")
@pytest.mark.parametrize("call", ["create", "create msg_ttl", "purge"])
def test_a_negative_ttl_is_refused_before_sending(js: JetStream, ttl_kv: KeyValue, call: str) -> None:
    if call == "purge":
        ttl_kv.put("k", b"v")
    with pytest.raises(nats.BadHeaderError) as info:
        if call == "create":
            ttl_kv.create("k", b"v", ttl=-1)
        elif call == "create msg_ttl":
            ttl_kv.create("k", b"v", msg_ttl=-5.0)
        else:
            ttl_kv.purge("k", ttl=-1)
    assert isinstance(info.value, ValueError) and isinstance(info.value, nats.NatsError)
    if call == "purge":
        assert ttl_kv.get("k").value == b"v"  # not purged
    else:
        with pytest.raises(nats.KeyNotFoundError):
            ttl_kv.get("k")
