"""KV, object store and services under the instrumentation.

One CLIENT span per KV or object store operation, with the bucket and key or
object name; what the operation does underneath (publishes, pull iterators) is
suppressed, and a KV write carries the operation's trace context so a
watcher's receive span of the update is its child. Each request to a service
endpoint is handled in a SERVER span named after the endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, suppress_instrumentation
from opentelemetry.trace import Span, SpanKind

from . import attributes as a
from .propagation import extract
from .spans import (
    _call_with_context,
    _headers_of,
    _Live,
    _metric_attrs,
    _now_ns,
    _operation,
    _Param,
    _State,
    _traced_handler,
    _unless_suppressed,
)

if TYPE_CHECKING:
    from ..msg import Msg


# ---------------------------------------------------------------------- KV writes and watchers


def _wrap_kv_publish(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A KV write carries the trace context of its span (the KV operation's, current here, where
    instrumentation is suppressed for what the operation does underneath): a watcher's receive
    span of the update is its child."""
    headers_p = _Param(fn, "headers")

    def wrapper(wrapped: Callable[..., Any], kv: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _Live.current is not s:
            return wrapped(*args, **kwargs)
        return _call_with_context(s, "publish", wrapped, headers_p, args, kwargs)
    return wrapper


def _wrap_kv_decode(s: _State) -> Callable[..., Any]:
    """A receive span per update a KV watcher hands to the application, the child of the writer's
    context when the update carries one."""
    def wrapper(wrapped: Callable[..., Any], watcher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        started = _now_ns()
        decoded = wrapped(*args, **kwargs)
        if not is_instrumentation_enabled() or id(watcher) in s.internal:
            return decoded  # a watcher a KV operation made for itself: that operation's one span covers it
        entry, _, deleted = decoded
        if deleted and getattr(watcher, "_ignore_deletes", False):
            return decoded  # skipped by the watcher: the application never sees it
        msg: Msg = args[0] if args else kwargs["msg"]
        writer = extract(_headers_of(msg))
        parent = writer if trace.get_current_span(writer).get_span_context().is_valid else None
        attrs = s.client_attrs(None)
        attrs.update({a.MESSAGING_OPERATION_TYPE: "receive", a.MESSAGING_OPERATION_NAME: "receive",
                      a.MESSAGING_DESTINATION_NAME: entry.bucket, a.NATS_KV_BUCKET: entry.bucket,
                      a.NATS_KV_KEY: entry.key, a.NATS_STREAM_SEQUENCE: entry.revision})
        s.body_size(attrs, msg.data)
        # A watcher's update is read by the application's call (next, iteration): a receive, CLIENT.
        span = s.tracer.start_span(f"receive {entry.bucket}", context=parent, kind=SpanKind.CLIENT,
                                   attributes=attrs, start_time=started)
        s.run_consume_hook(span, msg)
        span.end()
        s.metrics.consumed.add(1, _metric_attrs(attrs, "receive", named=True))  # a bucket
        return decoded
    return wrapper


# ---------------------------------------------------------------------- KV and object operations, services


def _wrap_store(s: _State, op: str, op_type: str | None, bucket_key: str, name_key: str,
                fn: Callable[..., Any], name_arg: str, kind: SpanKind = SpanKind.CLIENT) -> Callable[..., Any]:
    """One span per KV or object operation; what it does underneath records nothing of its own.

    ``op_type`` None: not a messaging operation of the conventions (a watch sets
    one up), so no ``messaging.operation.type`` and nothing counted sent or consumed.
    ``kind``: PRODUCER for a write that carries the span's context (its creation context).
    """
    name_p = _Param(fn, name_arg)
    # A watch's watcher is the application's (made under suppression all the same): its updates are traced.
    hands_out = op == "watch"

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], store: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bucket = str(getattr(store, "bucket", getattr(store, "name", "")))
        attrs: dict[str, Any] = {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_NAME: op,
                                 a.MESSAGING_DESTINATION_NAME: bucket, bucket_key: bucket}
        if op_type is not None:
            attrs[a.MESSAGING_OPERATION_TYPE] = op_type
        name = name_p.get(args, kwargs)
        if isinstance(name, str):
            attrs[name_key] = name
        elif name is not None and hasattr(name, "name"):
            attrs[name_key] = str(name.name)
        with _operation(s, f"{op} {bucket}", kind, attrs, op, sent=int(op_type == "send"),
                        consumed=int(op_type == "receive"), named=True) as span:
            with suppress_instrumentation():
                result = wrapped(*args, **kwargs)
            if hands_out:
                s.internal.discard(id(result))
            _describe_result(span, result, s.message_body_size)
            return result
    return wrapper


def _describe_result(span: Span, result: Any, body_size: bool) -> None:
    """Revision of a KV write or entry, size of a value or object (whatever the result says; sizes
    only when opted in)."""
    if isinstance(result, int) and not isinstance(result, bool):
        span.set_attribute(a.NATS_STREAM_SEQUENCE, result)
        return
    revision = getattr(result, "revision", None)
    if isinstance(revision, int):
        span.set_attribute(a.NATS_STREAM_SEQUENCE, revision)
    if not body_size:
        return
    value = getattr(result, "value", None)
    if isinstance(value, (bytes, bytearray)):
        span.set_attribute(a.MESSAGING_MESSAGE_BODY_SIZE, len(value))
    info = getattr(result, "info", result)
    size = getattr(info, "size", None)
    if isinstance(size, int):
        span.set_attribute(a.MESSAGING_MESSAGE_BODY_SIZE, size)


def _wrap_add_endpoint(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], adder: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        endpoint = wrapped(*args, **kwargs)
        # Endpoint.handler is public and read for every request: requests that came
        # before this line (none, unless one raced the SUB) are not traced.
        endpoint.handler = _traced_handler(s, endpoint.handler, endpoint.subject, endpoint.queue_group or None,
                                           None, server_kind=endpoint.name, msg_of=_request_msg)
        return endpoint
    return wrapper


def _request_msg(request: Any) -> Msg:
    return request.msg  # type: ignore[no-any-return]
