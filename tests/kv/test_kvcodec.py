"""Key and value codecs (natsjs_sync.kvcodec): any text as a key, against a real server,
and the same stored bytes as orbit.go's kvcodec and natsio-kvcodec."""

from __future__ import annotations

import base64
import zlib

import pytest

from natsjs_sync.errors import InvalidKeyError, KeyNotFoundError, NoKeysError
from natsjs_sync.jetstream import JetStream, KeyValue
from natsjs_sync.kvcodec import (
    Base64KeyCodec,
    Base64ValueCodec,
    ChainKeyCodec,
    ChainValueCodec,
    KeyDecodeError,
    KeyEncodeError,
    NoCodecsError,
    NoOpKeyCodec,
    PathKeyCodec,
    ValueDecodeError,
    WildcardNotSupportedError,
    ZlibValueCodec,
)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# ---------------------------------------------------------------------- the encodings


@pytest.mark.parametrize(("key", "stored"), [
    ("/", "_root_"),
    ("/config/app/db", "_root_.config.app.db"),
    ("config/app/", "config.app"),
    ("plain", "plain"),
])
def test_path_codec_stores_paths_as_orbit_does(key: str, stored: str) -> None:
    codec = PathKeyCodec()
    assert codec.encode(key) == stored
    assert codec.decode(stored) == key.rstrip("/") if key != "/" else codec.decode(stored) == "/"


def test_base64_codec_encodes_each_token_unpadded_url_safe() -> None:
    codec = Base64KeyCodec()
    assert codec.encode("Acme Inc.contact?") == f"{_b64('Acme Inc')}.{_b64('contact?')}"
    assert "=" not in codec.encode("ab.abcd.x")
    assert codec.encode_filter("orders.*.>") == f"{_b64('orders')}.*.>"
    assert codec.decode(codec.encode("ü/+ x.y")) == "ü/+ x.y"


def test_a_stored_key_that_is_not_base64_is_a_decode_error() -> None:
    with pytest.raises(KeyDecodeError, match="not base64"):
        Base64KeyCodec().decode("plain.key=")


def test_chains_encode_in_order_and_decode_in_reverse() -> None:
    chain = ChainKeyCodec(PathKeyCodec(), Base64KeyCodec())
    assert chain.encode("/a b/c") == ".".join(_b64(t) for t in ("_root_", "a b", "c"))
    assert chain.decode(chain.encode("/a b/c")) == "/a b/c"
    values = ChainValueCodec(ZlibValueCodec(), Base64ValueCodec())
    assert values.decode(values.encode(b"x" * 100)) == b"x" * 100
    with pytest.raises(NoCodecsError):
        ChainKeyCodec()
    with pytest.raises(TypeError):
        ChainKeyCodec(object())  # type: ignore[arg-type]


class _Upper:
    """A key codec without encode_filter."""

    def encode(self, key: str) -> str:
        return key.upper()

    def decode(self, key: str) -> str:
        return key.lower()


def test_a_chain_encodes_filters_only_when_every_codec_can() -> None:
    with pytest.raises(WildcardNotSupportedError, match="codec 1"):
        ChainKeyCodec(NoOpKeyCodec(), _Upper()).encode_filter("a.*")  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- a bucket through codecs


def test_any_text_is_a_key_through_base64(kv: KeyValue) -> None:
    users = kv.with_codecs(key_codec=Base64KeyCodec())
    rev = users.put("sue@example.com.favourite colour", b"blue")
    entry = users.get("sue@example.com.favourite colour")
    assert (entry.key, entry.value, entry.revision) == ("sue@example.com.favourite colour", b"blue", rev)
    # The plain view sees the stored (encoded) key; the bucket is the same.
    assert kv.keys() == [f"{_b64('sue@example')}.{_b64('com')}.{_b64('favourite colour')}"]
    assert users.keys() == ["sue@example.com.favourite colour"]
    assert [e.key for e in users.history("sue@example.com.favourite colour")] == ["sue@example.com.favourite colour"]


def test_writes_reads_and_markers_through_both_codecs(kv: KeyValue) -> None:
    view = kv.with_codecs(key_codec=PathKeyCodec(), value_codec=ZlibValueCodec())
    r1 = view.create("/app/db/url", b"postgres://a")
    assert zlib.decompress(kv.get("_root_.app.db.url").value) == b"postgres://a"
    r2 = view.update("/app/db/url", b"postgres://b", last=r1)
    assert view.get("/app/db/url", revision=r1).value == b"postgres://a"
    assert view.get("/app/db/url").value == b"postgres://b"
    view.delete("/app/db/url", last=r2)
    with pytest.raises(KeyNotFoundError) as err:
        view.get("/app/db/url")
    assert err.value.entry.key == "/app/db/url" and err.value.entry.value == b""  # type: ignore[attr-defined]
    history = view.history("/app/db/url")
    assert [(e.value, e.operation.value) for e in history] == [(b"postgres://a", "PUT"), (b"postgres://b", "PUT"),
                                                               (b"", "DEL")]
    view.put("/app/db/url", b"again")
    view.purge("/app/db/url")
    assert view.purge_deletes(older_than=0) == 1
    assert kv.status().values == 0


def test_watch_and_list_yield_decoded_keys_and_values(kv: KeyValue) -> None:
    view = kv.with_codecs(key_codec=Base64KeyCodec(), value_codec=Base64ValueCodec())
    for key in ("orders.1 2", "orders.3/4", "users.x y"):
        view.put(key, key.encode())
    assert sorted(view.keys("orders.*")) == ["orders.1 2", "orders.3/4"]
    assert sorted(view.keys(filters=["3/4", "users.*"])) == ["orders.3/4", "users.x y"]
    with view.list_keys("users.>") as lister:
        assert list(lister) == ["users.x y"]
    with view.watch("orders.>") as w:
        first = [w.next(timeout=10.0), w.next(timeout=10.0)]
        assert sorted((e.key, e.value) for e in first if e) == [("orders.1 2", b"orders.1 2"),
                                                               ("orders.3/4", b"orders.3/4")]
        assert w.next(timeout=10.0) is None  # the end of the initial values
        view.put("orders.5 6", b"new")
        update = w.next(timeout=10.0)
        assert update is not None and (update.key, update.value) == ("orders.5 6", b"new")


def test_a_foreign_key_fails_the_read_without_losing_the_watch_place(kv: KeyValue) -> None:
    kv.put("not.base64=", b"raw")  # written without the codec ('=' is not in unpadded base64)
    view = kv.with_codecs(key_codec=Base64KeyCodec())
    view.put("ok", b"fine")
    with view.watch_all() as w:
        seen: list[object] = []
        for _ in range(3):
            try:
                seen.append(w.next(timeout=10.0))
            except KeyDecodeError as exc:
                seen.append(type(exc))
        assert seen[:2].count(KeyDecodeError) == 1 and seen[2] is None


def test_listings_leave_out_keys_written_without_the_codec(kv: KeyValue) -> None:
    # orbit.go's kvcodec lister skips the keys it cannot decode; keys() and list_keys() do the same.
    kv.put("not.base64=", b"raw")  # '=' is not in unpadded base64
    kv.put("x", b"raw")  # one base64 character decodes to nothing: not base64 either
    view = kv.with_codecs(key_codec=Base64KeyCodec())
    view.put("sue@example.com", b"fine")
    view.put("not.mine", b"fine")
    assert sorted(view.keys()) == ["not.mine", "sue@example.com"]
    assert view.keys("not.*") == ["not.mine"]
    with view.list_keys() as lister:
        assert sorted(lister) == ["not.mine", "sue@example.com"]
    assert len(kv.keys()) == 4  # a plain view still lists them all
    view.delete("sue@example.com")
    view.delete("not.mine")
    with pytest.raises(NoKeysError):  # only foreign keys left: none to list
        view.keys()


def test_purge_deletes_through_a_key_codec_purges_the_markers_stored_subjects(kv: KeyValue) -> None:
    # A marker's stored key is purged as stored: decoding it and encoding it back could name
    # another key ("a/b" decodes to "a/b" through the path codec, which encodes to "a.b").
    kv.put("a.b", b"live")  # "a/b" through the path codec
    kv.put("a/b", b"x")  # a plain writer's key with a slash in it, then deleted
    kv.delete("a/b")
    view = kv.with_codecs(key_codec=PathKeyCodec())
    assert view.purge_deletes(older_than=0) == 1
    assert kv.get("a.b").value == b"live"
    assert view.get("a/b").value == b"live"
    with pytest.raises(KeyNotFoundError) as err:
        kv.get("a/b")
    assert err.value.entry is None  # type: ignore[attr-defined]  # the marker went, not only what it hid


def test_purge_deletes_through_a_key_codec_passes_over_keys_written_without_it(kv: KeyValue) -> None:
    kv.put("plainkey", b"x")  # not base64 of UTF-8 text: a foreign key, alive
    view = kv.with_codecs(key_codec=Base64KeyCodec())
    view.put("gone", b"1")
    view.delete("gone")
    assert view.purge_deletes(older_than=0) == 1
    assert kv.get("plainkey").value == b"x"
    assert kv.status().values == 1


def test_a_value_codec_refuses_foreign_bytes_naming_the_key(kv: KeyValue) -> None:
    kv.put("k", b"not zlib")
    with pytest.raises(ValueDecodeError, match="'k'"):
        kv.with_codecs(value_codec=ZlibValueCodec()).get("k")


def test_bad_keys_and_codecs_are_refused_before_anything_is_sent(kv: KeyValue) -> None:
    view = kv.with_codecs(key_codec=PathKeyCodec())
    with pytest.raises(InvalidKeyError, match="encodes to"):
        view.put("/a//b", b"x")  # an empty path segment is an empty token
    with pytest.raises(InvalidKeyError):
        view.put("", b"x")
    upper = kv.with_codecs(key_codec=_Upper())
    with pytest.raises(WildcardNotSupportedError):
        upper.watch("a.*")
    upper.put("a.b", b"x")
    assert upper.keys("a.b") == ["a.b"]  # a filter without wildcards needs no encode_filter
    assert kv.keys() == ["A.B"]

    class Broken:
        def encode(self, key: str) -> str:
            raise RuntimeError("boom")

        def decode(self, key: str) -> str:
            return key

    with pytest.raises(KeyEncodeError, match="boom"):
        kv.with_codecs(key_codec=Broken()).put("a", b"x")
    with pytest.raises(TypeError):
        kv.with_codecs(key_codec=object())  # type: ignore[arg-type]
    with pytest.raises(KeyNotFoundError):
        kv.get("a")  # nothing was written


def test_a_plain_view_is_unchanged_and_the_views_share_the_bucket(js: JetStream, kv: KeyValue) -> None:
    view = kv.with_codecs(key_codec=PathKeyCodec())
    view.put("a/b", b"1")
    assert kv.get("a.b").value == b"1"
    assert js.key_value(kv.bucket).with_codecs(key_codec=PathKeyCodec()).get("a/b").value == b"1"
    assert kv.with_codecs() is not kv and kv.with_codecs().keys() == ["a.b"]
