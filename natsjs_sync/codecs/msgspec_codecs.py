"""JSON and MessagePack through msgspec, with pydantic models when pydantic is installed.

msgspec decodes straight into Structs, dataclasses, attrs classes,
TypedDicts, NamedTuples, enums and plain types (``dict[str, int]``,
``list[Order]``), validating as it goes. A pydantic model (``BaseModel``
subclass) is recognised by its class and goes through pydantic's own
validation; so does a type built around models (``list[Model]``,
``dict[str, Model]``, ``Model | None``, ``tuple[Model, int]``), through a
pydantic ``TypeAdapter``. pydantic is imported only by code that already has
such a class, so it costs nothing when unused (it is the ``pydantic`` extra),
and the choice is made once per type, when its decoder is made: msgspec types
never pass through it.
"""

from __future__ import annotations

import re
import sys
import threading
import typing
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import msgspec

from ..errors import PayloadDecodeError, PayloadEncodeError
from .base import Codec, register_codec

T = TypeVar("T")

# msgspec's validation message ends with the path of the failing field:
# "Expected `int`, got `str` - at `$.items[0].qty`" (its documented format).
_AT = re.compile(r" - at `(\$[^`]*)`$")
# A missing field is named in the message, not in the path: "Object missing required field `qty`".
_MISSING = re.compile(r"missing required field `([^`]*)`")


def _split_path(message: str) -> tuple[str, str | None]:
    m = _AT.search(message)
    reason, path = (message, None) if m is None else (message[: m.start()], m.group(1))
    missing = _MISSING.search(reason)
    if missing is not None:
        path = f"{path or '$'}.{missing.group(1)}"
    return reason, path


def _pydantic_model(type_: Any) -> bool:
    """``type_`` is a pydantic model class (without importing pydantic when nobody did)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(type_, type) and issubclass(type_, pydantic.BaseModel)


def holds_pydantic_model(type_: Any, _depth: int = 0) -> bool:
    """``type_`` is a pydantic model class or a type built around one (``list[Model]``, ``Model | None``).

    Only the arguments of generic and union types are searched, not the fields
    of classes (msgspec refuses a dataclass with a model field, as before).
    """
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or _depth > 32:  # the depth bounds a self-referencing alias
        return False
    if isinstance(type_, type) and not typing.get_args(type_) and issubclass(type_, pydantic.BaseModel):
        return True
    return any(holds_pydantic_model(arg, _depth + 1) for arg in typing.get_args(type_))


def _holds_pydantic_value(value: Any, _depth: int = 0) -> bool:
    """``value`` is a pydantic model or a list, tuple, set or dict (values) holding one."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or _depth > 32:
        return False
    if isinstance(value, pydantic.BaseModel):
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple, set, frozenset)):
        return False
    return any(_holds_pydantic_value(v, _depth + 1) for v in value)


_any_adapter: Any = None


def _pydantic_any() -> Any:
    """pydantic's ``TypeAdapter(Any)``: it serializes each model as the model's own dump does."""
    global _any_adapter
    if _any_adapter is None:  # a race makes two equal adapters, harmlessly
        _any_adapter = sys.modules["pydantic"].TypeAdapter(Any)
    return _any_adapter


def _pydantic_error(exc: Any) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return str(exc), None
    first = errors[0]
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.get("loc", ()))
    return str(first.get("msg", exc)), path


class _MsgspecCodec(Codec):
    """What the JSON and MessagePack codecs share: one decoder per type, cached."""

    _module: Any  # msgspec.json or msgspec.msgpack

    def __init__(self) -> None:
        self._encoder = self._module.Encoder()
        self._decoders: dict[Any, Callable[[Any], Any]] = {}
        self._lock = threading.Lock()

    def encode(self, value: Any) -> bytes:
        """``value`` as bytes (a pydantic model through its dump: MessagePack keeps bytes and timestamps).

        Raises:
            PayloadEncodeError: a value of a type msgspec cannot encode, out of the format's range,
                a text with no UTF-8 form (a lone surrogate) or one that holds itself.
        """
        try:
            return self._encoder.encode(value)  # type: ignore[no-any-return]
        except (TypeError, OverflowError, UnicodeEncodeError, RecursionError, msgspec.EncodeError) as exc:
            if not _holds_pydantic_value(value):
                raise PayloadEncodeError(f"cannot encode {type(value).__name__} as {self.content_type}: {exc}") \
                    from None
        try:
            return self._encode_pydantic(value)
        except Exception as exc:  # pydantic's serialization error, or msgspec's on what the model dumped
            raise PayloadEncodeError(f"cannot encode {type(value).__name__} as {self.content_type}: {exc}") \
                from None

    def _encode_pydantic(self, value: Any) -> bytes:
        # Python objects first: MessagePack holds bytes and timestamps as such (a bytes field
        # that is not UTF-8 has no JSON form); what msgspec does not know goes as its JSON form.
        # A container of models is dumped as a whole, each model as its own dump would do it.
        dump = value.model_dump if _pydantic_model(type(value)) else partial(_pydantic_any().dump_python, value)
        try:
            return self._encoder.encode(dump())  # type: ignore[no-any-return]
        except (TypeError, OverflowError, msgspec.EncodeError):
            return self._encoder.encode(dump(mode="json"))  # type: ignore[no-any-return]

    def decode(self, data: bytes | bytearray | memoryview, type_: type[T]) -> T:
        """``data`` as a ``type_``, validated (msgspec's decoder for the type, made once and kept).

        Raises:
            PayloadDecodeError: not this format, or not a ``type_`` (``field`` says where).
            TypeError: a type neither msgspec nor pydantic can decode into.
        """
        decode = self._decoders.get(type_)
        if decode is None:
            decode = self._decoder_for(type_)
        try:
            return decode(data)  # type: ignore[no-any-return]
        except msgspec.ValidationError as exc:
            reason, field = _split_path(str(exc))
            raise PayloadDecodeError(reason, type=type_, field=field, content_type=self.content_type) from None
        except msgspec.DecodeError as exc:
            raise PayloadDecodeError(str(exc), type=type_, content_type=self.content_type) from None
        except RecursionError:
            # msgspec stops at its nesting limit with a RecursionError: a payload
            # of a few kilobytes of "[" does it, and it is a bad payload like any other.
            raise PayloadDecodeError("nested too deeply", type=type_, content_type=self.content_type) from None
        except Exception as exc:
            pydantic = sys.modules.get("pydantic")
            if pydantic is not None and isinstance(exc, pydantic.ValidationError):
                reason, field = _pydantic_error(exc)
                raise PayloadDecodeError(reason, type=type_, field=field, content_type=self.content_type) \
                    from None
            raise

    def _raw_encoder(self) -> Callable[[Any], bytes]:
        return self._encoder.encode  # type: ignore[no-any-return]

    def _raw_decoder(self, type_: Any) -> Callable[[Any], Any]:
        return self._decoders.get(type_) or self._decoder_for(type_)

    def _decoder_for(self, type_: Any) -> Callable[[Any], Any]:
        with self._lock:
            decode = self._decoders.get(type_)
            if decode is not None:
                return decode
            if _pydantic_model(type_):
                decode = self._pydantic_decoder(type_)
            elif holds_pydantic_model(type_):
                decode = self._adapter_decoder(sys.modules["pydantic"].TypeAdapter(type_))
            else:
                try:
                    decode = self._module.Decoder(type_).decode
                except TypeError as exc:  # a type msgspec cannot decode into
                    raise TypeError(f"{self.content_type} cannot decode into {type_!r}: {exc}") from None
            self._decoders[type_] = decode
            return decode

    def _pydantic_decoder(self, model: Any) -> Callable[[Any], Any]:
        plain = self._module.Decoder().decode

        def decode(data: Any) -> Any:
            return model.model_validate(plain(data))

        return decode

    def _adapter_decoder(self, adapter: Any) -> Callable[[Any], Any]:
        """Decoding through a pydantic ``TypeAdapter`` (a type built around models)."""
        plain = self._module.Decoder().decode

        def decode(data: Any) -> Any:
            return adapter.validate_python(plain(data))

        return decode


class JsonCodec(_MsgspecCodec):
    """JSON (``application/json``) through ``msgspec.json``. Thread-safe.

    Decodes into anything msgspec knows (Structs, dataclasses, TypedDicts, plain
    types) and pydantic models. Use the shared instance :data:`JSON`.
    """

    content_type = "application/json"
    aliases = ("text/json",)
    _module = msgspec.json

    def _pydantic_decoder(self, model: Any) -> Callable[[Any], Any]:
        return _json_input(model.model_validate_json)  # pydantic's own JSON parser

    def _adapter_decoder(self, adapter: Any) -> Callable[[Any], Any]:
        return _json_input(adapter.validate_json)

    def _encode_pydantic(self, value: Any) -> bytes:
        if _pydantic_model(type(value)):
            return value.model_dump_json().encode()  # type: ignore[no-any-return]
        return _pydantic_any().dump_json(value)  # type: ignore[no-any-return]


def _json_input(validate_json: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """pydantic's JSON validation, given a memoryview too (it takes str, bytes and bytearray only)."""

    def decode(data: Any) -> Any:
        return validate_json(bytes(data) if isinstance(data, memoryview) else data)

    return decode


class MsgPackCodec(_MsgspecCodec):
    """MessagePack (``application/msgpack``) through ``msgspec.msgpack``. Thread-safe.

    Reads ``application/x-msgpack`` and ``application/vnd.msgpack`` too (both are
    in use for the same format). Use the shared instance :data:`MSGPACK`.
    """

    content_type = "application/msgpack"
    aliases = ("application/x-msgpack", "application/vnd.msgpack")
    _module = msgspec.msgpack


#: The shared JSON codec.
JSON = register_codec(JsonCodec())
#: The shared MessagePack codec.
MSGPACK = register_codec(MsgPackCodec())
