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

The span kinds are those of the conventions' version :data:`.attributes.SCHEMA_VERSION`
(the schema URL): a send whose context the message carries PRODUCER, a
receive (asked for by the application) and a settle CLIENT, a process
(a callback) CONSUMER. A send whose caller already put a valid trace context
in the headers (a relayed message) keeps it as the creation context and links
to it: CLIENT for a call that waits on the server (``request``,
``JetStream.publish``), PRODUCER otherwise. NATS-specific attributes are under
``messaging.nats.``; metrics carry only attributes of bounded cardinality.

==============================================  ==========  ===============  =========
call                                            kind        operation type   name
==============================================  ==========  ===============  =========
``Client.publish`` / ``publish_now``            PRODUCER    send             publish
``Client.request``                              PRODUCER    send             request
``Msg.respond``                                 PRODUCER    send             respond
subscription callback                           CONSUMER    process          process
``Subscription.next_msg`` (and iteration)       CLIENT      receive          receive
``JetStream.publish`` / ``publish_async``       PRODUCER    send             publish
atomic and fast batch (one per batch)           PRODUCER    send             publish
``MessageBatch`` / ``messages()`` items         CLIENT      receive          receive
``consume()`` handler (pull, push, ordered)     CONSUMER    process          process
``js.subscribe`` callback / ``next_msg``        CONSUMER /  process /        process, receive
                                                CLIENT      receive
``Msg.ack`` / ``nak`` / ``term`` / ...          CLIENT      settle           ack ...
``KeyValue.put`` / ``create`` / ``delete`` ...  PRODUCER    send             put ...
``KeyValue.get`` / ``keys`` / ``list_keys`` ..  CLIENT      receive          get ...
``KeyValue.watch``                              CLIENT      (none)           watch
KV watcher update                               CLIENT      receive          receive
``ObjectStore.put`` / ``get``                   CLIENT      send / receive   put, get
service endpoint handler                        SERVER      process          (endpoint)
Spark read task attempt                         CLIENT      receive          receive
Spark write task attempt                        PRODUCER    send             publish
==============================================  ==========  ===============  =========

Trace context goes out in the headers of publishes, requests, replies and
JetStream publishes (see :mod:`.propagation`) and is read back on delivery:
a callback's process span is a child of the producer's span. A message read
from an iterator gets a receive span linked to its producer;
:func:`process` runs the application's handling of it as a child of the
producer's span.

This module puts the wrappers in place (:func:`_targets` lists them all) and
takes them away. The wrappers are by what they wrap: :mod:`.core` (core NATS),
:mod:`.jetstream`, :mod:`.stores_services` (KV, object store, services) and
:mod:`.spark`; what they share, the state of one instrumentation and the
making of spans, is in :mod:`.spans`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import wrapt
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from opentelemetry.trace import Span, SpanKind

from .._version import __version__
from ..jetstream.client_trace import ClientTrace, add_client_trace
from . import attributes as a
from .core import _wrap_next_msg, _wrap_publish, _wrap_request, _wrap_respond, _wrap_subscribe
from .jetstream import (
    _api_request_event,
    _api_response_event,
    _wrap_batch_end,
    _wrap_batch_iter,
    _wrap_batch_send,
    _wrap_consume,
    _wrap_jetstream,
    _wrap_js_publish,
    _wrap_js_publish_async,
    _wrap_js_subscribe,
    _wrap_made_internally,
    _wrap_messages_next,
    _wrap_settle,
)
from .metrics import Metrics
from .spans import _consumer_attrs, _delivery_name, _Live, _processing, _State
from .stores_services import _wrap_add_endpoint, _wrap_kv_decode, _wrap_kv_publish, _wrap_store

if TYPE_CHECKING:
    from ..msg import Msg

__all__ = ["ConsumeHook", "NatsjsSyncInstrumentor", "PublishHook", "process"]

_SCHEMA_URL = a.SCHEMA_URL
_instruments = ("natsjs-sync >= 0.1",)

#: ``publish_hook(span, subject, payload, headers)``: called on each producer span
#: before the message is sent (the headers are the caller's, before trace context is added).
PublishHook = Callable[[Span, str, bytes, "Mapping[str, Any] | None"], None]
#: ``consume_hook(span, msg)``: called on each receive and process span once the message is known.
ConsumeHook = Callable[[Span, "Msg"], None]


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
            message_body_size: record ``messaging.message.body.size`` (off by default: the
                conventions make it opt-in).
        """
        tracer = trace.get_tracer(__name__, __version__, tracer_provider=kwargs.get("tracer_provider"),
                                  schema_url=_SCHEMA_URL)
        meter = otel_metrics.get_meter(__name__, __version__, meter_provider=kwargs.get("meter_provider"),
                                       schema_url=_SCHEMA_URL)
        s = _State(tracer, Metrics(meter), kwargs.get("publish_hook"), kwargs.get("consume_hook"),
                   bool(kwargs.get("message_body_size", False)))
        from ..client import Client
        from ..jetstream.consumer import Consumer
        from ..jetstream.context import JetStream
        from ..jetstream.kv import KeyValue
        from ..jetstream.nats_py import NatsPyNames
        from ..jetstream.object_store import ObjectStore
        from ..jetstream.ordered import OrderedConsumer
        from ..jetstream.push import PushConsumer
        from ..msg import Msg

        targets = _targets(s, _Classes(Client, Msg, JetStream, Consumer, OrderedConsumer, PushConsumer, NatsPyNames,
                                       KeyValue, ObjectStore))
        for module, name, wrapper in targets:
            wrapt.wrap_function_wrapper(module, name, wrapper)
        self._wrapped = [(module, name) for module, name, _ in targets]
        # Live before the import hook is registered: with the data source already imported,
        # the hook runs at once, and it wraps only for the live instrumentation.
        _Live.current = s
        s.metrics.start()
        wrapt.when_imported("natsjs_sync.spark.datasource")(functools.partial(_instrument_spark, s))
        self._api_trace = add_client_trace(ClientTrace(request_sent=_api_request_event,
                                                       response_received=_api_response_event))

    def _uninstrument(self, **kwargs: Any) -> None:
        """Restore the library's own methods; callbacks wrapped earlier call straight through from now on,
        and the observable metrics report nothing more."""
        live = _Live.current
        if live is not None:
            live.metrics.stop()
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


class _Classes(NamedTuple):
    """The classes whose methods are wrapped (imported when instrumenting, never before)."""

    client: Any
    msg: Any
    js: Any
    consumer: Any
    ordered: Any
    push: Any
    names: Any
    kv: Any
    objects: Any


def _targets(s: _State, c: _Classes) -> list[tuple[str, str, Callable[..., Any]]]:
    """(module, "Class.method", wrapper) for every wrapped method."""
    t: list[tuple[str, str, Callable[..., Any]]] = [
        ("natsjs_sync.client", "Client.publish", _wrap_publish(s, c.client.publish)),
        ("natsjs_sync.client", "Client.publish_now", _wrap_publish(s, c.client.publish_now)),
        ("natsjs_sync.client", "Client.request", _wrap_request(s, c.client.request)),
        ("natsjs_sync.client", "Client.subscribe", _wrap_subscribe(s, c.client.subscribe)),
        ("natsjs_sync.client", "Client.jetstream", _wrap_jetstream(s)),
        ("natsjs_sync.msg", "Msg.respond", _wrap_respond(s, c.msg.respond)),
        ("natsjs_sync.subscription", "Subscription.next_msg", _wrap_next_msg(s)),
        ("natsjs_sync.jetstream.context", "JetStream.publish", _wrap_js_publish(s, c.js.publish)),
        ("natsjs_sync.jetstream.context", "JetStream.publish_async",
         _wrap_js_publish_async(s, c.js.publish_async)),
        ("natsjs_sync.jetstream.pull", "MessageBatch.__iter__", _wrap_batch_iter(s)),
        ("natsjs_sync.jetstream.messages", "MessagesContext.__init__", _wrap_made_internally(s)),
        # _next: both next() and a for loop over the iterator (which calls it directly) go through it.
        ("natsjs_sync.jetstream.messages", "MessagesContext._next", _wrap_messages_next(s)),
        # KV and object watchers made inside an operation (keys, list_keys, history) are that operation's.
        ("natsjs_sync.jetstream.watcher", "Watcher.__init__", _wrap_made_internally(s)),
        ("natsjs_sync.jetstream.consumer", "Consumer.consume", _wrap_consume(s, c.consumer.consume)),
        ("natsjs_sync.jetstream.ordered", "OrderedConsumer.consume", _wrap_consume(s, c.ordered.consume)),
        ("natsjs_sync.jetstream.push", "PushConsumer.consume", _wrap_consume(s, c.push.consume)),
        ("natsjs_sync.jetstream.nats_py", "NatsPyNames.subscribe", _wrap_js_subscribe(s, c.names.subscribe)),
        ("natsjs_sync.jetstream.nats_py", "NatsPyNames.subscribe_bind",
         _wrap_js_subscribe(s, c.names.subscribe_bind)),
        # Where every endpoint is made (a service's, a group's, the decorator's): one wrapper, on the
        # class that defines it, so uninstrument() leaves the classes as they were.
        ("natsjs_sync.micro.service", "Service._add_endpoint", _wrap_add_endpoint(s)),
    ]
    for module, cls, kind in (("natsjs_sync.jetstream.batch", "BatchPublisher", "atomic"),
                              ("natsjs_sync.jetstream.fastbatch", "FastBatchPublisher", "fast")):
        owner = getattr(importlib.import_module(module), cls)
        for method in ("add", "commit"):
            t.append((module, f"{cls}.{method}", _wrap_batch_send(s, kind, getattr(owner, method))))
        for method in ("discard", "__exit__"):
            t.append((module, f"{cls}.{method}", _wrap_batch_end(s)))
    t.append(("natsjs_sync.jetstream.kv", "KeyValue._publish", _wrap_kv_publish(s, c.kv._publish)))
    t.append(("natsjs_sync.jetstream.kv", "KeyWatcher._decode", _wrap_kv_decode(s)))
    for settle in ("ack", "nak", "term", "in_progress", "ack_sync"):
        t.append(("natsjs_sync.msg", f"Msg.{settle}", _wrap_settle(s, settle)))
    # A KV write carries its span's context (the message's creation context): PRODUCER. A watch
    # sets up a delivery and moves no message itself: no operation type of the conventions.
    kv_ops: tuple[tuple[str, str | None, SpanKind], ...] = (
        ("put", "send", SpanKind.PRODUCER), ("create", "send", SpanKind.PRODUCER),
        ("update", "send", SpanKind.PRODUCER), ("delete", "send", SpanKind.PRODUCER),
        ("purge", "send", SpanKind.PRODUCER), ("get", "receive", SpanKind.CLIENT),
        ("keys", "receive", SpanKind.CLIENT), ("list_keys", "receive", SpanKind.CLIENT),
        ("history", "receive", SpanKind.CLIENT), ("watch", None, SpanKind.CLIENT))
    for op, op_type, span_kind in kv_ops:
        t.append(("natsjs_sync.jetstream.kv", f"KeyValue.{op}",
                  _wrap_store(s, op, op_type, a.NATS_KV_BUCKET, a.NATS_KV_KEY, getattr(c.kv, op), "key",
                              span_kind)))
    for op, obj_type in (("put", "send"), ("delete", "send"), ("get", "receive"), ("get_info", "receive"),
                         ("list", "receive")):
        t.append(("natsjs_sync.jetstream.object_store", f"ObjectStore.{op}",
                  _wrap_store(s, op, obj_type, a.NATS_OBJECT_BUCKET, a.NATS_OBJECT_NAME, getattr(c.objects, op),
                              "name")))
    return t


@contextlib.contextmanager
def process(msg: Msg, name: str | None = None) -> Iterator[Span]:
    """Run the application's handling of a message in a process span linked to its producer's.

    For messages read from an iterator (``next_msg``, ``fetch``,
    ``messages()``), where the library cannot know where handling ends::

        for msg in sub:
            with natsjs_sync.otel.process(msg):
                handle(msg)

    The span links to the message's creation context, as the conventions say.
    Its parent is the span current at the call when there is one (a web
    request's, a batch job's); otherwise the producer's span, so the trace goes
    on from producer to consumer.

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
    attrs = _consumer_attrs(s, msg, None, None, "process")
    with _processing(s, msg, name or _delivery_name("process", attrs), SpanKind.CONSUMER, attrs,
                     count=False) as span:
        yield span

