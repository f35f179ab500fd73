"""Core NATS under the instrumentation: publish, request, respond, subscription callbacks, ``next_msg``.

Producer spans for ``Client.publish``/``publish_now``, ``Client.request`` and
``Msg.respond``, each carrying its trace context in the message's headers; a
process span around each callback of a subscription made with one, and a
receive span for each message ``next_msg`` hands out on a subscription the
application made without one. The spans are made by :mod:`.spans`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from ..errors import ProtocolError
from ..protocol.headers import sendable
from . import attributes as a
from .propagation import without_span_context
from .spans import (
    _call_with_context,
    _headers_ok,
    _operation,
    _Param,
    _receive,
    _send_kind,
    _State,
    _takes_callback,
    _traced_handler,
    _unless_suppressed,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription


# ---------------------------------------------------------------------- core publishing


def _wrap_publish(s: _State, fn: Callable[..., Any], op_name: str = "publish") -> Callable[..., Any]:
    """``Client.publish``/``publish_now`` (and ``request``: ``op_name`` "request"): a send span
    whose context the message carries (its creation context: PRODUCER, by the conventions)."""
    subject_p, payload_p, headers_p = _Param(fn, "subject"), _Param(fn, "payload"), _Param(fn, "headers")

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        subject = subject_p.get(args, kwargs)
        if not isinstance(subject, str):
            return wrapped(*args, **kwargs)  # refused by the client, as without instrumentation
        payload, headers = payload_p.get(args, kwargs, b""), headers_p.get(args, kwargs)
        if not _headers_ok(headers):
            return wrapped(*args, **kwargs)  # refused by the client, as without instrumentation
        attrs = s.client_attrs(client)
        attrs.update(s.destination(subject, client, "send", op_name))
        s.body_size(attrs, payload)
        kind, links = _send_kind(headers, waits=op_name == "request")
        with _operation(s, a.span_name(op_name, attrs), kind, attrs, op_name, sent=1, links=links) as span:
            s.run_publish_hook(span, subject, payload, headers)
            return _call_with_context(s, op_name, wrapped, headers_p, args, kwargs)
    return wrapper


def _wrap_request(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    return _wrap_publish(s, fn, "request")


def _wrap_respond(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``Msg.respond``: a send span to the message's reply subject, a temporary destination
    whatever its prefix (the requester's inbox, made for this one exchange)."""
    data_p, headers_p = _Param(fn, "data"), _Param(fn, "headers")

    def wrapper(wrapped: Callable[..., Any], msg: Msg, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or not msg.reply:
            return wrapped(*args, **kwargs)
        data, headers = data_p.get(args, kwargs, b""), headers_p.get(args, kwargs)
        if headers is None and msg.raw_headers is not None:
            # The reply echoes the request's headers (nats-py's respond()), but not the
            # requester's trace context: the reply carries its own span's.
            try:
                echoed = msg.headers
            except ProtocolError:
                echoed = None  # not echoed by respond() either
            if echoed is not None:
                headers = without_span_context(echoed)
                if not _headers_ok(headers):
                    headers = sendable(headers)  # what respond() sends of them
                args, kwargs = headers_p.replace(args, kwargs, headers)
        if not _headers_ok(headers):
            return wrapped(*args, **kwargs)  # refused by the client, as without instrumentation
        attrs = s.destination(msg.reply, getattr(msg, "_conn", None), "send", "respond", temporary=True)
        attrs[a.MESSAGING_SYSTEM] = a.SYSTEM
        s.body_size(attrs, data)
        kind, links = _send_kind(headers, waits=False)
        with _operation(s, a.span_name("respond", attrs), kind, attrs, "respond", sent=1, links=links) as span:
            s.run_publish_hook(span, msg.reply, data, headers)
            return _call_with_context(s, "respond", wrapped, headers_p, args, kwargs)
    return wrapper


# ---------------------------------------------------------------------- core delivery


def _wrap_subscribe(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    subject_p, queue_p, cb_p = _Param(fn, "subject"), _Param(fn, "queue"), _Param(fn, "cb")

    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        cb = cb_p.get(args, kwargs)
        # Checked first, wrapped after: a callback the client refuses reaches it as it is.
        if _takes_callback(cb) and is_instrumentation_enabled():
            traced = _traced_handler(s, cb, subject_p.get(args, kwargs), queue_p.get(args, kwargs), client)
            args, kwargs = cb_p.replace(args, kwargs, traced)
        sub: Subscription = wrapped(*args, **kwargs)
        s.metrics.watch_client(client)
        s.metrics.watch_subscription(sub, s.inbox_prefix(client))
        if cb is None:
            s.track_user_sub(sub)
        return sub
    return wrapper


def _wrap_next_msg(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], sub: Subscription, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if id(sub) not in s.user_subs or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return _receive(s, wrapped, args, kwargs, sub.subject, sub.queue)
    return wrapper
