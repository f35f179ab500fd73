"""Key-value settings and calls whose effect a user relies on, against a real server:
purge guarded by a revision, purge markers that expire, republished changes and
create-or-update of a bucket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, KeyValue, KeyValueOp, RePublish
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until


@pytest.fixture
def buckets(js: JetStream) -> Iterator[list[str]]:
    """Names of buckets a test makes; all are deleted afterwards."""
    made: list[str] = []
    yield made
    for bucket in made:
        try:
            js.delete_key_value(bucket)
        except nats.NatsError:
            pass


def _bucket(buckets: list[str]) -> str:
    name = "c" + next_nuid()
    buckets.append(name)
    return name


def test_purge_with_last_refuses_when_the_key_moved_on(kv: KeyValue) -> None:
    first = kv.put("k", b"v1")
    second = kv.put("k", b"v2")
    with pytest.raises(nats.WrongLastSequenceError):
        kv.purge("k", last=first)  # someone wrote after the revision this client saw
    assert kv.get("k").value == b"v2"
    kv.purge("k", last=second)
    history = kv.history("k")
    assert [e.operation for e in history] == [KeyValueOp.PURGE]  # the purge took everything before it
    with pytest.raises(nats.KeyNotFoundError):
        kv.get("k")


@pytest.mark.server("2.11")
def test_purge_marker_with_ttl_goes_away(js: JetStream, buckets: list[str]) -> None:
    kv = js.create_key_value(bucket=_bucket(buckets), limit_marker_ttl=5.0, storage="memory")
    kv.put("k", b"v")
    kv.purge("k", ttl=3)  # long enough to be read back on a loaded machine before it goes
    assert [e.operation for e in kv.history("k")] == [KeyValueOp.PURGE]

    def marker_gone() -> bool:
        try:
            kv.history("k")
        except nats.KeyNotFoundError:
            return True
        return False

    assert wait_until(marker_gone, timeout=20, interval=0.2)
    assert kv.status().values == 0


def test_create_or_update_key_value_changes_an_existing_bucket_and_makes_a_new_one(
        js: JetStream, buckets: list[str]) -> None:
    name = _bucket(buckets)
    kv = js.create_key_value(bucket=name, history=1, storage="memory")
    kv.put("k", b"1")
    kv.put("k", b"2")
    assert len(kv.history("k")) == 1
    again = js.create_or_update_key_value(bucket=name, history=3, storage="memory", description="more history")
    status = again.status()
    assert status.history == 3 and status.config.description == "more history"
    assert again.get("k").value == b"2"  # updating kept the data
    again.put("k", b"3")
    again.put("k", b"4")
    assert [e.value for e in again.history("k")] == [b"2", b"3", b"4"]

    fresh = _bucket(buckets)
    made = js.create_or_update_key_value(bucket=fresh, storage="memory")
    assert made.put("x", b"y") == 1
    assert fresh in set(js.key_value_store_names())


def test_republish_sends_each_change_to_the_destination(nc: nats.Client, js: JetStream,
                                                        buckets: list[str]) -> None:
    name = _bucket(buckets)
    kv = js.create_key_value(bucket=name, storage="memory", history=2,
                             republish=RePublish(src=f"$KV.{name}.>", dest=f"repub.{name}.>"))
    sub = nc.subscribe(f"repub.{name}.>")
    nc.flush(timeout=5)
    rev = kv.put("k", b"v")
    msg = sub.next_msg(timeout=5)
    assert msg.subject == f"repub.{name}.k" and msg.data == b"v"
    assert msg.headers is not None and int(msg.headers["Nats-Sequence"]) == rev
    kv.delete("k")
    deleted = sub.next_msg(timeout=5)
    assert deleted.subject == f"repub.{name}.k" and deleted.data == b""
    assert deleted.headers is not None and deleted.headers.get("KV-Operation") == "DEL"
    sub.unsubscribe()
