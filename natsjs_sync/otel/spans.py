"""What every wrapper of the instrumentation shares: its state, and the making of its spans.

:class:`_State` is what one :meth:`~.instrumentor.NatsjsSyncInstrumentor.instrument`
call gives its wrappers (tracer, metrics, hooks, the subscriptions and iterators
it follows); :class:`_Live` names the live one, which callbacks wrapped earlier
compare against. Around them: the attributes of a destination and of a delivery,
the low-cardinality attributes kept on metrics, the span of an operation of the
caller's (:func:`_operation`) and of the application's handling of a message
(:func:`_processing`, :func:`_traced_handler`), the receive span of a message an
iterator hands out (:func:`_receive`), and the plumbing of a wrapt wrapper
(:func:`_unless_suppressed`, :class:`_Param`, :func:`_takes_callback`).

The wrappers themselves are in :mod:`.core` (core NATS), :mod:`.jetstream` and
:mod:`.stores_services` (KV, object store, services); :mod:`.instrumentor` puts
them in place.
"""

from __future__ import annotations

import collections
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
from ..client import check_callback
from ..errors import MaxPayloadError
from ..protocol.headers import encode_headers
from . import attributes as a
from .metrics import Metrics
from .propagation import creation_context, extract, inject

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
                 consume_hook: ConsumeHook | None, message_body_size: bool = False):
        self.tracer = tracer
        self.metrics = metrics
        self.publish_hook = publish_hook
        self.consume_hook = consume_hook
        # messaging.message.body.size is opt-in by the conventions.
        self.message_body_size = message_body_size
        self._lock = threading.Lock()
        # Inbox prefixes of other clients, learned in two steps, both bounded: seen in the reply
        # subject of a received message (any client may send any reply subject: the latest few
        # are kept), then confirmed when this process sends to an inbox under one (a reply), and
        # kept; a send to an inbox under a confirmed prefix is named by the prefix's template.
        self.reply_prefixes: tuple[str, ...] = ()  # confirmed, each ending with "."
        self._seen_prefixes: collections.OrderedDict[str, None] = collections.OrderedDict()
        # Subscriptions the application made without a callback: only their next_msg
        # gets receive spans (the library's own subscriptions use next_msg too).
        self.user_subs: set[int] = set()
        # Pull iterators the library made for itself inside a traced KV or object operation.
        self.internal: set[int] = set()
        # The span of each batch publish under way (atomic and fast batches).
        self.batches: weakref.WeakKeyDictionary[Any, _BatchSpan] = weakref.WeakKeyDictionary()
        self._client_attrs: weakref.WeakKeyDictionary[Client, tuple[str | None, dict[str, Any]]] = (
            weakref.WeakKeyDictionary())
        self._inbox_prefixes: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
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

    def inbox_prefix(self, owner: Any) -> str:
        """The inbox prefix of a client (or of the core a message came through): its reply
        subjects are temporary destinations. Read once per client, from a new inbox's subject."""
        if owner is None:
            return a.DEFAULT_INBOX_PREFIX
        prefix = self._inbox_prefixes.get(owner)
        if prefix is None:
            try:
                prefix = owner.new_inbox().rpartition(".")[0] or a.DEFAULT_INBOX_PREFIX
            except Exception:  # not a client after all, or one that cannot make inboxes
                return a.DEFAULT_INBOX_PREFIX
            try:
                self._inbox_prefixes[owner] = prefix
            except TypeError:  # not weakly referenceable: read again next time
                pass
        return prefix

    def body_size(self, attrs: dict[str, Any], payload: Any) -> None:
        """``messaging.message.body.size`` of ``payload`` into ``attrs``, when opted in."""
        if self.message_body_size:
            attrs[a.MESSAGING_MESSAGE_BODY_SIZE] = _size(payload)

    def learn_reply(self, reply: str) -> None:
        """Note the inbox prefix of a received message's reply subject (see :func:`.attributes.inbox_of`):
        the latest :data:`_MAX_REPLY_PREFIXES` seen are kept until a send confirms one."""
        if not reply or reply.startswith(_ACK_PREFIX):
            return  # none, or an ack subject (temporary already)
        prefix = a.inbox_of(reply)
        if prefix is None or prefix + "." in self.reply_prefixes:
            return
        with self._lock:
            seen = self._seen_prefixes
            seen[prefix] = None
            seen.move_to_end(prefix)
            if len(seen) > _MAX_REPLY_PREFIXES:
                seen.popitem(last=False)

    def _confirm(self, prefix: str) -> bool | None:
        """A send to an inbox under ``prefix``: True when the prefix is (now) confirmed, False when
        it was seen but as many as are kept are confirmed, None when it was not seen."""
        with self._lock:
            if prefix not in self._seen_prefixes:
                return None
            if len(self.reply_prefixes) >= _MAX_REPLY_PREFIXES:
                return False
            del self._seen_prefixes[prefix]
            self.reply_prefixes = (*self.reply_prefixes, prefix + ".")
            return True

    def destination(self, subject: str, owner: Any, op_type: str, op_name: str,
                    temporary: bool = False) -> dict[str, Any]:
        """Operation and destination attributes of ``subject`` sent or received by ``owner`` (a client).

        ``temporary``: a reply subject (whatever its prefix). A send to an inbox of another
        client is temporary, and named by its prefix's template once the prefix is confirmed (at
        most :data:`_MAX_REPLY_PREFIXES` of them: the prefix of a reply subject is the sender's
        choice, and a template per prefix would be a metric series per requester).
        """
        attrs = _destination(subject, op_type, op_name, self.inbox_prefix(owner), temporary, self.reply_prefixes)
        if op_type == "send" and a.MESSAGING_DESTINATION_TEMPLATE not in attrs and (temporary or self._seen_prefixes):
            prefix = a.inbox_of(subject)
            confirmed = self._confirm(prefix) if prefix is not None else None
            if confirmed is not None:
                attrs[a.MESSAGING_DESTINATION_TEMPORARY] = True
            if confirmed:
                attrs[a.MESSAGING_DESTINATION_TEMPLATE] = f"{prefix}.>"
        return attrs

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
               sent: int = 0, consumed: int = 0, named: bool = False) -> None:
        """The metrics of one finished operation (``named``: see :func:`_metric_attrs`)."""
        m = _metric_attrs(attrs, op, error, named)
        self.metrics.duration.record(timeit.default_timer() - started, m)
        if sent:
            self.metrics.sent.add(sent, m)
        if consumed:
            self.metrics.consumed.add(consumed, m)


#: Inbox prefixes of other clients kept at most, seen and confirmed each (a bound on the learning,
#: not on correctness: beyond it, a send to an inbox is temporary without a template).
_MAX_REPLY_PREFIXES = 64

# Attributes kept on metrics: bounded ones only (no subjects, message ids, sequences, sizes or
# consumer names, see _metric_attrs).
_METRIC_KEYS = frozenset({
    a.MESSAGING_SYSTEM, a.MESSAGING_DESTINATION_TEMPLATE, a.MESSAGING_DESTINATION_SUBSCRIPTION_NAME,
    a.SERVER_ADDRESS, a.SERVER_PORT, a.MESSAGING_OPERATION_TYPE, a.NATS_STREAM,
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


def _metric_attrs(attrs: Mapping[str, Any], op: str, error: BaseException | None = None,
                  named: bool = False, durable: bool = False) -> dict[str, Any]:
    """The bounded part of a span's attributes, with the operation and the error: a metric's.

    ``messaging.destination.name`` goes on a metric only when ``named``: the
    destination is a stream or a bucket (few, made by an operator), never a
    subject (one per order id, inbox or key, as the application makes them); a
    subject is represented by its template where there is one. A JetStream
    consumer's name goes on only when ``durable``: ephemeral and ordered
    consumers are named at random, one name per consumer made.
    """
    m = {k: v for k, v in attrs.items() if k in _METRIC_KEYS}
    if named and a.MESSAGING_DESTINATION_NAME in attrs:
        m[a.MESSAGING_DESTINATION_NAME] = attrs[a.MESSAGING_DESTINATION_NAME]
    if durable or a.NATS_CONSUMER not in attrs:
        group = attrs.get(a.MESSAGING_CONSUMER_GROUP_NAME)
        if group is not None:
            m[a.MESSAGING_CONSUMER_GROUP_NAME] = group  # a queue group, or a durable consumer
    if attrs.get(a.MESSAGING_DESTINATION_TEMPORARY):
        m.pop(a.MESSAGING_DESTINATION_SUBSCRIPTION_NAME, None)
    m[a.MESSAGING_OPERATION_NAME] = op
    if error is not None:
        m[a.ERROR_TYPE] = _error_type(error)
    return m


@contextlib.contextmanager
def _operation(s: _State, name: str, kind: SpanKind, attrs: dict[str, Any], op: str, *, sent: int = 0,
               consumed: int = 0, links: list[Link] | None = None, named: bool = False) -> Iterator[Span]:
    """The current span of one operation of the caller's (publish, request, settle, a KV or object call).

    A failure marks the span (``error.type``, status) and goes on; the operation's
    metrics are recorded when it ends, ``sent`` always, ``consumed`` only on success
    (``named``: the destination is a stream or a bucket, see :func:`_metric_attrs`).
    """
    started = timeit.default_timer()
    error: BaseException | None = None
    with s.tracer.start_as_current_span(name, kind=kind, attributes=attrs, links=links, record_exception=False,
                                        set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            error = exc
            _fail(span, exc)
            raise
        finally:
            s.record(op, attrs, started, error, sent=sent, consumed=0 if error is not None else consumed, named=named)


@contextlib.contextmanager
def _processing(s: _State, msg: Msg, name: str, kind: SpanKind, attrs: dict[str, Any],
                count: bool, durable: bool = False) -> Iterator[Span]:
    """The current span of the application's handling of ``msg``, linked to its creation context.

    Its parent is the span current where the handling runs, when there is one
    (the application's, around :func:`process`); otherwise the message's
    creation context (a callback on a dispatcher thread), so a trace goes on
    from producer to consumer either way. A failure marks the span, and a
    record that logs the exception later on this thread is emitted inside the
    span (see :func:`_log_inside`). ``count``: the delivery counts as consumed
    here (a callback; an iterator counted it already). ``durable``: see
    :func:`_metric_attrs`.
    """
    started = timeit.default_timer()
    error: BaseException | None = None
    created = extract(_headers_of(msg))
    creation = trace.get_current_span(created).get_span_context()
    links = [Link(creation)] if creation.is_valid else None
    ambient = trace.get_current_span().get_span_context().is_valid
    with s.tracer.start_as_current_span(name, context=None if ambient else created, kind=kind, attributes=attrs,
                                        links=links, record_exception=False,
                                        set_status_on_exception=False) as span:
        s.run_consume_hook(span, msg)
        try:
            yield span
        except BaseException as exc:
            error = exc
            _fail(span, exc)
            _log_inside(span, exc)
            raise
        finally:
            m = _metric_attrs(attrs, "process", error, durable=durable)
            s.metrics.process.record(timeit.default_timer() - started, m)
            if count:
                s.metrics.consumed.add(1, m)


def _destination(subject: str, op_type: str, op_name: str, inbox_prefix: str = a.DEFAULT_INBOX_PREFIX,
                 temporary: bool = False, reply_prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Operation and destination attributes (see :func:`.attributes.destination`)."""
    attrs = a.destination(subject, inbox_prefix, temporary=temporary, reply_prefixes=reply_prefixes)
    attrs[a.MESSAGING_OPERATION_TYPE] = op_type
    attrs[a.MESSAGING_OPERATION_NAME] = op_name
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


class _Param:
    """One parameter of a wrapped method, read and replaced where the caller put it.

    A wrapper never binds the call to the signature itself: the arguments go on
    exactly as the caller wrote them (positional or keyword, absent ones left
    absent for the method's own defaults), so the method checks them and raises
    for bad ones exactly as it does without instrumentation. The signature is
    read once, when the wrapper is made.
    """

    __slots__ = ("index", "name")

    def __init__(self, fn: Callable[..., Any], name: str):
        params = list(inspect.signature(fn).parameters.values())[1:]  # past self
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.index: int | None = None
        for i, param in enumerate(params):
            if param.name == name and param.kind in positional:
                self.index = i
        self.name = name  # read as a keyword only, when the method has no such positional parameter

    def get(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], default: Any = None) -> Any:
        """The argument as given, else ``default``."""
        if self.index is not None and len(args) > self.index:
            return args[self.index]
        return kwargs.get(self.name, default)

    def replace(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``args, kwargs`` with this argument set to ``value`` where the caller gave it (as a keyword when absent)."""
        if self.index is not None and len(args) > self.index:
            return (*args[:self.index], value, *args[self.index + 1:]), kwargs
        return args, {**kwargs, self.name: value}


def _with_context(param: _Param, args: tuple[Any, ...], kwargs: dict[str, Any],
                  context: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with the trace context added to its headers (left as they are when nothing is added)."""
    headers = param.get(args, kwargs)
    injected = inject(headers, context)
    if injected is headers:
        return args, kwargs
    return param.replace(args, kwargs, injected)


def _headers_ok(headers: Any) -> bool:
    """Whether the client will take ``headers``: the protocol's own check (encoding them), made
    before anything is wrapped. Headers it refuses reach it untouched and untraced, so it raises
    its own error at its own moment, and nothing is sent, as without instrumentation."""
    if headers is None:
        return True
    try:
        encode_headers(headers)
    except Exception:
        return False
    return True


def _send_kind(headers: Any, waits: bool) -> tuple[SpanKind, list[Link] | None]:
    """Kind and links of a send span, by the conventions: PRODUCER when its context becomes the
    message's creation context. A caller's own valid context in the headers (a relayed message)
    stays the creation context and the span links to it; the span is then CLIENT when the call
    waits on the server (a request, a JetStream publish), PRODUCER otherwise."""
    custom = creation_context(headers)
    if custom is None:
        return SpanKind.PRODUCER, None
    return (SpanKind.CLIENT if waits else SpanKind.PRODUCER), [Link(custom)]


def _call_with_context(s: _State, op: str, wrapped: Callable[..., Any], param: _Param, args: tuple[Any, ...],
                       kwargs: dict[str, Any], context: Any = None) -> Any:
    """Call ``wrapped`` with the trace context in its message's headers, never changing the outcome.

    The client measures the message it sends (with headers of its own, such as
    JetStream options) against the server's ``max_payload`` before it sends or
    registers anything: a message it refuses only because of the trace context
    is sent without it (counted in ``nats.client.trace_context.skipped``). Used
    for calls that send one message and change nothing before that check.
    """
    sent_args, sent_kwargs = _with_context(param, args, kwargs, context)
    if sent_args is args and sent_kwargs is kwargs:
        return wrapped(*args, **kwargs)
    try:
        return wrapped(*sent_args, **sent_kwargs)
    except MaxPayloadError:
        pass
    result = wrapped(*args, **kwargs)  # outside the handler: an error of its own carries no other as context
    # Counted once sent: a message too big even without the trace context was not sent at all.
    s.metrics.skipped.add(1, {a.MESSAGING_SYSTEM: a.SYSTEM, a.MESSAGING_OPERATION_NAME: op})
    return result


#: Room kept for the headers a batch publisher adds to a message of its own accord (batch id,
#: sequence, commit): a batch changes its state before it sends, so a message is never sent twice.
_BATCH_HEADER_ROOM = 512
#: Room kept per option of a batch message (``msg_id``, ``expected_*``, ``ttl``) on top of its value:
#: each becomes a header, whose name (at most 43 characters) and framing fit in it.
_OPTION_HEADER_ROOM = 96
# Arguments of a batch's add/commit that become no header.
_NOT_HEADERS = frozenset({"subject", "payload", "headers", "timeout", "ack"})


def _fits_with_context(max_payload: int, payload: Any, headers: Any, context: Any,
                       options: Mapping[str, Any] | None = None) -> bool:
    """Whether a batch message still fits ``max_payload`` with the trace context added, with room
    for the headers the publisher adds: its own, and one per option given in ``options`` (the
    call's keyword arguments), as long as its value."""
    injected = inject(headers, context)
    if injected is headers:
        return True
    try:
        size = len(payload) + len(encode_headers(injected))
    except Exception:
        return False
    for name, value in (options or {}).items():
        if name not in _NOT_HEADERS and value is not None and value is not False:
            size += _OPTION_HEADER_ROOM + len(str(value))
    return size + _BATCH_HEADER_ROOM <= max_payload


def _takes_callback(cb: Any, what: str = "cb") -> bool:
    """Whether the client will take ``cb`` as a callback: the client's own check, made first.

    A callback it refuses is passed on unwrapped, so the client refuses it with
    its own error, as it does without instrumentation; wrapped, an ``async def``
    would pass as a plain function and never run.
    """
    if cb is None:
        return False
    try:
        check_callback(cb, what)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------- deliveries (callbacks, iterators)


def _consumer_attrs(s: _State, msg: Msg, pattern: str | None, queue: str | None, op_type: str,
                    client: Client | None = None) -> dict[str, Any]:
    """The attributes of a delivery of ``msg`` (its reply subject's inbox prefix is learned)."""
    owner = client if client is not None else getattr(msg, "_conn", None)
    s.learn_reply(msg.reply)
    attrs = s.destination(msg.subject, owner, op_type, op_type)
    attrs[a.MESSAGING_SYSTEM] = a.SYSTEM
    s.body_size(attrs, msg.data)
    if pattern is not None and not attrs.get(a.MESSAGING_DESTINATION_TEMPORARY) \
            and a.is_temporary(pattern, s.inbox_prefix(owner)):
        # Delivered to an inbox for messages of other subjects (a push consumer's deliver subject,
        # one per consumer): it names neither the destination's template nor, on metrics, the subscription.
        pattern = None
    if pattern is not None and pattern != msg.subject:
        attrs.setdefault(a.MESSAGING_DESTINATION_TEMPLATE, pattern)  # an inbox's template stays its prefix's
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


def _delivery_name(operation: str, attrs: Mapping[str, Any]) -> str:
    """A delivery's span name: by its stream for a JetStream delivery (this
    client's convention, as the conventions allow a system to name its own), else
    by the subscription's pattern or the subject, as :func:`.attributes.span_name`."""
    stream = attrs.get(a.NATS_STREAM)
    return f"{operation} {stream}" if stream is not None else a.span_name(operation, attrs)


def _same(msg: Any) -> Msg:
    return msg  # type: ignore[no-any-return]


def _traced_handler(s: _State, handler: Callable[[Any], Any], pattern: str | None, queue: str | None,
                    client: Client | None, server_kind: str | None = None,
                    msg_of: Callable[[Any], Msg] = _same, durable: bool = False) -> Callable[[Any], Any]:
    """``handler`` run inside a process span whose parent is the producer's context.

    Args:
        handler: called with what the wrapper is called with.
        pattern, queue: the subscription's subject and queue group.
        server_kind: for a service endpoint: the span's name (kind SERVER).
        msg_of: the message inside what the handler gets (a service request holds one).
        durable: the JetStream consumer delivering is durable (its name is bounded).
    """

    @functools.wraps(handler)
    def traced(arg: Any) -> Any:
        if _Live.current is not s or not is_instrumentation_enabled():
            return handler(arg)
        msg = msg_of(arg)
        attrs = s.client_attrs(client)
        attrs.update(_consumer_attrs(s, msg, pattern, queue, "process", client))
        name = _delivery_name("process", attrs) if server_kind is None else server_kind
        kind = SpanKind.CONSUMER if server_kind is None else SpanKind.SERVER
        with _processing(s, msg, name, kind, attrs, count=True, durable=durable):
            return handler(arg)

    return traced


def _receive_span(s: _State, msg: Msg, pattern: str | None, queue: str | None, started_ns: int,
                  client: Client | None = None) -> None:
    """A finished receive span for a message an iterator handed to the application, linked to its producer."""
    attrs = s.client_attrs(client)
    attrs.update(_consumer_attrs(s, msg, pattern, queue, "receive", client))
    producer = trace.get_current_span(extract(_headers_of(msg))).get_span_context()
    links = [Link(producer)] if producer.is_valid else None
    # A receive is asked for by the application (pull): CLIENT, as the conventions' span kinds say.
    span = s.tracer.start_span(_delivery_name("receive", attrs), kind=SpanKind.CLIENT, attributes=attrs,
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

