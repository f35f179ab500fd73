"""Key-value and object store details a nats-py program relies on, through the native
API (``programs/kv_object_details.py`` shows the nats-py side)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import KeyDeletedError, KeyNotFoundError
from natsjs_sync.jetstream import JetStream, KeyValue, KeyValueOp, ObjectMeta, ObjectStore
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def kv(js: JetStream) -> Iterator[KeyValue]:
    bucket = "d" + next_nuid()
    yield js.create_key_value(bucket=bucket, history=5)
    js.delete_key_value(bucket)


@pytest.fixture
def obs(js: JetStream) -> Iterator[ObjectStore]:
    bucket = "d" + next_nuid()
    yield js.create_object_store(bucket)
    js.delete_object_store(bucket)


def test_reading_a_deleted_or_purged_key_tells_its_marker(kv: KeyValue) -> None:
    kv.put("gone", b"v")
    deleted_at = kv.delete("gone")
    with pytest.raises(KeyDeletedError) as info:
        kv.get("gone")
    err = info.value
    assert err.op == "DEL" and type(err.op) is str  # prints as nats-py's does
    assert isinstance(err.entry, nats.jetstream.Entry)
    assert (err.entry.key, err.entry.revision, err.entry.operation) == ("gone", deleted_at, KeyValueOp.DEL)

    kv.put("purged", b"v")
    kv.purge("purged")
    with pytest.raises(KeyDeletedError) as info:
        kv.get("purged")
    assert info.value.op == "PURGE" and info.value.entry.operation is KeyValueOp.PURGE

    with pytest.raises(KeyNotFoundError) as never:
        kv.get("never")
    assert never.value.entry is None and never.value.op is None


def test_object_headers_read_back_as_they_were_put(obs: ObjectStore) -> None:
    headers: dict[str, str | list[str]] = {"Single": "1", "Many": ["x", "y"], "One": ["z"]}
    obs.put("h", b"data", meta=ObjectMeta(name="h", headers=headers))
    assert obs.get_info("h").headers == headers
    with obs.get("h") as result:
        assert result.info.headers == headers
    obs.update_meta("h", ObjectMeta(name="h", headers={"Other": ["1"]}))
    assert obs.get_info("h").headers == {"Other": ["1"]}


def test_get_writeinto_a_text_file_writes_after_what_the_file_holds(obs: ObjectStore, tmp_path: Path) -> None:
    obs.put("t", b"line two\n")
    path = tmp_path / "out.txt"
    with path.open("w", encoding="utf-8") as text:
        text.write("line one\n")  # still in the text layer's buffer
        obs.get("t", writeinto=text)
        text.write("line three\n")
    assert path.read_text(encoding="utf-8") == "line one\nline two\nline three\n"
    with (tmp_path / "out.bin").open("wb") as binary:
        obs.get("t", writeinto=binary)
    assert (tmp_path / "out.bin").read_bytes() == b"line two\n"
