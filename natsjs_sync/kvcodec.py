"""Key and value codecs for the key-value store: keys that are not NATS subject tokens.

A bucket's keys are subject tokens (letters, digits, ``-/_=``, dots between
tokens). A *key codec* turns any key a program has (an e-mail address, a path,
free text) into such a key on every write and back on every read; a *value
codec* transforms the stored bytes (base64, compression). Open a bucket through
them with :meth:`KeyValue.with_codecs <natsjs_sync.jetstream.kv.KeyValue.with_codecs>`::

    from natsjs_sync.kvcodec import Base64KeyCodec, PathKeyCodec, ChainKeyCodec

    users = js.key_value("users").with_codecs(key_codec=Base64KeyCodec())
    users.put("sue@example.com.color", b"blue")      # stored as c3VlQGV4YW1wbGUuY29t... tokens
    users.get("sue@example.com.color").key           # 'sue@example.com.color'

The encodings are those of orbit.go's ``kvcodec`` and natsio's ``natsio-kvcodec``
(ADR-54), so a bucket written through one is read through the others:

- :class:`Base64KeyCodec`: each dot-separated token as unpadded URL-safe base64
  (Go's ``base64.RawURLEncoding``); dots keep separating tokens, so wildcard
  filters still work token by token.
- :class:`PathKeyCodec`: ``/config/app/db`` is stored as ``_root_.config.app.db``
  and ``config/app`` as ``config.app``; a trailing ``/`` is dropped.
- :class:`ChainKeyCodec`, :class:`ChainValueCodec`: codecs applied in order on
  the way in, in reverse order on the way out.
- :class:`Base64ValueCodec` and :class:`ZlibValueCodec` (natsio's) for values.

A codec is any object with ``encode`` and ``decode`` (``str`` to ``str`` for keys,
``bytes`` to ``bytes`` for values); a key codec that also has ``encode_filter``
(:class:`FilterableKeyCodec`) can encode a filter with ``*`` and ``>`` for
:meth:`~natsjs_sync.jetstream.kv.KeyValue.watch` and
:meth:`~natsjs_sync.jetstream.kv.KeyValue.keys`; other key codecs refuse wildcard
filters with :class:`~natsjs_sync.errors.WildcardNotSupportedError` (nothing is sent).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from .errors import (
    KeyDecodeError,
    KeyEncodeError,
    KvCodecError,
    NoCodecsError,
    ValueDecodeError,
    ValueEncodeError,
    WildcardNotSupportedError,
)

__all__ = [
    "Base64KeyCodec", "Base64ValueCodec", "ChainKeyCodec", "ChainValueCodec", "FilterableKeyCodec", "KeyCodec",
    "KeyDecodeError", "KeyEncodeError", "KvCodecError", "NoCodecsError", "NoOpKeyCodec", "NoOpValueCodec",
    "PathKeyCodec", "ValueCodec", "ValueDecodeError", "ValueEncodeError", "WildcardNotSupportedError",
    "ZlibValueCodec",
]

_T = TypeVar("_T", str, bytes)

#: Whole-token subject wildcards, passed through by every filter encoding.
_WILDCARDS = frozenset({"*", ">"})


@runtime_checkable
class KeyCodec(Protocol):
    """Turns a program's key into a stored key (``encode``) and back (``decode``)."""

    def encode(self, key: str) -> str: ...

    def decode(self, key: str) -> str: ...


@runtime_checkable
class FilterableKeyCodec(KeyCodec, Protocol):
    """A key codec that can also encode a filter, leaving ``*`` and ``>`` tokens as they are."""

    def encode_filter(self, key_filter: str) -> str: ...


@runtime_checkable
class ValueCodec(Protocol):
    """Turns a value into the stored bytes (``encode``) and back (``decode``)."""

    def encode(self, value: bytes) -> bytes: ...

    def decode(self, value: bytes) -> bytes: ...


class NoOpKeyCodec:
    """Keys as they are (a filler in a chain)."""

    def encode(self, key: str) -> str:
        return key

    def decode(self, key: str) -> str:
        return key

    def encode_filter(self, key_filter: str) -> str:
        return key_filter

    def __repr__(self) -> str:
        return "NoOpKeyCodec()"


class NoOpValueCodec:
    """Values as they are (a filler in a chain)."""

    def encode(self, value: bytes) -> bytes:
        return value

    def decode(self, value: bytes) -> bytes:
        return value

    def __repr__(self) -> str:
        return "NoOpValueCodec()"


def _b64_token(token: str) -> str:
    return base64.urlsafe_b64encode(token.encode()).rstrip(b"=").decode("ascii")


def _b64_decode(data: bytes) -> bytes:
    """Unpadded URL-safe base64 to bytes; refuses anything else (padding, other alphabets)."""
    if data.endswith(b"=") or len(data) % 4 == 1:
        raise ValueError("not unpadded base64")
    return base64.b64decode(data + b"=" * (-len(data) % 4), altchars=b"-_", validate=True)


class Base64KeyCodec:
    """Each dot-separated token as unpadded URL-safe base64 (orbit.go's ``Base64Codec``).

    Any text can be a token; dots stay separators, so ``"a.b"`` is two tokens and
    wildcard filters (``"orders.*"``) work. The base64 alphabet is within the key
    alphabet, so every key without empty tokens encodes to a valid key.
    """

    def encode(self, key: str) -> str:
        return ".".join(_b64_token(t) for t in key.split("."))

    def decode(self, key: str) -> str:
        out = []
        for token in key.split("."):
            try:
                out.append(_b64_decode(token.encode("ascii")).decode("utf-8"))
            except (ValueError, UnicodeError, binascii.Error) as exc:
                raise KeyDecodeError(f"stored key {key!r}: token {token!r} is not base64 of UTF-8 text") from exc
        return ".".join(out)

    def encode_filter(self, key_filter: str) -> str:
        return ".".join(t if t in _WILDCARDS else _b64_token(t) for t in key_filter.split("."))

    def __repr__(self) -> str:
        return "Base64KeyCodec()"


#: The first token of a path that began with ``/`` (a subject cannot begin with a dot).
_ROOT = "_root_"


class PathKeyCodec:
    """Path keys: ``/a/b`` is stored as ``_root_.a.b``, ``a/b/`` as ``a.b`` (orbit.go's ``PathCodec``).

    A path's ``/`` become dots and read back as ``/``: a dot inside a path segment
    therefore reads back as ``/``, and ``a//b`` (an empty segment) is refused as an
    invalid key. Filters keep ``*`` and ``>``: ``watch("/config/>")``.
    """

    def encode(self, key: str) -> str:
        if key.startswith("/"):
            key = _ROOT if key == "/" else f"{_ROOT}.{key[1:]}"
        return key.removesuffix("/").replace("/", ".")

    def decode(self, key: str) -> str:
        if key == _ROOT:
            return "/"
        if key.startswith(_ROOT + "."):
            return "/" + key[len(_ROOT) + 1:].replace(".", "/")
        return key.replace(".", "/")

    def encode_filter(self, key_filter: str) -> str:
        return self.encode(key_filter)

    def __repr__(self) -> str:
        return "PathKeyCodec()"


class _Chain(Generic[_T]):
    """Codecs in sequence: encoded first to last, decoded last to first (orbit.go's chain codecs)."""

    _kind: ClassVar[type]  # the protocol each link must follow

    def __init__(self, *codecs: Any) -> None:
        if not codecs:
            raise NoCodecsError("at least one codec must be provided")
        for codec in codecs:
            if not isinstance(codec, self._kind):
                raise TypeError(f"not a {self._kind.__name__}: {codec!r}")
        self._codecs = codecs

    def encode(self, data: _T) -> _T:
        for codec in self._codecs:
            data = codec.encode(data)
        return data

    def decode(self, data: _T) -> _T:
        for codec in reversed(self._codecs):
            data = codec.decode(data)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self._codecs))})"


class ChainKeyCodec(_Chain[str]):
    """Key codecs in sequence: encoded first to last, decoded last to first.

    It encodes filters only when every codec in it can
    (:class:`~natsjs_sync.errors.WildcardNotSupportedError` otherwise).

    Raises:
        NoCodecsError: no codec given.
        TypeError: something that is not a key codec.
    """

    _kind = KeyCodec

    def __init__(self, *codecs: KeyCodec) -> None:
        super().__init__(*codecs)

    def encode_filter(self, key_filter: str) -> str:
        for i, codec in enumerate(self._codecs):
            if not isinstance(codec, FilterableKeyCodec):
                raise WildcardNotSupportedError(f"codec {i} of the chain ({codec!r}) cannot encode a filter")
        for codec in self._codecs:
            key_filter = codec.encode_filter(key_filter)
        return key_filter


class Base64ValueCodec:
    """The whole value as unpadded URL-safe base64 (orbit.go's ``Base64Codec`` for values)."""

    def encode(self, value: bytes) -> bytes:
        return base64.urlsafe_b64encode(value).rstrip(b"=")

    def decode(self, value: bytes) -> bytes:
        try:
            return _b64_decode(bytes(value))
        except (ValueError, binascii.Error) as exc:
            raise ValueDecodeError(f"stored value is not base64: {bytes(value[:40])!r}") from exc

    def __repr__(self) -> str:
        return "Base64ValueCodec()"


class ZlibValueCodec:
    """Values compressed with zlib (natsio-kvcodec's ``ZlibValueCodec``: same bytes).

    ``level`` is zlib's, -1 (its default) to 9. Server-side compression of the
    bucket (``compression=True``) costs the client nothing; this one also
    shrinks the bytes on the wire and in ``max_bytes``.
    """

    def __init__(self, level: int = -1) -> None:
        if isinstance(level, bool) or not isinstance(level, int) or not -1 <= level <= 9:
            raise ValueError(f"zlib level must be an int from -1 to 9, got {level!r}")
        self._level = level

    def encode(self, value: bytes) -> bytes:
        return zlib.compress(value, self._level)

    def decode(self, value: bytes) -> bytes:
        try:
            return zlib.decompress(value)
        except zlib.error as exc:
            raise ValueDecodeError(f"stored value is not zlib data: {exc}") from exc

    def __repr__(self) -> str:
        return f"ZlibValueCodec(level={self._level})"


class ChainValueCodec(_Chain[bytes]):
    """Value codecs in sequence: encoded first to last, decoded last to first.

    Raises:
        NoCodecsError: no codec given.
        TypeError: something that is not a value codec.
    """

    _kind = ValueCodec

    def __init__(self, *codecs: ValueCodec) -> None:
        super().__init__(*codecs)


class BucketCodecs:
    """The codecs of one bucket view, and the one place keys and values pass through them.

    Every failure of a user's codec becomes a :class:`~natsjs_sync.errors.KvCodecError`
    naming the key, before anything is sent.
    """

    __slots__ = ("key", "value")

    def __init__(self, key: KeyCodec | None, value: ValueCodec | None) -> None:
        if key is not None and not isinstance(key, KeyCodec):
            raise TypeError(f"key_codec must have encode(str) and decode(str), got {key!r}")
        if value is not None and not isinstance(value, ValueCodec):
            raise TypeError(f"value_codec must have encode(bytes) and decode(bytes), got {value!r}")
        self.key = key
        self.value = value

    def encode_key(self, key: str) -> str:
        if self.key is None:
            return key
        if not isinstance(key, str):
            raise KeyEncodeError(f"key must be a str, got {key!r}")
        return _call(self.key.encode, key, KeyEncodeError, f"key {key!r}")

    def encode_filter(self, key_filter: str) -> str:
        if self.key is None:
            return key_filter
        if not isinstance(key_filter, str):
            raise KeyEncodeError(f"key filter must be a str, got {key_filter!r}")
        if not _WILDCARDS.intersection(key_filter.split(".")):
            return self.encode_key(key_filter)
        if not isinstance(self.key, FilterableKeyCodec):
            raise WildcardNotSupportedError(
                f"key codec {self.key!r} cannot encode the filter {key_filter!r} (it has no encode_filter); "
                "watch every key and filter them in the program")
        return _call(self.key.encode_filter, key_filter, KeyEncodeError, f"key filter {key_filter!r}")

    def decode_key(self, key: str) -> str:
        if self.key is None:
            return key
        return _call(self.key.decode, key, KeyDecodeError, f"stored key {key!r}")

    def encode_value(self, value: bytes) -> bytes:
        if self.value is None:
            return value
        return _call(self.value.encode, bytes(value), ValueEncodeError, "value")

    def decode_value(self, value: bytes, key: str) -> bytes:
        if self.value is None:
            return value
        return _call(self.value.decode, value, ValueDecodeError, f"value of key {key!r}")


def _call(fn: Callable[[_T], _T], arg: _T, error: type[KvCodecError], what: str) -> _T:
    """``fn(arg)``, any failure of it (a user's codec may raise anything) as ``error``."""
    try:
        out = fn(arg)
    except KvCodecError as exc:  # ours (a built-in codec's): keep its class, say which key
        raise type(exc)(f"{what}: {exc}") from exc
    except Exception as exc:
        raise error(f"{what}: {type(exc).__name__}: {exc}") from exc
    if isinstance(arg, str):
        if not isinstance(out, str):
            raise error(f"{what}: the codec returned {type(out).__name__}, not str")
        return out
    if not isinstance(out, (bytes, bytearray, memoryview)):
        raise error(f"{what}: the codec returned {type(out).__name__}, not bytes")
    return bytes(out)
