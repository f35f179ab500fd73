"""JetStream under the instrumentation: publishes, batches, pull iterators, consume, acks.

Producer spans for ``JetStream.publish`` (ended with the PubAck's stream and
sequence) and ``publish_async`` (ended when its future settles, on whichever
thread); one span per atomic or fast batch, from its first message until its
ack or its end; receive spans for what ``MessageBatch`` and ``messages()`` hand
out; process spans around ``consume()`` handlers and nats-py style
``js.subscribe`` callbacks; a CLIENT span per ack, nak, term or in-progress;
JetStream API requests and responses as events of the current span.
"""

from __future__ import annotations

import inspect
import timeit
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span, SpanKind

from . import attributes as a
from .propagation import creation_context
from .spans import (
    _ACK_PREFIX,
    _call_with_context,
    _fail,
    _fits_with_context,
    _headers_ok,
    _js_attrs,
    _Live,
    _message_id,
    _now_ns,
    _operation,
    _Param,
    _receive,
    _receive_span,
    _send_kind,
    _State,
    _takes_callback,
    _traced_handler,
    _unless_suppressed,
    _with_context,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg


# ---------------------------------------------------------------------- publishing


def _describe_ack(span: Span, ack: Any, attrs: dict[str, Any] | None = None) -> None:
    """The stream and sequence a JetStream publish was stored at (the stream also into the
    operation's ``attrs``, for its metrics: a bounded name where the subject is not)."""
    if attrs is not None:
        attrs[a.NATS_STREAM] = ack.stream
    span.set_attribute(a.NATS_STREAM, ack.stream)
    span.set_attribute(a.NATS_STREAM_SEQUENCE, ack.seq)


class _PublishParams:
    """Where a JetStream publish's subject, payload, headers and message id are in its call."""

    __slots__ = ("headers", "msg_id", "payload", "subject")

    def __init__(self, fn: Callable[..., Any]):
        self.subject, self.payload = _Param(fn, "subject"), _Param(fn, "payload")
        self.headers, self.msg_id = _Param(fn, "headers"), _Param(fn, "msg_id")

    def attrs(self, s: _State, js: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> tuple[str, Any, Any, dict[str, Any]] | None:
        """Subject, payload, headers and span attributes (None for a subject that is no str, or
        headers the client refuses: the call goes on untraced and is refused as it is without
        instrumentation)."""
        subject = self.subject.get(args, kwargs)
        if not isinstance(subject, str):
            return None
        payload, headers = self.payload.get(args, kwargs, b""), self.headers.get(args, kwargs)
        if not _headers_ok(headers):
            return None
        attrs = s.client_attrs(js.nc)
        attrs.update(s.destination(subject, js.nc, "send", "publish"))
        s.body_size(attrs, payload)
        msg_id = self.msg_id.get(args, kwargs) or _message_id(headers)
        if msg_id:
            attrs[a.MESSAGING_MESSAGE_ID] = str(msg_id)
        return subject, payload, headers, attrs


def _wrap_js_publish(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    params = _PublishParams(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        described = params.attrs(s, js, args, kwargs)
        if described is None:
            return wrapped(*args, **kwargs)
        subject, payload, headers, attrs = described
        kind, links = _send_kind(headers, waits=True)
        with _operation(s, a.span_name("publish", attrs), kind, attrs, "publish", sent=1, links=links) as span:
            s.run_publish_hook(span, subject, payload, headers)
            ack = _call_with_context(s, "publish", wrapped, params.headers, args, kwargs)
            _describe_ack(span, ack, attrs)
            if ack.duplicate:
                span.set_attribute(a.NATS_DUPLICATE, True)
            return ack
    return wrapper


def _wrap_js_publish_async(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    params = _PublishParams(fn)

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        described = params.attrs(s, js, args, kwargs)
        if described is None:
            return wrapped(*args, **kwargs)
        s.metrics.watch_jetstream(js)
        subject, payload, headers, attrs = described
        started = timeit.default_timer()
        # The span lives until the ack settles, on whichever thread that happens: it is
        # never made current here, only put in the context the headers carry.
        kind, links = _send_kind(headers, waits=False)
        span = s.tracer.start_span(a.span_name("publish", attrs), kind=kind, attributes=attrs, links=links)
        s.run_publish_hook(span, subject, payload, headers)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                fut = _call_with_context(s, "publish", wrapped, params.headers, args, kwargs,
                                         trace.set_span_in_context(span))
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
                _describe_ack(span, f.result(0), attrs)
            s.record("publish", attrs, started, exc, sent=1)
            span.end()  # last: whoever sees the span ended also sees it counted

        fut.add_done_callback(settled)
        return fut
    return wrapper


# ---------------------------------------------------------------------- atomic and fast batches


class _BatchSpan:
    """The one span of a batch publish: from its first message until its ack settles, it is
    refused, or the batch is given up. Lives across the calls of one thread (a publisher is
    not thread-safe); :meth:`end` is idempotent (a finalizer may race a last call)."""

    __slots__ = ("attrs", "context", "ended", "s", "span", "started")

    def __init__(self, s: _State, publisher: Any, kind: str, subject: str):
        self.s = s
        nc = getattr(getattr(publisher, "_js", None), "nc", None)
        self.attrs = attrs = s.client_attrs(nc)
        attrs.update(s.destination(subject, nc, "send", "publish"))
        attrs[a.NATS_BATCH_ID] = publisher.batch_id
        attrs[a.NATS_BATCH_KIND] = kind
        self.started = timeit.default_timer()
        # Never current between calls: only in the context each message's headers carry.
        self.span = s.tracer.start_span(a.span_name("publish", attrs), kind=SpanKind.PRODUCER, attributes=attrs)
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
    subject_p, payload_p, headers_p = _Param(fn, "subject"), _Param(fn, "payload"), _Param(fn, "headers")

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], publisher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        subject = subject_p.get(args, kwargs)
        headers = headers_p.get(args, kwargs)
        if (subject is not None and not isinstance(subject, str)) or not _headers_ok(headers):
            return wrapped(*args, **kwargs)  # refused by the publisher, as without instrumentation
        b = _batch_span(s, publisher, kind, subject)
        if b is None or b.ended:
            return wrapped(*args, **kwargs)
        # A commit without a subject carries no message, and no headers. A batch changes its state
        # before it sends: a message is never tried twice, the trace context is left out beforehand
        # when it might not fit.
        if subject is not None:
            custom = creation_context(headers)
            if custom is not None:  # a message relayed with its own creation context: the batch span links to it
                b.span.add_link(custom)
            nc = getattr(getattr(publisher, "_js", None), "nc", None)
            limit = nc.max_payload if nc is not None else 0
            if _fits_with_context(limit, payload_p.get(args, kwargs, b""), headers, b.context, kwargs):
                args, kwargs = _with_context(headers_p, args, kwargs, b.context)
            else:
                s.metrics.skipped.add(1, {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_NAME: "publish"})
        result: Any = None
        error: BaseException | None = None
        try:
            with trace.use_span(b.span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                result = wrapped(*args, **kwargs)
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


# ---------------------------------------------------------------------- deliveries and acks


def _wrap_settle(s: _State, kind: str) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], msg: Msg, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or not msg.reply.startswith(_ACK_PREFIX):
            return wrapped(*args, **kwargs)
        # The destination of the message settled, as its receive and process spans name it.
        attrs = s.destination(msg.subject, getattr(msg, "_conn", None), "settle", kind)
        attrs[a.MESSAGING_SYSTEM] = a.SYSTEM
        attrs[a.NATS_ACK_KIND] = kind
        js = _js_attrs(msg)
        attrs.update(js)
        if js:
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
    """A batch's messages with a receive span each while ``s`` is the live instrumentation: an
    iterator made before ``uninstrument()`` goes on handing out messages, and records nothing."""
    while True:
        started = _now_ns()
        try:
            msg = next(it)
        except StopIteration:
            return
        if _Live.current is s and is_instrumentation_enabled():
            _receive_span(s, msg, None, None, started)
        yield msg


def _wrap_made_internally(s: _State) -> Callable[..., Any]:
    """``__init__`` of a pull iterator or a KV or object watcher: remember those made inside a
    KV or object operation (under suppression). What they hand out is that operation's chunks,
    entries or keys, covered by its one span, even when read after the operation returned
    (``list_keys``)."""
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
    handler_p = _Param(fn, "handler")

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], consumer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        handler = handler_p.get(args, kwargs)
        # Checked first, wrapped after: a handler the consumer refuses reaches it as it is.
        if _takes_callback(handler, "handler"):
            traced = _traced_handler(s, handler, None, None, None, durable=_is_durable(consumer))
            args, kwargs = handler_p.replace(args, kwargs, traced)
        return wrapped(*args, **kwargs)
    return wrapper


def _is_durable(consumer: Any) -> bool:
    """Whether a consumer handle is of a durable consumer (its name is an operator's, not made at
    random per consumer as an ephemeral or ordered consumer's is). An ordered consumer has no
    ``cached_info``: never durable."""
    try:
        return bool(consumer.cached_info.config.durable_name)
    except Exception:
        return False


def _wrap_js_subscribe(s: _State, fn: Callable[..., Any]) -> Callable[..., Any]:
    """nats-py style ``js.subscribe``/``subscribe_bind``: the callback in process spans, or the
    returned push subscription's ``next_msg`` in receive spans."""
    cb_p = _Param(fn, "cb")
    queue_p = _Param(fn, "queue") if "queue" in inspect.signature(fn).parameters else None

    @_unless_suppressed
    def wrapper(wrapped: Callable[..., Any], js: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        cb = cb_p.get(args, kwargs)
        if _takes_callback(cb):
            queue = queue_p.get(args, kwargs) if queue_p is not None else None
            args, kwargs = cb_p.replace(args, kwargs, _traced_handler(s, cb, None, queue, None))
        sub = wrapped(*args, **kwargs)
        if cb is None:
            s.track_user_sub(sub)
        return sub
    return wrapper


# ---------------------------------------------------------------------- the JetStream context and its API traffic


def _wrap_jetstream(s: _State) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        js = wrapped(*args, **kwargs)
        s.metrics.watch_client(client)
        s.metrics.watch_jetstream(js)
        return js
    return wrapper


def _api_request_event(subject: str, payload: bytes) -> None:
    """JetStream API traffic as events of the span of the operation that made it (the caller's thread)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("nats.jetstream.api.request", {a.NATS_API_SUBJECT: subject,
                                                     a.MESSAGING_MESSAGE_BODY_SIZE: len(payload)})


def _api_response_event(subject: str, payload: bytes, headers: Mapping[str, Any] | None) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("nats.jetstream.api.response", {a.NATS_API_SUBJECT: subject,
                                                      a.MESSAGING_MESSAGE_BODY_SIZE: len(payload)})

