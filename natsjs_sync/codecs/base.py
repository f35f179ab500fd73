"""The codec interface, the content-type header and the registry of codecs by content type.

A :class:`Codec` turns a value into bytes plus the headers that describe them,
and bytes back into a value of a type the caller names. The content type
travels in the ``content-type`` header, so a reader can tell formats apart.

Why ``content-type``, lower case: FastStream (the Python framework most NATS
users of typed payloads know) writes exactly ``content-type: application/json``
on NATS messages and reads it back by that exact key, and NATS headers are
case-sensitive in nats.go and nats-py. nats.net's serializers and nats.go write
no content type at all, so nothing there to agree with; HTTP's spelling
``Content-Type`` is read too (any case), but what we write is what FastStream
reads, so messages go both ways.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import PayloadDecodeError
from ..protocol.headers import Headers, HeadersInput, encode_headers

T = TypeVar("T")
C = TypeVar("C", bound="Codec")

#: The header that names a payload's format (FastStream's spelling; see the module docstring).
CONTENT_TYPE = "content-type"


class Codec:
    """Encodes values to bytes and decodes bytes to a given type. Subclass it for a format of your own.

    A codec is stateless from the caller's point of view and thread-safe: one
    instance serves every thread (the built-ins keep a per-type cache of msgspec
    decoders behind a lock taken only when a type is seen for the first time).

    Attributes:
        content_type: the MIME type written to the ``content-type`` header.
        aliases: other content types this codec reads (e.g. ``application/x-msgpack``).
    """

    content_type: str = "application/octet-stream"
    aliases: tuple[str, ...] = ()

    def encode(self, value: Any) -> bytes:
        """``value`` as bytes.

        Raises:
            PayloadEncodeError: the codec cannot encode ``value``.
        """
        raise NotImplementedError

    def decode(self, data: bytes | bytearray | memoryview, type_: type[T]) -> T:
        """``data`` as a ``type_``.

        Raises:
            PayloadDecodeError: ``data`` is not this format, or does not fit
                ``type_`` (its ``field`` says where).
        """
        raise NotImplementedError

    def _raw_encoder(self) -> Callable[[Any], bytes]:
        """A function from values to bytes for the hot path of publishers.

        It may raise anything on a value it cannot encode: the caller then calls
        :meth:`encode` to get the :class:`~natsjs_sync.errors.PayloadEncodeError`.
        The default is :meth:`encode` itself; the msgspec codecs give their encoder's method.
        """
        return self.encode

    def _raw_decoder(self, type_: Any) -> Callable[[Any], Any]:
        """A function from bytes to ``type_`` for the hot path of readers.

        It may raise anything on bad input: the caller then calls :meth:`decode`
        to get the :class:`~natsjs_sync.errors.PayloadDecodeError`. The default
        is :meth:`decode` itself; the msgspec codecs give their decoder's method.
        """
        decode = self.decode

        def raw(data: Any) -> Any:
            return decode(data, type_)

        return raw

    @property
    def headers(self) -> Headers:
        """The headers that describe this codec's payloads (a new dict each time)."""
        return Headers({CONTENT_TYPE: self.content_type})

    def encode_message(self, value: Any, headers: HeadersInput | None = None) -> tuple[bytes, HeadersInput]:
        """``value`` as a payload and the headers to send it with.

        Args:
            headers: headers of the caller's to send too; a ``content-type`` among
                them is replaced by this codec's.

        Returns:
            ``(payload, headers)``: ready for ``publish(subject, payload, headers=headers)``.
        """
        data = self.encode(value)
        if not headers:
            return data, self._header_map
        merged = Headers({k: v for k, v in headers.items() if k.lower() != CONTENT_TYPE})
        merged[CONTENT_TYPE] = self.content_type
        return data, merged

    @property
    def _header_map(self) -> Mapping[str, str]:
        # One read-only mapping per codec, shared by every publish: nothing is
        # built per message when the caller adds no headers of their own.
        try:
            return self.__dict__["_shared_headers"]  # type: ignore[no-any-return]
        except KeyError:
            shared = _FrozenHeaders({CONTENT_TYPE: self.content_type})
            self.__dict__["_shared_headers"] = shared
            return shared

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.content_type}>"


class _FrozenHeaders(dict):  # type: ignore[type-arg]
    """A headers mapping nobody may change (shared between publishes)."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("these headers are shared; copy them with dict(...) to change them")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refuse  # type: ignore[assignment]


_lock = threading.Lock()
_by_content_type: dict[str, Codec] = {}
# The exact header blocks a codec's ``encode_message`` produces, so that a reader
# recognises them without parsing (the common case: messages written by this client).
_by_header_block: dict[bytes, Codec] = {}


def register_codec(codec: C) -> C:
    """Make ``codec`` the one messages with its content type (or an alias) decode with.

    The built-ins are registered on import; register a codec of your own to have
    :meth:`Msg.decode <natsjs_sync.Msg.decode>` pick it by the header.

    Returns:
        ``codec`` (so that it can be used as a decorator-style one-liner).
    """
    with _lock:
        for ct in (codec.content_type, *codec.aliases):
            _by_content_type[_normal(ct)] = codec
        block = encode_headers({CONTENT_TYPE: codec.content_type})
        _by_header_block[block] = codec
    return codec


def codec_for(content_type: str) -> Codec | None:
    """The registered codec for ``content_type`` (parameters such as ``; charset=utf-8`` ignored), or ``None``."""
    return _by_content_type.get(_normal(content_type))


def _normal(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def content_type_of(headers: Mapping[str, str] | None) -> str | None:
    """The value of the ``content-type`` header, whatever its case, or ``None``."""
    if not headers:
        return None
    ct = headers.get(CONTENT_TYPE)
    if ct is not None:
        return ct
    for key, value in headers.items():
        if key.lower() == CONTENT_TYPE:
            return value
    return None


def codec_of_block(raw_headers: bytes) -> Codec | None:
    """The codec whose exact header block ``raw_headers`` is, or ``None`` (then parse the headers)."""
    return _by_header_block.get(raw_headers)


def unknown_content_type(content_type: str, type_: object) -> PayloadDecodeError:
    """The error for a payload in a format no registered codec reads."""
    return PayloadDecodeError(f"no codec is registered for content type {content_type!r}", type=type_,
                              content_type=content_type)
