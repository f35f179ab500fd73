"""The client's metrics: the messaging conventions' counters and histograms, and its own state.

Counted as the conventions say: ``messaging.client.sent.messages``,
``messaging.client.consumed.messages``, ``messaging.client.operation.duration``
and ``messaging.process.duration``. The client's state is read when a metric
reader collects (observable instruments), so it costs nothing between
collections: reconnects, connection state, pending messages and bytes per
subscription, messages dropped by slow-consumer handling, and JetStream
publishes awaiting their acks. Objects are held weakly: a closed and
forgotten client stops being reported once collected.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Histogram, Meter, Observation

from .._core import fork
from .attributes import (
    DEFAULT_INBOX_PREFIX,
    MESSAGING_CONSUMER_GROUP_NAME,
    MESSAGING_DESTINATION_SUBSCRIPTION_NAME,
    MESSAGING_DESTINATION_TEMPLATE,
    MESSAGING_DESTINATION_TEMPORARY,
    MESSAGING_SYSTEM,
    NATS_CLIENT_NAME,
    NATS_CONNECTION_STATE,
    SYSTEM,
    destination,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream import JetStream
    from ..subscription import Subscription

__all__ = [
    "CONNECTION_STATE",
    "CONSUMED_MESSAGES",
    "JS_PUBLISH_PENDING",
    "OPERATION_DURATION",
    "PROCESS_DURATION",
    "RECONNECTS",
    "SENT_MESSAGES",
    "SLOW_CONSUMER_DROPPED",
    "SUB_PENDING_BYTES",
    "SUB_PENDING_MESSAGES",
    "TRACE_CONTEXT_SKIPPED",
    "Metrics",
]

# The conventions' names (of the version attributes.SCHEMA_VERSION names).
SENT_MESSAGES = "messaging.client.sent.messages"
CONSUMED_MESSAGES = "messaging.client.consumed.messages"
OPERATION_DURATION = "messaging.client.operation.duration"
PROCESS_DURATION = "messaging.process.duration"

RECONNECTS = "nats.client.reconnects"
CONNECTION_STATE = "nats.client.connection.state"
SUB_PENDING_MESSAGES = "nats.subscription.pending.messages"
SUB_PENDING_BYTES = "nats.subscription.pending.bytes"
SLOW_CONSUMER_DROPPED = "nats.subscription.dropped.messages"
JS_PUBLISH_PENDING = "nats.jetstream.publish.pending"
TRACE_CONTEXT_SKIPPED = "nats.client.trace_context.skipped"

#: Buckets for operation durations, in seconds (the conventions' advice).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

_STATES = ("connected", "reconnecting", "draining", "closed")


def _durations(meter: Meter, name: str, description: str) -> Histogram:
    """A histogram of seconds with the conventions' buckets as advice, where the API takes
    advice (opentelemetry-api 1.30 and later); older APIs get the histogram without it."""
    try:
        return meter.create_histogram(name, unit="s", description=description,
                                      explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
    except TypeError:  # an API older than the advice: the SDK's default buckets
        return meter.create_histogram(name, unit="s", description=description)


class Metrics:
    """The instruments of one instrumentation, and the objects its observers read. Thread-safe."""

    def __init__(self, meter: Meter):
        self.sent = meter.create_counter(
            SENT_MESSAGES, unit="{message}", description="Messages a producer attempted to send.")
        self.consumed = meter.create_counter(
            CONSUMED_MESSAGES, unit="{message}", description="Messages delivered to the application.")
        self.duration = _durations(
            meter, OPERATION_DURATION,
            "Duration of a messaging operation initiated by a producer or consumer client.")
        self.process = _durations(meter, PROCESS_DURATION, "Duration of processing operation.")
        self.skipped = meter.create_counter(
            TRACE_CONTEXT_SKIPPED, unit="{message}",
            description="Messages sent without trace context: with it they would have exceeded the server's"
                        " max_payload.")
        self._meter = meter
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[Client] = weakref.WeakSet()
        # Each subscription with its attributes, made once (its subject never changes).
        self._subs: weakref.WeakKeyDictionary[Subscription, Mapping[str, Any]] = weakref.WeakKeyDictionary()
        self._contexts: weakref.WeakSet[JetStream] = weakref.WeakSet()
        fork.track(self)
        meter.create_observable_counter(RECONNECTS, [self._reconnects], unit="{reconnect}",
                                        description="Reconnects of the client since it connected.")
        meter.create_observable_up_down_counter(
            CONNECTION_STATE, [self._states], unit="{connection}",
            description="Connections in each state (1 for the client's current state, 0 for the others).")
        meter.create_observable_up_down_counter(
            SUB_PENDING_MESSAGES, [self._pending_msgs], unit="{message}",
            description="Messages received and not yet handed to the application, per subscription.")
        meter.create_observable_up_down_counter(
            SUB_PENDING_BYTES, [self._pending_bytes], unit="By",
            description="Payload bytes received and not yet handed to the application, per subscription.")
        meter.create_observable_counter(
            SLOW_CONSUMER_DROPPED, [self._dropped], unit="{message}",
            description="Messages dropped because a subscription was over its pending limits (slow consumer).")
        meter.create_observable_up_down_counter(
            JS_PUBLISH_PENDING, [self._js_pending], unit="{message}",
            description="JetStream publishes sent and awaiting their acknowledgement.")

    def after_fork_in_child(self) -> None:
        """A forked child gets a lock of its own: a parent thread may have held this one at the fork."""
        self._lock = threading.Lock()

    # -- what the observers read ---------------------------------------------------

    def watch_client(self, client: Client) -> None:
        """Report this client's state from now on (idempotent)."""
        if client not in self._clients:
            with self._lock:
                self._clients.add(client)

    def watch_subscription(self, sub: Subscription, inbox_prefix: str = DEFAULT_INBOX_PREFIX) -> None:
        """Report this subscription's pending counts and drops from now on (``inbox_prefix``: its
        client's, so a subscription to one of its inboxes is reported by the template)."""
        attrs = self._sub_attrs(sub, inbox_prefix)
        with self._lock:
            self._subs[sub] = attrs

    def watch_jetstream(self, js: JetStream) -> None:
        """Report this context's publishes in flight from now on."""
        with self._lock:
            self._contexts.add(js)

    def _snapshot(self, items: Iterable[Any]) -> list[Any]:
        with self._lock:
            return list(items)

    # -- which instrumentation the observers report --------------------------------

    #: The metrics of the live instrumentation (None when uninstrumented).
    live: Metrics | None = None

    def start(self) -> None:
        """Make these the metrics the observers report (instrument())."""
        Metrics.live = self

    def stop(self) -> None:
        """Report nothing more of what these watch (uninstrument())."""
        if Metrics.live is self:
            Metrics.live = None

    def _source(self) -> Metrics | None:
        """The metrics an observer of these reports: the live ones when they are of the same meter.
        A meter keeps the observable instruments first made on it (and their callbacks) when an
        instrumentation after an uninstrument() makes them again: those report what the live one
        watches. None when uninstrumented, or the live instrumentation reports to another meter."""
        live = Metrics.live
        return live if live is not None and live._meter is self._meter else None

    def _clients_now(self) -> list[Client]:
        src = self._source()
        return src._snapshot(src._clients) if src is not None else []

    # -- observers (run on the reader's collection thread) -------------------------

    @staticmethod
    def _client_attrs(client: Client) -> Mapping[str, Any]:
        attrs: dict[str, Any] = {MESSAGING_SYSTEM: SYSTEM}
        if client.name:
            attrs[NATS_CLIENT_NAME] = client.name
        return attrs

    def _reconnects(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(c.stats.reconnects, self._client_attrs(c)) for c in self._clients_now()]

    def _states(self, options: CallbackOptions) -> Iterable[Observation]:
        out = []
        for c in self._clients_now():
            if c.is_closed:
                now = "closed"
            elif c.is_draining:
                now = "draining"
            elif c.is_connected:
                now = "connected"
            else:
                now = "reconnecting"
            for state in _STATES:
                out.append(Observation(1 if state == now else 0,
                                       {**self._client_attrs(c), NATS_CONNECTION_STATE: state}))
        return out

    @staticmethod
    def _sub_attrs(sub: Subscription, inbox_prefix: str) -> Mapping[str, Any]:
        attrs: dict[str, Any] = {MESSAGING_SYSTEM: SYSTEM}
        where = destination(sub.subject, inbox_prefix)
        if where.get(MESSAGING_DESTINATION_TEMPORARY):
            # A subscription to an inbox (one per request, per client): its template, never its subject.
            if MESSAGING_DESTINATION_TEMPLATE in where:
                attrs[MESSAGING_DESTINATION_TEMPLATE] = where[MESSAGING_DESTINATION_TEMPLATE]
        else:
            attrs[MESSAGING_DESTINATION_SUBSCRIPTION_NAME] = sub.subject
        if sub.queue:
            attrs[MESSAGING_CONSUMER_GROUP_NAME] = sub.queue
        return attrs

    def _live_subs(self) -> list[tuple[Subscription, Mapping[str, Any]]]:
        src = self._source()
        if src is None:
            return []
        return [(s, attrs) for s, attrs in src._snapshot(src._subs.items()) if s.is_valid]

    def _pending_msgs(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.pending_msgs, attrs) for s, attrs in self._live_subs()]

    def _pending_bytes(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.pending_bytes, attrs) for s, attrs in self._live_subs()]

    def _dropped(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.dropped, attrs) for s, attrs in self._live_subs()]

    def _js_pending(self, options: CallbackOptions) -> Iterable[Observation]:
        src = self._source()
        if src is None:
            return []
        return [Observation(int(js.publish_async_pending), {MESSAGING_SYSTEM: SYSTEM})
                for js in src._snapshot(src._contexts)]
