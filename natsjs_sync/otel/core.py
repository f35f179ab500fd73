"""Core NATS under the instrumentation: publish, request, respond, subscription callbacks, ``next_msg``.

Producer spans for ``Client.publish``/``publish_now``, ``Client.request`` and
``Msg.respond``, each carrying its trace context in the message's headers; a
process span around each callback of a subscription made with one, and a
receive span for each message ``next_msg`` hands out on a subscription the
application made without one. The spans are made by :mod:`.spans`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import SpanKind

from . import attributes as a
from .propagation import inject
from .spans import (
    _destination,
    _operation,
    _receive,
    _size,
    _State,
    _traced_handler,
    _unless_suppressed,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription


# ---------------------------------------------------------------------- core publishing


def _wrap_publish(s: _State, op_name: str = "publish") -> Callable[..., Any]:
    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        subject, payload, reply, headers = _publish_args(*args, **kwargs)
        attrs = s.client_attrs(client)
        attrs.update(_destination(subject, "send", op_name))
        attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = _size(payload)
        with _operation(s, f"{op_name} {a.destination_label(subject)}", SpanKind.PRODUCER, attrs, op_name,
                        sent=1) as span:
            s.run_publish_hook(span, subject, payload, headers)
            return wrapped(subject, payload, reply, inject(headers))
    return wrapper


def _publish_args(subject: str, payload: Any = b"", reply: str | None = None,
                  headers: Mapping[str, Any] | None = None) -> tuple[str, Any, str | None, Any]:
    return subject, payload, reply, headers


def _wrap_request(s: _State) -> Callable[..., Any]:
    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        subject, payload, timeout, headers = _request_args(*args, **kwargs)
        attrs = s.client_attrs(client)
        attrs.update(_destination(subject, "send", "request"))
        attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = _size(payload)
        with _operation(s, f"request {a.destination_label(subject)}", SpanKind.CLIENT, attrs, "request",
                        sent=1) as span:
            s.run_publish_hook(span, subject, payload, headers)
            if timeout is _UNSET:
                return wrapped(subject, payload, headers=inject(headers))
            return wrapped(subject, payload, timeout, inject(headers))
    return wrapper


_UNSET: Any = object()


def _request_args(subject: str, payload: Any = b"", timeout: Any = _UNSET,
                  headers: Mapping[str, Any] | None = None) -> tuple[str, Any, Any, Any]:
    return subject, payload, timeout, headers


def _wrap_respond(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], msg: Msg, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or not msg.reply:
            return wrapped(*args, **kwargs)
        data, headers = _respond_args(*args, **kwargs)
        attrs = _destination(msg.reply, "send", "respond")
        attrs[a.MESSAGING_SYSTEM] = a.SYSTEM
        attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = _size(data)
        with _operation(s, f"respond {a.destination_label(msg.reply)}", SpanKind.PRODUCER, attrs, "respond",
                        sent=1) as span:
            s.run_publish_hook(span, msg.reply, data, headers)
            return wrapped(data, headers=inject(headers))
    return wrapper


def _respond_args(data: bytes = b"", headers: Mapping[str, Any] | None = None) -> tuple[bytes, Any]:
    return data, headers


# ---------------------------------------------------------------------- core delivery


def _wrap_subscribe(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        subject, queue, cb, rest = _subscribe_args(*args, **kwargs)
        if cb is not None and is_instrumentation_enabled():
            cb = _traced_handler(s, cb, subject, queue, client)
        sub: Subscription = wrapped(subject, queue, cb, **rest)
        s.metrics.watch_client(client)
        s.metrics.watch_subscription(sub)
        if cb is None:
            s.track_user_sub(sub)
        return sub
    return wrapper


def _subscribe_args(subject: str, queue: str | None = None, cb: Any = None,
                    **rest: Any) -> tuple[str, str | None, Any, dict[str, Any]]:
    return subject, queue, cb, rest


def _wrap_next_msg(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], sub: Subscription, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if id(sub) not in s.user_subs or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return _receive(s, wrapped, args, kwargs, sub.subject, sub.queue)
    return wrapper

