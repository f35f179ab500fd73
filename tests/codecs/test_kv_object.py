"""Typed values in a key-value bucket (get, history, watch) and in an object store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from natsjs_sync import PayloadDecodeError
from natsjs_sync.codecs import MSGPACK, TypedEntry
from natsjs_sync.jetstream import JetStream, KeyValue, KeyValueOp, ObjectStore
from natsjs_sync.protocol.nuid import next_nuid


@dataclasses.dataclass
class Profile:
    name: str
    age: int


@pytest.fixture
def kv(js: JetStream) -> Iterator[KeyValue]:
    bucket = "TK" + next_nuid()
    yield js.create_key_value(bucket=bucket, history=5, storage="memory")
    js.delete_key_value(bucket)


@pytest.fixture
def obs(js: JetStream) -> Iterator[ObjectStore]:
    bucket = "TO" + next_nuid()
    yield js.create_object_store(bucket=bucket, storage="memory")
    js.delete_object_store(bucket)


def test_put_get_update_history(kv: KeyValue) -> None:
    profiles = kv.typed(Profile)
    rev = profiles.put("ada", Profile("Ada", 36))
    assert kv.get("ada").value == b'{"name":"Ada","age":36}'
    entry = profiles.get("ada")
    assert isinstance(entry, TypedEntry)
    assert (entry.key, entry.revision, entry.value) == ("ada", rev, Profile("Ada", 36))
    profiles.update("ada", Profile("Ada", 37), last=rev)
    profiles.delete("ada")  # the bucket's own calls, through the view
    history = profiles.history("ada")
    assert [h.value for h in history] == [Profile("Ada", 36), Profile("Ada", 37), None]
    assert history[-1].operation is KeyValueOp.DEL


def test_msgpack_values(kv: KeyValue) -> None:
    packed = kv.typed(Profile, codec=MSGPACK)
    packed.create("bob", Profile("Bob", 5))
    assert packed.get("bob").value == Profile("Bob", 5)
    with pytest.raises(PayloadDecodeError):
        kv.typed(Profile).get("bob")  # KV entries carry no content type: the reader's codec decides


def test_a_bad_value_names_key_and_revision(kv: KeyValue) -> None:
    rev = kv.put("eve", b'{"name": "Eve"}')
    with pytest.raises(PayloadDecodeError) as info:
        kv.typed(Profile).get("eve")
    exc = info.value
    assert (exc.subject, exc.stream_sequence, exc.field) == (f"$KV.{kv.bucket}.eve", rev, "$.age")


def test_watch_yields_typed_entries_and_skips_dead_letters(kv: KeyValue) -> None:
    profiles = kv.typed(Profile, on_decode_error=lambda entry, exc: dead.append(entry.key))
    dead: list[str] = []
    profiles.put("a", Profile("A", 1))
    kv.put("b", b"garbage")
    with profiles.watch_all() as watcher:
        first = watcher.next(timeout=5)
        assert first is not None and first.value == Profile("A", 1)
        assert watcher.next(timeout=5) is None  # end of the initial values (the bad one skipped)
        profiles.put("c", Profile("C", 3))
        update = watcher.next(timeout=5)
        assert update is not None and (update.key, update.value) == ("c", Profile("C", 3))
    assert dead == ["b"]


def test_watch_without_callback_raises(kv: KeyValue) -> None:
    kv.put("x", b"[1]")
    with kv.typed(Profile).watch("x") as watcher, pytest.raises(PayloadDecodeError) as info:
        watcher.next(timeout=5)
    assert info.value.subject.endswith(".x")


def test_object_store_records_the_content_type(obs: ObjectStore) -> None:
    info = obs.typed(Profile, codec=MSGPACK).put("p1", Profile("Ann", 3))
    assert info.headers is not None and info.headers["content-type"] in ("application/msgpack",
                                                                         ["application/msgpack"])
    assert obs.typed(Profile).get("p1") == Profile("Ann", 3)  # read by its content type, not the view's codec
    obs.put("raw", b'{"name":"Raw","age":1}')  # no content type: the view's codec
    assert obs.typed(Profile).get("raw") == Profile("Raw", 1)
    obs.put("bad", b'{"name":"Bad"}')
    with pytest.raises(PayloadDecodeError) as exc:
        obs.typed(Profile).get("bad")
    assert exc.value.subject == "bad" and exc.value.field == "$.age"


def test_an_object_whose_content_type_header_holds_no_value_decodes_with_the_views_codec(obs: ObjectStore) -> None:
    from natsjs_sync.jetstream.object_models import ObjectMeta

    # nats.go writes a header set to an empty list as such ({"Content-Type": []}): no content type.
    obs.put("empty", b'{"name":"E","age":2}', meta=ObjectMeta(name="empty", headers={"Content-Type": []}))
    assert obs.typed(Profile).get("empty") == Profile("E", 2)


def test_typed_values_under_key_codecs(kv: KeyValue) -> None:
    from natsjs_sync.kvcodec import Base64KeyCodec

    view = kv.with_codecs(key_codec=Base64KeyCodec()).typed(Profile)
    view.put("ada@example.com", Profile("Ada", 36))
    assert view.get("ada@example.com").value == Profile("Ada", 36)
    with view.watch_all() as watcher:
        entry = watcher.next(timeout=5)
        assert entry is not None and (entry.key, entry.value) == ("ada@example.com", Profile("Ada", 36))
