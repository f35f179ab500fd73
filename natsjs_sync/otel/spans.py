"""What every wrapper of the instrumentation shares: its state, and the making of its spans.

:class:`_State` is what one :meth:`~.instrumentor.NatsjsSyncInstrumentor.instrument`
call gives its wrappers (tracer, metrics, hooks, the subscriptions and iterators
it follows); :class:`_Live` names the live one, which callbacks wrapped earlier
compare against. Around them: the attributes of a destination and of a delivery,
the low-cardinality attributes kept on metrics, the span of an operation of the
caller's (:func:`_operation`) and of the application's handling of a message
(:func:`_processing`, :func:`_traced_handler`), the receive span of a message an
iterator hands out (:func:`_receive`), and the plumbing of a wrapt wrapper
(:func:`_unless_suppressed`, :class:`_Args`).

The wrappers themselves are in :mod:`.core` (core NATS), :mod:`.jetstream` and
:mod:`.stores_services` (KV, object store, services); :mod:`.instrumentor` puts
them in place.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
import time
import timeit
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Link, Span, SpanKind, StatusCode

from .._core import fork
from .._core.logs import mark_raised_in
from . import attributes as a
from .metrics import Metrics
from .propagation import extract

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription
    from .instrumentor import ConsumeHook, PublishHook
    from .jetstream import _BatchSpan

log = logging.getLogger("natsjs_sync.otel")

_ACK_PREFIX = "$JS.ACK."


class _Live:
    """The one live instrumentation (None when uninstrumented); wrapped callbacks compare against it."""

    current: _State | None = None


class _State:
    """What the wrappers of one :meth:`NatsjsSyncInstrumentor.instrument` call share. Thread-safe."""

    def __init__(self, tracer: trace.Tracer, metrics: Metrics, publish_hook: PublishHook | None,
                 consume_hook: ConsumeHook | None):
        self.tracer = tracer
        self.metrics = metrics
        self.publish_hook = publish_hook
        self.consume_hook = consume_hook
        self._lock = threading.Lock()
        # Subscriptions the application made without a callback: only their next_msg
        # gets receive spans (the library's own subscriptions use next_msg too).
        self.user_subs: set[int] = set()
        # Pull iterators the library made for itself inside a traced KV or object operation.
        self.internal: set[int] = set()
        # The span of each batch publish under way (atomic and fast batches).
        self.batches: weakref.WeakKeyDictionary[Any, _BatchSpan] = weakref.WeakKeyDictionary()
        self._client_attrs: weakref.WeakKeyDictionary[Client, tuple[str | None, dict[str, Any]]] = (
            weakref.WeakKeyDictionary())
        fork.track(self)

    def after_fork_in_child(self) -> None:
        """A forked child gets a lock of its own: a parent thread may have held this one at the fork."""
        self._lock = threading.Lock()

    # -- attributes -------------------------------------------------------------------

    def client_attrs(self, client: Client | None) -> dict[str, Any]:
        """A fresh dict of ``messaging.system`` and the client's server and id (cached per connection)."""
        if client is None:
            return {a.MESSAGING_SYSTEM: a.SYSTEM}
        try:
            url = client.connected_url
        except Exception:  # a closed client: no server to name
            return {a.MESSAGING_SYSTEM: a.SYSTEM}
        cached = self._client_attrs.get(client)
        if cached is None or cached[0] != url:
            # Parsed once per client and server: the URL changes only on a reconnect.
            self.metrics.watch_client(client)
            attrs = {a.MESSAGING_SYSTEM: a.SYSTEM, **a.server_attributes(url, client.client_id, client.name)}
            cached = (url, attrs)
            self._client_attrs[client] = cached
        return dict(cached[1])

    def run_publish_hook(self, span: Span, subject: str, payload: Any, headers: Any) -> None:
        if self.publish_hook is not None and span.is_recording():
            try:
                self.publish_hook(span, subject, payload, headers)
            except Exception:
                log.exception("publish_hook raised")

    def run_consume_hook(self, span: Span, msg: Msg) -> None:
        if self.consume_hook is not None and span.is_recording():
            try:
                self.consume_hook(span, msg)
            except Exception:
                log.exception("consume_hook raised")

    def track_user_sub(self, sub: Subscription) -> None:
        """``sub`` was made by the application without a callback: its ``next_msg`` records receive spans."""
        with self._lock:
            self.user_subs.add(id(sub))
        weakref.finalize(sub, self.user_subs.discard, id(sub))

    def record(self, op: str, attrs: Mapping[str, Any], started: float, error: BaseException | None,
               sent: int = 0, consumed: int = 0) -> None:
        """The metrics of one finished operation."""
        m = _metric_attrs(attrs, op, error)
        self.metrics.duration.record(timeit.default_timer() - started, m)
        if sent:
            self.metrics.sent.add(sent, m)
        if consumed:
            self.metrics.consumed.add(consumed, m)


# Attributes kept on metrics: low cardinality only (no message ids, sequences or sizes).
_METRIC_KEYS = frozenset({
    a.MESSAGING_SYSTEM, a.MESSAGING_DESTINATION_NAME, a.MESSAGING_DESTINATION_TEMPLATE,
    a.MESSAGING_CONSUMER_GROUP_NAME, a.MESSAGING_DESTINATION_SUBSCRIPTION_NAME, a.SERVER_ADDRESS,
    a.SERVER_PORT, a.MESSAGING_OPERATION_TYPE, a.NATS_STREAM, a.NATS_CONSUMER,
})


def _error_type(exc: BaseException) -> str:
    """``error.type``: the exception's qualified class name (low cardinality, as the conventions ask)."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _fail(span: Span, exc: BaseException) -> None:
    span.set_attribute(a.ERROR_TYPE, _error_type(exc))
    span.record_exception(exc)
    span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")


def _log_inside(span: Span, exc: BaseException) -> None:
    """Whoever logs ``exc`` once it left ``span`` (the dispatcher, after the callback returned)
    logs it inside ``span``: the record gets the span's trace id on the thread that ran it."""
    mark_raised_in(exc, functools.partial(trace.use_span, span, end_on_exit=False, record_exception=False,
                                          set_status_on_exception=False))


def _metric_attrs(attrs: Mapping[str, Any], op: str, error: BaseException | None = None) -> dict[str, Any]:
    """The low-cardinality part of a span's attributes, with the operation and the error: a metric's."""
    m = {k: v for k, v in attrs.items() if k in _METRIC_KEYS}
    m[a.MESSAGING_OPERATION_NAME] = op
    if error is not None:
        m[a.ERROR_TYPE] = _error_type(error)
    return m


@contextlib.contextmanager
def _operation(s: _State, name: str, kind: SpanKind, attrs: dict[str, Any], op: str, *, sent: int = 0,
               consumed: int = 0) -> Iterator[Span]:
    """The current span of one operation of the caller's (publish, request, settle, a KV or object call).

    A failure marks the span (``error.type``, status) and goes on; the operation's
    metrics are recorded when it ends, ``sent`` always, ``consumed`` only on success.
    """
    started = timeit.default_timer()
    error: BaseException | None = None
    with s.tracer.start_as_current_span(name, kind=kind, attributes=attrs, record_exception=False,
                                        set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            error = exc
            _fail(span, exc)
            raise
        finally:
            s.record(op, attrs, started, error, sent=sent, consumed=0 if error is not None else consumed)


@contextlib.contextmanager
def _processing(s: _State, msg: Msg, name: str, kind: SpanKind, attrs: dict[str, Any],
                count: bool) -> Iterator[Span]:
    """The current span of the application's handling of ``msg``, child of its producer's context.

    A failure marks the span, and a record that logs the exception later on this
    thread is emitted inside the span (see :func:`_log_inside`). ``count``: the
    delivery counts as consumed here (a callback; an iterator counted it already).
    """
    started = timeit.default_timer()
    error: BaseException | None = None
    with s.tracer.start_as_current_span(name, context=extract(_headers_of(msg)), kind=kind, attributes=attrs,
                                        record_exception=False, set_status_on_exception=False) as span:
        s.run_consume_hook(span, msg)
        try:
            yield span
        except BaseException as exc:
            error = exc
            _fail(span, exc)
            _log_inside(span, exc)
            raise
        finally:
            m = _metric_attrs(attrs, "process", error)
            s.metrics.process.record(timeit.default_timer() - started, m)
            if count:
                s.metrics.consumed.add(1, m)


def _destination(subject: str, op_type: str, op_name: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {a.MESSAGING_OPERATION_TYPE: op_type, a.MESSAGING_OPERATION_NAME: op_name}
    if a.is_temporary(subject):
        attrs[a.MESSAGING_DESTINATION_TEMPORARY] = True
    else:
        attrs[a.MESSAGING_DESTINATION_NAME] = subject
    return attrs


def _size(payload: Any) -> int:
    try:
        return len(payload)
    except TypeError:
        return 0


def _headers_of(msg: Msg) -> Mapping[str, Any] | None:
    """The message's headers, or None when there are none or they are malformed (never raises)."""
    if msg.raw_headers is None:
        return None
    try:
        return msg.headers
    except Exception:
        return None


def _js_attrs(msg: Msg) -> dict[str, Any]:
    """Stream, consumer, sequences and delivery count of a JetStream delivery (none for other messages)."""
    if not msg.reply.startswith(_ACK_PREFIX):
        return {}
    try:
        md = msg.metadata
    except Exception:
        return {}
    return {a.NATS_STREAM: md.stream, a.NATS_CONSUMER: md.consumer, a.NATS_STREAM_SEQUENCE: md.sequence.stream,
            a.NATS_CONSUMER_SEQUENCE: md.sequence.consumer, a.NATS_DELIVERY_COUNT: md.num_delivered}


def _message_id(headers: Mapping[str, Any] | None) -> str | None:
    if not headers:
        return None
    value = headers.get("Nats-Msg-Id")
    if value is None or isinstance(value, str):
        return value
    return str(value[0]) if value else None


_Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _unless_suppressed(wrapper: _Wrapper) -> _Wrapper:
    """A wrapt wrapper that calls straight through while instrumentation is suppressed
    (inside a KV or object operation, or by the application)."""
    @functools.wraps(wrapper)
    def guarded(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return wrapper(wrapped, instance, args, kwargs)
    return guarded


class _Args:
    """Binds a wrapped method's arguments by name (the signature is read once per function)."""

    def __init__(self, fn: Callable[..., Any]):
        self.sig = inspect.signature(fn)

    def bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        bound = self.sig.bind(instance, *args, **kwargs)
        return bound

    @staticmethod
    def call(wrapped: Callable[..., Any], bound: inspect.BoundArguments) -> Any:
        return wrapped(*bound.args[1:], **bound.kwargs)


# ---------------------------------------------------------------------- deliveries (callbacks, iterators)


def _consumer_attrs(msg: Msg, pattern: str | None, queue: str | None, op_type: str) -> dict[str, Any]:
    attrs = _destination(msg.subject, op_type, op_type)
    attrs[a.MESSAGING_SYSTEM] = a.SYSTEM
    attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = len(msg.data)
    if pattern is not None and pattern != msg.subject:
        attrs[a.MESSAGING_DESTINATION_TEMPLATE] = pattern
    if pattern is not None:
        attrs[a.MESSAGING_DESTINATION_SUBSCRIPTION_NAME] = pattern
    if queue:
        attrs[a.MESSAGING_CONSUMER_GROUP_NAME] = queue
    js = _js_attrs(msg)
    if js:
        attrs.update(js)
        attrs[a.MESSAGING_CONSUMER_GROUP_NAME] = js[a.NATS_CONSUMER]
    msg_id = _message_id(_headers_of(msg))
    if msg_id is not None:
        attrs[a.MESSAGING_MESSAGE_ID] = msg_id
    return attrs


def _label(msg: Msg, pattern: str | None) -> str:
    """A delivery's low-cardinality destination: the stream, else the subscription's pattern."""
    js = msg.reply.startswith(_ACK_PREFIX) and _js_attrs(msg)
    if js:
        return str(js[a.NATS_STREAM])
    return a.destination_label(pattern if pattern is not None else msg.subject)


def _same(msg: Any) -> Msg:
    return msg  # type: ignore[no-any-return]


def _traced_handler(s: _State, handler: Callable[[Any], Any], pattern: str | None, queue: str | None,
                    client: Client | None, server_kind: str | None = None,
                    msg_of: Callable[[Any], Msg] = _same) -> Callable[[Any], Any]:
    """``handler`` run inside a process span whose parent is the producer's context.

    Args:
        handler: called with what the wrapper is called with.
        pattern, queue: the subscription's subject and queue group.
        server_kind: for a service endpoint: the span's name (kind SERVER).
        msg_of: the message inside what the handler gets (a service request holds one).
    """

    @functools.wraps(handler)
    def traced(arg: Any) -> Any:
        if _Live.current is not s or not is_instrumentation_enabled():
            return handler(arg)
        msg = msg_of(arg)
        attrs = s.client_attrs(client)
        attrs.update(_consumer_attrs(msg, pattern, queue, "process"))
        name = f"process {_label(msg, pattern)}" if server_kind is None else server_kind
        kind = SpanKind.CONSUMER if server_kind is None else SpanKind.SERVER
        with _processing(s, msg, name, kind, attrs, count=True):
            return handler(arg)

    return traced


def _receive_span(s: _State, msg: Msg, pattern: str | None, queue: str | None, started_ns: int,
                  client: Client | None = None) -> None:
    """A finished receive span for a message an iterator handed to the application, linked to its producer."""
    attrs = s.client_attrs(client)
    attrs.update(_consumer_attrs(msg, pattern, queue, "receive"))
    producer = trace.get_current_span(extract(_headers_of(msg))).get_span_context()
    links = [Link(producer)] if producer.is_valid else None
    span = s.tracer.start_span(f"receive {_label(msg, pattern)}", kind=SpanKind.CONSUMER, attributes=attrs,
                               links=links, start_time=started_ns)
    s.run_consume_hook(span, msg)
    span.end()
    s.metrics.consumed.add(1, _metric_attrs(attrs, "receive"))


def _receive(s: _State, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             pattern: str | None = None, queue: str | None = None) -> Msg:
    """An iterator's next message, recorded as a receive span from the moment it was asked for."""
    started = _now_ns()
    msg: Msg = wrapped(*args, **kwargs)
    _receive_span(s, msg, pattern, queue, started)
    return msg


def _now_ns() -> int:
    return time.time_ns()  # span start times are wall-clock nanoseconds

