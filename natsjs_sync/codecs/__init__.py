"""Payload codecs: typed values on the wire, decoded into the type you name.

>>> import msgspec
>>> from natsjs_sync.codecs import JSON
>>> class Order(msgspec.Struct):
...     id: int
...     item: str
>>> JSON.encode(Order(1, "tea"))
b'{"id":1,"item":"tea"}'
>>> JSON.decode(b'{"id":1,"item":"tea"}', Order)
Order(id=1, item='tea')

A :class:`Codec` encodes a value to bytes and names its format in the
``content-type`` header; a reader picks the codec by that header, and decodes
messages without it as the caller says (JSON when the caller says nothing).
Built-ins: :data:`JSON` and :data:`MSGPACK` (msgspec Structs, dataclasses,
TypedDicts, plain types; pydantic models when pydantic is installed).

In the client: :meth:`Msg.decode <natsjs_sync.Msg.decode>` on any message,
typed views of subjects (``nc.typed``, ``js.typed``), of subscriptions and
consumers (``.typed(T)``), of key-value buckets and object stores, and typed
service endpoints (``request_type=``/``response_type=``). See :doc:`/codecs`.
"""

from .base import CONTENT_TYPE, Codec, codec_for, register_codec
from .msgspec_codecs import JSON, MSGPACK, JsonCodec, MsgPackCodec
from .typed import (
    DecodeErrorHandler,
    TypedEntry,
    TypedKeyValue,
    TypedMsg,
    TypedObjectStore,
    TypedReader,
    TypedSubject,
    TypedWatcher,
    decode_msg,
)

__all__ = [
    "CONTENT_TYPE",
    "JSON",
    "MSGPACK",
    "Codec",
    "DecodeErrorHandler",
    "JsonCodec",
    "MsgPackCodec",
    "TypedEntry",
    "TypedKeyValue",
    "TypedMsg",
    "TypedObjectStore",
    "TypedReader",
    "TypedSubject",
    "TypedWatcher",
    "codec_for",
    "decode_msg",
    "register_codec",
]
