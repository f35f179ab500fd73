"""``NatsjsSyncInstrumentor``: spans and metrics on every operation of natsjs_sync.

It wraps public methods of the client's classes (with ``wrapt``, as the
opentelemetry-python-contrib instrumentations do) when :meth:`instrument` is
called and restores them on :meth:`uninstrument`: until then the library runs
exactly its own code, so an application that installs the extra and never
instruments pays nothing. Callbacks wrapped while instrumented (subscription
callbacks, ``consume`` handlers, service handlers) check on every call that
the instrumentation that wrapped them is still the live one, and otherwise
call straight through.

What each operation records (span name ``<operation> <destination>``):

==========================================  ==========  ===============  =========
call                                        kind        operation type   name
==========================================  ==========  ===============  =========
``Client.publish`` / ``publish_now``        PRODUCER    send             publish
``Client.request``                          CLIENT      send             request
``Msg.respond``                             PRODUCER    send             respond
subscription callback                       CONSUMER    process          process
``Subscription.next_msg`` (and iteration)   CONSUMER    receive          receive
``JetStream.publish`` / ``publish_async``   PRODUCER    send             publish
atomic and fast batch (one per batch)       PRODUCER    send             publish
``MessageBatch`` / ``messages()`` items     CONSUMER    receive          receive
``consume()`` handler (pull and push)       CONSUMER    process          process
``js.subscribe`` callback / ``next_msg``    CONSUMER    process/receive  process, receive
``Msg.ack`` / ``nak`` / ``term`` / ...      CLIENT      settle           ack ...
``KeyValue.put`` / ``get`` / ``watch`` ...  CLIENT      send / receive   put ...
KV watcher update                           CONSUMER    receive          receive
``ObjectStore.put`` / ``get``               CLIENT      send / receive   put, get
service endpoint handler                    SERVER      process          (endpoint)
Spark read task attempt                     CONSUMER    receive          receive
Spark write task attempt                    PRODUCER    send             publish
==========================================  ==========  ===============  =========

Trace context goes out in the headers of publishes, requests, replies and
JetStream publishes (see :mod:`.propagation`) and is read back on delivery:
a callback's process span is a child of the producer's span. A message read
from an iterator gets a receive span linked to its producer;
:func:`process` runs the application's handling of it as a child of the
producer's span.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import timeit
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import (
    is_instrumentation_enabled,
    suppress_instrumentation,
    unwrap,
)
from opentelemetry.trace import Span, SpanKind

from .._version import __version__
from ..jetstream.client_trace import ClientTrace, add_client_trace
from . import attributes as a
from .metrics import Metrics
from .propagation import extract, inject
from .spans import (
    _ACK_PREFIX,
    _Args,
    _consumer_attrs,
    _destination,
    _fail,
    _headers_of,
    _js_attrs,
    _label,
    _Live,
    _message_id,
    _metric_attrs,
    _now_ns,
    _operation,
    _processing,
    _receive,
    _receive_span,
    _size,
    _State,
    _traced_handler,
    _unless_suppressed,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription

__all__ = ["ConsumeHook", "NatsjsSyncInstrumentor", "PublishHook", "process"]


_SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"
_instruments = ("natsjs-sync >= 0.1",)

#: ``publish_hook(span, subject, payload, headers)``: called on each producer span
#: before the message is sent (the headers are the caller's, before trace context is added).
PublishHook = Callable[[Span, str, bytes, "Mapping[str, Any] | None"], None]
#: ``consume_hook(span, msg)``: called on each receive and process span once the message is known.
ConsumeHook = Callable[[Span, "Msg"], None]


def _describe_ack(span: Span, ack: Any) -> None:
    """The stream and sequence a JetStream publish was stored at."""
    span.set_attribute(a.NATS_STREAM, ack.stream)
    span.set_attribute(a.NATS_STREAM_SEQUENCE, ack.seq)


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


# ---------------------------------------------------------------------- JetStream


def _js_publish_attrs(s: _State, js: Any, p: Mapping[str, Any]) -> tuple[str, Any, Any, dict[str, Any]]:
    """Subject, payload, headers and span attributes of a JetStream publish's bound arguments."""
    subject, payload, headers = p["subject"], p.get("payload", b""), p.get("headers")
    attrs = s.client_attrs(js.nc)
    attrs.update(_destination(subject, "send", "publish"))
    attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = _size(payload)
    msg_id = p.get("msg_id") or _message_id(headers)
    if msg_id:
        attrs[a.MESSAGING_MESSAGE_ID] = msg_id
    return subject, payload, headers, attrs


def _wrap_js_publish(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(js, args, kwargs)
        subject, payload, headers, attrs = _js_publish_attrs(s, js, bound.arguments)
        with _operation(s, f"publish {subject}", SpanKind.PRODUCER, attrs, "publish", sent=1) as span:
            s.run_publish_hook(span, subject, payload, headers)
            bound.arguments["headers"] = inject(headers)
            ack = binder.call(wrapped, bound)
            _describe_ack(span, ack)
            if ack.duplicate:
                span.set_attribute("nats.duplicate", True)
            return ack
    return wrapper


def _wrap_js_publish_async(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(js, args, kwargs)
        p = bound.arguments
        s.metrics.watch_jetstream(js)
        subject, payload, headers, attrs = _js_publish_attrs(s, js, p)
        started = timeit.default_timer()
        # The span lives until the ack settles, on whichever thread that happens: it is
        # never made current here, only put in the context the headers carry.
        span = s.tracer.start_span(f"publish {subject}", kind=SpanKind.PRODUCER, attributes=attrs)
        s.run_publish_hook(span, subject, payload, headers)
        p["headers"] = inject(headers, trace.set_span_in_context(span))
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                fut = binder.call(wrapped, bound)
        except BaseException as exc:
            _fail(span, exc)
            span.end()
            s.record("publish", attrs, started, exc, sent=1)
            raise

        def settled(f: Any) -> None:
            exc = f.exception(0)
            if exc is not None:
                _fail(span, exc)
            else:
                _describe_ack(span, f.result(0))
            s.record("publish", attrs, started, exc, sent=1)
            span.end()  # last: whoever sees the span ended also sees it counted

        fut.add_done_callback(settled)
        return fut
    return wrapper


class _BatchSpan:
    """The one span of a batch publish: from its first message until its ack settles, it is
    refused, or the batch is given up. Lives across the calls of one thread (a publisher is
    not thread-safe); :meth:`end` is idempotent (a finalizer may race a last call)."""

    __slots__ = ("attrs", "context", "ended", "s", "span", "started")

    def __init__(self, s: _State, publisher: Any, kind: str, subject: str):
        self.s = s
        js = getattr(publisher, "_js", None)
        self.attrs = attrs = s.client_attrs(getattr(js, "nc", None))
        attrs.update(_destination(subject, "send", "publish"))
        attrs[a.NATS_BATCH_ID] = publisher.batch_id
        attrs[a.NATS_BATCH_KIND] = kind
        self.started = timeit.default_timer()
        # Never current between calls: only in the context each message's headers carry.
        self.span = s.tracer.start_span(f"publish {a.destination_label(subject)}", kind=SpanKind.PRODUCER,
                                        attributes=attrs)
        self.context = trace.set_span_in_context(self.span)
        self.ended = False

    def end(self, count: int | None, ack: Any, error: BaseException | None) -> None:
        """Finish the span: ``count`` messages (None: unknown), the batch's PubAck if any, the error if any."""
        if self.ended:
            return
        self.ended = True
        span = self.span
        if ack is not None:
            _describe_ack(span, ack)
            if ack.batch_size is not None:
                count = ack.batch_size
        if count is not None:
            span.set_attribute(a.MESSAGING_BATCH_MESSAGE_COUNT, count)
        if error is not None:
            _fail(span, error)
        self.s.record("publish", self.attrs, self.started, error, sent=count or 0)
        span.end()


def _batch_span(s: _State, publisher: Any, kind: str, subject: str | None) -> _BatchSpan | None:
    """The span of ``publisher``, started by its first message (None before one, or once it is over)."""
    b: _BatchSpan | None = s.batches.get(publisher)
    if b is None and subject is not None and not publisher.done:
        b = _BatchSpan(s, publisher, kind, subject)
        with s._lock:
            s.batches[publisher] = b
        # A batch dropped without commit, discard or its block's end: the span ends with it.
        weakref.finalize(publisher, b.end, None, None, None)
    return b


def _wrap_batch_send(s: _State, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``add``/``commit`` of an atomic or fast batch: each message carries the batch span's context;
    the span ends when the batch is over (committed and acknowledged, or refused)."""
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], publisher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(publisher, args, kwargs)
        subject = bound.arguments.get("subject")
        b = _batch_span(s, publisher, kind, subject)
        if b is None or b.ended:
            return wrapped(*args, **kwargs)
        if subject is not None:  # a commit without a subject carries no message, and no headers
            bound.arguments["headers"] = inject(bound.arguments.get("headers"), b.context)
        result: Any = None
        error: BaseException | None = None
        try:
            with trace.use_span(b.span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                result = binder.call(wrapped, bound)
            return result
        except BaseException as exc:
            error = exc
            if not publisher.done:  # the batch goes on (a wait that timed out, a full batch)
                b.span.record_exception(exc)
            raise
        finally:
            if publisher.done:
                ack = getattr(publisher, "result", None) or (result if hasattr(result, "batch_size") else None)
                b.end(publisher.size, ack, error)
    return wrapper


def _wrap_batch_end(s: _State) -> Callable[..., Any]:
    """``discard``/``__exit__`` of a batch: a batch given up ends its span (with the block's
    exception, or the error of a block left without commit)."""
    def wrapper(wrapped: Callable[..., Any], publisher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        b: _BatchSpan | None = s.batches.get(publisher)
        if b is None or b.ended:
            return wrapped(*args, **kwargs)
        error: BaseException | None = args[1] if len(args) > 1 and isinstance(args[1], BaseException) else None
        try:
            return wrapped(*args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            if publisher.done:
                b.end(publisher.size, getattr(publisher, "result", None), error)
    return wrapper


def _wrap_kv_publish(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A KV write carries the trace context of its span (the KV operation's, current here, where
    instrumentation is suppressed for what the operation does underneath): a watcher's receive
    span of the update is its child."""
    binder = _Args(fn)

    def wrapper(wrapped: Callable[..., Any], kv: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _Live.current is not s:
            return wrapped(*args, **kwargs)
        bound = binder.bind(kv, args, kwargs)
        bound.arguments["headers"] = inject(bound.arguments.get("headers"))
        return binder.call(wrapped, bound)
    return wrapper


def _wrap_kv_decode(s: _State) -> Callable[..., Any]:
    """A receive span per update a KV watcher hands to the application, the child of the writer's
    context when the update carries one."""
    def wrapper(wrapped: Callable[..., Any], watcher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        started = _now_ns()
        decoded = wrapped(*args, **kwargs)
        if not is_instrumentation_enabled():
            return decoded
        entry, _, deleted = decoded
        if deleted and getattr(watcher, "_ignore_deletes", False):
            return decoded  # skipped by the watcher: the application never sees it
        msg: Msg = args[0] if args else kwargs["msg"]
        writer = extract(_headers_of(msg))
        parent = writer if trace.get_current_span(writer).get_span_context().is_valid else None
        attrs = s.client_attrs(None)
        attrs.update({a.MESSAGING_OPERATION_TYPE: "receive", a.MESSAGING_OPERATION_NAME: "receive",
                      a.MESSAGING_DESTINATION_NAME: entry.bucket, a.NATS_KV_BUCKET: entry.bucket,
                      a.NATS_KV_KEY: entry.key, a.NATS_STREAM_SEQUENCE: entry.revision,
                      a.MESSAGING_MESSAGE_BODY_SIZE: len(msg.data)})
        span = s.tracer.start_span(f"receive {entry.bucket}", context=parent, kind=SpanKind.CONSUMER,
                                   attributes=attrs, start_time=started)
        s.run_consume_hook(span, msg)
        span.end()
        s.metrics.consumed.add(1, _metric_attrs(attrs, "receive"))
        return decoded
    return wrapper


def _wrap_settle(s: _State, kind: str) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], msg: Msg, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or not msg.reply.startswith(_ACK_PREFIX):
            return wrapped(*args, **kwargs)
        attrs: dict[str, Any] = {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_TYPE: "settle",
                                 a.MESSAGING_OPERATION_NAME: kind, a.NATS_ACK_KIND: kind}
        js = _js_attrs(msg)
        attrs.update(js)
        if js:
            attrs[a.MESSAGING_DESTINATION_NAME] = js[a.NATS_STREAM]
            attrs[a.MESSAGING_CONSUMER_GROUP_NAME] = js[a.NATS_CONSUMER]
        with _operation(s, f"{kind} {js.get(a.NATS_STREAM, 'jetstream')}", SpanKind.CLIENT, attrs, kind):
            return wrapped(*args, **kwargs)
    return wrapper


def _wrap_batch_iter(s: _State) -> Callable[..., Any]:
    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], batch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _traced_iter(s, wrapped(*args, **kwargs))
    return wrapper


def _traced_iter(s: _State, it: Iterator[Msg]) -> Iterator[Msg]:
    while True:
        started = _now_ns()
        try:
            msg = next(it)
        except StopIteration:
            return
        if is_instrumentation_enabled():
            _receive_span(s, msg, None, None, started)
        yield msg


def _wrap_messages_init(s: _State) -> Callable[..., Any]:
    """Remember the iterators made inside a KV or object operation (under suppression): their
    messages are that operation's chunks or entries, already covered by its one span."""
    def wrapper(wrapped: Callable[..., Any], ctx: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        wrapped(*args, **kwargs)
        if not is_instrumentation_enabled():
            with s._lock:
                s.internal.add(id(ctx))
            weakref.finalize(ctx, s.internal.discard, id(ctx))
    return wrapper


def _wrap_messages_next(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], ctx: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or id(ctx) in s.internal:
            return wrapped(*args, **kwargs)
        return _receive(s, wrapped, args, kwargs)
    return wrapper


def _wrap_consume(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], consumer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(consumer, args, kwargs)
        bound.arguments["handler"] = _traced_handler(s, bound.arguments["handler"], None, None, None)
        return binder.call(wrapped, bound)
    return wrapper


def _wrap_js_subscribe(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    """nats-py style ``js.subscribe``/``subscribe_bind``: the callback in process spans, or the
    returned push subscription's ``next_msg`` in receive spans."""
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(js, args, kwargs)
        cb = bound.arguments.get("cb")
        if cb is not None:
            bound.arguments["cb"] = _traced_handler(s, cb, None, bound.arguments.get("queue"), None)
        sub = binder.call(wrapped, bound)
        if cb is None:
            s.track_user_sub(sub)
        return sub
    return wrapper


def _wrap_jetstream(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        js = wrapped(*args, **kwargs)
        s.metrics.watch_client(client)
        s.metrics.watch_jetstream(js)
        return js
    return wrapper


# ---------------------------------------------------------------------- KV, object store, services


def _wrap_store(s: _State, op: str, op_type: str, bucket_key: str, name_key: str,
                fn: Callable[..., Any], name_arg: str) -> Callable[..., Any]:
    """One CLIENT span per KV or object operation; what it does underneath records nothing of its own."""
    binder = _Args(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], store: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = binder.bind(store, args, kwargs)
        bucket = str(getattr(store, "bucket", getattr(store, "name", "")))
        attrs: dict[str, Any] = {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_TYPE: op_type,
                                 a.MESSAGING_OPERATION_NAME: op, a.MESSAGING_DESTINATION_NAME: bucket,
                                 bucket_key: bucket}
        name = bound.arguments.get(name_arg)
        if isinstance(name, str):
            attrs[name_key] = name
        elif name is not None and hasattr(name, "name"):
            attrs[name_key] = str(name.name)
        with _operation(s, f"{op} {bucket}", SpanKind.CLIENT, attrs, op, sent=int(op_type == "send"),
                        consumed=int(op_type == "receive")) as span:
            with suppress_instrumentation():
                result = wrapped(*args, **kwargs)
            _describe_result(span, result)
            return result
    return wrapper


def _describe_result(span: Span, result: Any) -> None:
    """Revision of a KV write or entry, size of an object (whatever the result says)."""
    if isinstance(result, int) and not isinstance(result, bool):
        span.set_attribute(a.NATS_STREAM_SEQUENCE, result)
        return
    revision = getattr(result, "revision", None)
    if isinstance(revision, int):
        span.set_attribute(a.NATS_STREAM_SEQUENCE, revision)
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


_SPARK_METHODS = ("reader", "streamReader", "writer", "streamWriter")


def _instrument_spark(s: _State, module: Any) -> None:
    """Once the Spark data source is imported (never imported for this: it loads pyspark), trace its
    readers and writers: each task attempt on the executors becomes a span (see :mod:`.spark`)."""
    if _Live.current is not s:
        return  # an instrumentation that was undone before Spark was imported

    def wrapper(wrapped: Callable[..., Any], source: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        made = wrapped(*args, **kwargs)
        if _Live.current is not s or not is_instrumentation_enabled():
            return made
        from .spark import traced

        return traced(made)

    for method in _SPARK_METHODS:
        wrapt.wrap_function_wrapper(module, f"JetStreamDataSource.{method}", wrapper)


def _api_request_event(subject: str, payload: bytes) -> None:
    """JetStream API traffic as events of the span of the operation that made it (the caller's thread)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("nats.jetstream.api.request", {"nats.api.subject": subject,
                                                     a.MESSAGING_MESSAGE_BODY_SIZE: len(payload)})


def _api_response_event(subject: str, payload: bytes, headers: Mapping[str, Any] | None) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("nats.jetstream.api.response", {"nats.api.subject": subject,
                                                      a.MESSAGING_MESSAGE_BODY_SIZE: len(payload)})


# ---------------------------------------------------------------------- the instrumentor


class NatsjsSyncInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """OpenTelemetry instrumentation of natsjs_sync (one per process, as every instrumentor).

    ``NatsjsSyncInstrumentor().instrument(tracer_provider=..., meter_provider=...,
    publish_hook=..., consume_hook=...)``; ``uninstrument()`` restores the
    library's own methods. Registered as the ``natsjs_sync`` entry point of
    ``opentelemetry_instrumentor``: ``opentelemetry-instrument python app.py``
    instruments an application with no change to its code. Thread-safe.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """The distributions this instruments."""
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        """Wrap the client's methods.

        Args (keywords):
            tracer_provider: where spans go (default: the global provider).
            meter_provider: where metrics go (default: the global provider).
            publish_hook: :data:`PublishHook`, to enrich producer spans.
            consume_hook: :data:`ConsumeHook`, to enrich receive and process spans.
        """
        tracer = trace.get_tracer(__name__, __version__, tracer_provider=kwargs.get("tracer_provider"),
                                  schema_url=_SCHEMA_URL)
        meter = otel_metrics.get_meter(__name__, __version__, meter_provider=kwargs.get("meter_provider"),
                                       schema_url=_SCHEMA_URL)
        s = _State(tracer, Metrics(meter), kwargs.get("publish_hook"), kwargs.get("consume_hook"))
        from ..client import Client
        from ..jetstream.consumer import Consumer
        from ..jetstream.context import JetStream
        from ..jetstream.kv import KeyValue
        from ..jetstream.nats_py import NatsPyNames
        from ..jetstream.object_store import ObjectStore
        from ..jetstream.push import PushConsumer

        targets = _targets(s, Client, JetStream, Consumer, KeyValue, ObjectStore, PushConsumer, NatsPyNames)
        for module, name, wrapper in targets:
            wrapt.wrap_function_wrapper(module, name, wrapper)
        self._wrapped = [(module, name) for module, name, _ in targets]
        # Live before the import hook is registered: with the data source already imported,
        # the hook runs at once, and it wraps only for the live instrumentation.
        _Live.current = s
        wrapt.when_imported("natsjs_sync.spark.datasource")(functools.partial(_instrument_spark, s))
        self._api_trace = add_client_trace(ClientTrace(request_sent=_api_request_event,
                                                       response_received=_api_response_event))

    def _uninstrument(self, **kwargs: Any) -> None:
        """Restore the library's own methods; callbacks wrapped earlier call straight through from now on."""
        _Live.current = None
        api_trace = getattr(self, "_api_trace", None)
        if api_trace is not None:
            api_trace.cancel()
        for module, name in reversed(getattr(self, "_wrapped", [])):
            owner: Any = importlib.import_module(module)
            cls_name, attr = name.rsplit(".", 1)
            for part in cls_name.split("."):
                owner = getattr(owner, part)
            unwrap(owner, attr)
        self._wrapped = []
        spark = sys.modules.get("natsjs_sync.spark.datasource")
        if spark is not None:
            for method in _SPARK_METHODS:
                if hasattr(getattr(spark.JetStreamDataSource, method), "__wrapped__"):
                    unwrap(spark.JetStreamDataSource, method)


def _targets(s: _State, client: Any, js: Any, consumer: Any, kv: Any, objects: Any, push: Any,
             names: Any) -> list[tuple[str, str, Callable[..., Any]]]:
    """(module, "Class.method", wrapper) for every wrapped method."""
    t: list[tuple[str, str, Callable[..., Any]]] = [
        ("natsjs_sync.client", "Client.publish", _wrap_publish(s)),
        ("natsjs_sync.client", "Client.publish_now", _wrap_publish(s)),
        ("natsjs_sync.client", "Client.request", _wrap_request(s)),
        ("natsjs_sync.client", "Client.subscribe", _wrap_subscribe(s)),
        ("natsjs_sync.client", "Client.jetstream", _wrap_jetstream(s)),
        ("natsjs_sync.msg", "Msg.respond", _wrap_respond(s)),
        ("natsjs_sync.subscription", "Subscription.next_msg", _wrap_next_msg(s)),
        ("natsjs_sync.jetstream.context", "JetStream.publish", _wrap_js_publish(s, js.publish)),
        ("natsjs_sync.jetstream.context", "JetStream.publish_async",
         _wrap_js_publish_async(s, js.publish_async)),
        ("natsjs_sync.jetstream.pull", "MessageBatch.__iter__", _wrap_batch_iter(s)),
        ("natsjs_sync.jetstream.pull", "MessagesContext.__init__", _wrap_messages_init(s)),
        ("natsjs_sync.jetstream.pull", "MessagesContext.next", _wrap_messages_next(s)),
        ("natsjs_sync.jetstream.consumer", "Consumer.consume", _wrap_consume(s, consumer.consume)),
        ("natsjs_sync.jetstream.push", "PushConsumer.consume", _wrap_consume(s, push.consume)),
        ("natsjs_sync.jetstream.nats_py", "NatsPyNames.subscribe", _wrap_js_subscribe(s, names.subscribe)),
        ("natsjs_sync.jetstream.nats_py", "NatsPyNames.subscribe_bind",
         _wrap_js_subscribe(s, names.subscribe_bind)),
        ("natsjs_sync.micro.service", "Service.add_endpoint", _wrap_add_endpoint(s)),
        ("natsjs_sync.micro.service", "Group.add_endpoint", _wrap_add_endpoint(s)),
    ]
    for module, cls, kind in (("natsjs_sync.jetstream.batch", "BatchPublisher", "atomic"),
                              ("natsjs_sync.jetstream.fastbatch", "FastBatchPublisher", "fast")):
        owner = getattr(importlib.import_module(module), cls)
        for method in ("add", "commit"):
            t.append((module, f"{cls}.{method}", _wrap_batch_send(s, kind, getattr(owner, method))))
        for method in ("discard", "__exit__"):
            t.append((module, f"{cls}.{method}", _wrap_batch_end(s)))
    t.append(("natsjs_sync.jetstream.kv", "KeyValue._publish", _wrap_kv_publish(s, kv._publish)))
    t.append(("natsjs_sync.jetstream.kv", "KeyWatcher._decode", _wrap_kv_decode(s)))
    for kind in ("ack", "nak", "term", "in_progress", "ack_sync"):
        t.append(("natsjs_sync.msg", f"Msg.{kind}", _wrap_settle(s, kind)))
    for op, op_type in (("put", "send"), ("create", "send"), ("update", "send"), ("delete", "send"),
                        ("purge", "send"), ("get", "receive"), ("keys", "receive"), ("history", "receive"),
                        ("watch", "create")):
        t.append(("natsjs_sync.jetstream.kv", f"KeyValue.{op}",
                  _wrap_store(s, op, op_type, a.NATS_KV_BUCKET, a.NATS_KV_KEY, getattr(kv, op), "key")))
    for op, op_type in (("put", "send"), ("delete", "send"), ("get", "receive"), ("get_info", "receive"),
                        ("list", "receive")):
        t.append(("natsjs_sync.jetstream.object_store", f"ObjectStore.{op}",
                  _wrap_store(s, op, op_type, a.NATS_OBJECT_BUCKET, a.NATS_OBJECT_NAME, getattr(objects, op),
                              "name")))
    return t


@contextlib.contextmanager
def process(msg: Msg, name: str | None = None) -> Iterator[Span]:
    """Run the application's handling of a message as a child of its producer's span.

    For messages read from an iterator (``next_msg``, ``fetch``,
    ``messages()``), where the library cannot know where handling ends::

        for msg in sub:
            with natsjs_sync.otel.process(msg):
                handle(msg)

    Args:
        msg: the message being handled.
        name: the span name (default ``process <destination>``).

    Yields:
        The process span (a non-recording span when not instrumented).
    """
    s = _Live.current
    if s is None or not is_instrumentation_enabled():
        yield trace.INVALID_SPAN
        return
    with _processing(s, msg, name or f"process {_label(msg, None)}", SpanKind.CONSUMER,
                     _consumer_attrs(msg, None, None, "process"), count=False) as span:
        yield span

