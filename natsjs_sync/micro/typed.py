"""Typed endpoints: a handler that takes a decoded request and returns the response value.

``add_endpoint("get", get_order, request_type=OrderQuery, response_type=Order)``
makes ``get_order(query) -> Order`` an endpoint: the request is decoded (by its
``content-type`` header, else the endpoint's codec), the returned value is
encoded as the reply with the codec's content type. A request that does not
decode is answered with error ``400`` naming the field; the handler is not called.

The types are advertised in ``$SRV.INFO``: the endpoint's metadata gets
``request_schema`` and ``response_schema`` (JSON Schema documents, as strings:
metadata is ``str -> str``) and ``content_type``. Micro's v1 ``schema`` field was
dropped from ADR-32, and metadata is where other clients and ``nats micro info``
show what an endpoint is about.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..codecs.msgspec_codecs import holds_pydantic_model
from ..errors import PayloadDecodeError, PayloadEncodeError, ServiceError

if TYPE_CHECKING:
    from ..codecs import Codec
    from .request import Request

#: Metadata keys of a typed endpoint.
REQUEST_SCHEMA = "request_schema"
RESPONSE_SCHEMA = "response_schema"
CONTENT_TYPE_KEY = "content_type"


def json_schema(type_: Any) -> str | None:
    """The JSON Schema of ``type_`` as a compact string, or ``None`` when it has none to give."""
    pydantic = sys.modules.get("pydantic")
    try:
        if pydantic is not None and isinstance(type_, type) and issubclass(type_, pydantic.BaseModel):
            schema = type_.model_json_schema()  # type: ignore[attr-defined]
        elif holds_pydantic_model(type_):  # list[Model], Model | None ...
            schema = sys.modules["pydantic"].TypeAdapter(type_).json_schema()
        else:
            schema = msgspec.json.schema(type_)
    except (TypeError, ValueError):
        return None
    return json.dumps(schema, separators=(",", ":"), sort_keys=True)


def schema_metadata(metadata: dict[str, str] | None, request_type: Any, response_type: Any,
                    codec: Codec) -> dict[str, str]:
    """The endpoint's metadata with the schemas added (keys the user set are kept as given)."""
    out: dict[str, str] = {CONTENT_TYPE_KEY: codec.content_type}
    for key, type_ in ((REQUEST_SCHEMA, request_type), (RESPONSE_SCHEMA, response_type)):
        if type_ is not None:
            schema = json_schema(type_)
            if schema is not None:
                out[key] = schema
    out.update(metadata or {})
    return out


def typed_handler(handler: Callable[[Any], Any], request_type: Any, response_type: Any,
                  codec: Codec) -> Callable[[Request], None]:
    """The untyped handler that runs ``handler(value)`` and answers with what it returns.

    ``request_type`` ``None`` passes the :class:`~natsjs_sync.micro.Request` itself;
    ``response_type`` ``None`` encodes whatever comes back (a handler that answered
    by itself, through the request, is left alone).
    """
    from ..codecs.typed import codec_decode, pick_codec

    def on_request(request: Request) -> None:
        msg = request.msg
        if request_type is None:
            arg: Any = request
            reply_codec = codec
        else:
            try:
                reply_codec = pick_codec(msg.raw_headers, lambda: msg.headers, codec, request_type)
                arg = codec_decode(reply_codec, msg.data, request_type)
            except PayloadDecodeError as exc:
                where = f" at {exc.field}" if exc.field else ""
                raise ServiceError("400", f"request does not decode{where}: {exc.reason}") from None
        result = handler(arg)
        if request._responded:
            return
        try:
            data, headers = reply_codec.encode_message(result)
        except PayloadEncodeError as exc:
            raise ServiceError("500", f"response does not encode: {exc}") from None
        request.respond(data, headers=headers)

    on_request.__name__ = getattr(handler, "__name__", "on_request")
    on_request.__qualname__ = getattr(handler, "__qualname__", "on_request")
    return on_request
