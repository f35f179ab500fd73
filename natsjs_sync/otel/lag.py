"""Consumer lag as OpenTelemetry observable gauges, for the consumers a process registers.

A :class:`ConsumerLagGauges` polls the consumers registered with it (one
``CONSUMER.INFO`` request each) every ``interval`` seconds on a thread of its
own, and the gauges report what the last poll read whenever a metric reader
collects: the reader's thread never waits on the server, and nothing is asked of
the server while no consumer is registered. Per consumer (attributes
``messaging.nats.stream`` and ``messaging.nats.consumer``, at most
``max_consumers`` of them: the cardinality is bounded by the registrations):

``nats.jetstream.consumer.pending``
    messages of the stream not yet delivered to the consumer (``num_pending``),
``nats.jetstream.consumer.ack_pending``
    messages delivered and not yet acknowledged (``num_ack_pending``),
``nats.jetstream.consumer.redelivered``
    messages delivered more than once and not yet acknowledged (``num_redelivered``),
``nats.jetstream.consumer.waiting``
    pull requests waiting for messages (``num_waiting``).

A consumer that no longer exists (nor its stream) is not reported until it exists again.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from .. import __version__
from .._core.fork import track
from ..errors import ConsumerNotFoundError, NatsError, StreamNotFoundError
from .attributes import MESSAGING_SYSTEM, NATS_CONSUMER, NATS_STREAM, SYSTEM

if TYPE_CHECKING:
    from ..jetstream import JetStream

__all__ = [
    "CONSUMER_ACK_PENDING",
    "CONSUMER_PENDING",
    "CONSUMER_REDELIVERED",
    "CONSUMER_WAITING",
    "DEFAULT_INTERVAL",
    "DEFAULT_MAX_CONSUMERS",
    "ConsumerLag",
    "ConsumerLagGauges",
]

CONSUMER_PENDING = "nats.jetstream.consumer.pending"
CONSUMER_ACK_PENDING = "nats.jetstream.consumer.ack_pending"
CONSUMER_REDELIVERED = "nats.jetstream.consumer.redelivered"
CONSUMER_WAITING = "nats.jetstream.consumer.waiting"

#: Seconds between polls by default.
DEFAULT_INTERVAL = 30.0
#: Consumers one instance reports at most by default.
DEFAULT_MAX_CONSUMERS = 100


class ConsumerLag(NamedTuple):
    """What one poll read of a consumer."""

    stream: str
    consumer: str
    num_pending: int
    num_ack_pending: int
    num_redelivered: int
    num_waiting: int


# The gauges are made once per meter (a meter keeps the first instruments of a name and their callbacks):
# their callbacks report every live instance of that meter.
_LIVE: weakref.WeakKeyDictionary[Meter, weakref.WeakSet[ConsumerLagGauges]] = weakref.WeakKeyDictionary()
_LIVE_LOCK = threading.Lock()


def _new_live_lock_in_child() -> None:
    # A parent thread (a metric collection) may have held it at the fork.
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_live_lock_in_child)


def _observer(meter: Meter, field: str) -> Any:
    ref = weakref.ref(meter)

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        m = ref()
        if m is None:
            return []
        with _LIVE_LOCK:
            gauges = list(_LIVE.get(m, ()))
        return [Observation(getattr(lag, field), {MESSAGING_SYSTEM: SYSTEM, NATS_STREAM: lag.stream,
                                                  NATS_CONSUMER: lag.consumer})
                for g in gauges for lag in g.snapshot()]

    return observe


def _join(meter: Meter, gauges: ConsumerLagGauges) -> None:
    with _LIVE_LOCK:
        live = _LIVE.get(meter)
        if live is not None:
            live.add(gauges)
            return
        _LIVE[meter] = live = weakref.WeakSet([gauges])
    for name, field, unit, description in (
            (CONSUMER_PENDING, "num_pending", "{message}", "Messages of the stream not yet delivered to the consumer."),
            (CONSUMER_ACK_PENDING, "num_ack_pending", "{message}",
             "Messages delivered by the consumer and not yet acknowledged."),
            (CONSUMER_REDELIVERED, "num_redelivered", "{message}",
             "Messages delivered more than once by the consumer and not yet acknowledged."),
            (CONSUMER_WAITING, "num_waiting", "{request}", "Pull requests waiting on the consumer.")):
        meter.create_observable_gauge(name, [_observer(meter, field)], unit=unit, description=description)


class ConsumerLagGauges:
    """Observable gauges of the lag of registered consumers, polled at an interval. Thread-safe.

    Example::

        gauges = ConsumerLagGauges(nc.jetstream(), interval=15.0, meter_provider=provider)
        gauges.register("ORDERS", "shipping")
        ...
        gauges.close()
    """

    def __init__(self, js: JetStream, *, interval: float | None = DEFAULT_INTERVAL,
                 meter_provider: MeterProvider | None = None, max_consumers: int = DEFAULT_MAX_CONSUMERS,
                 timeout: float | None = None):
        """
        Args:
            js: the JetStream context the consumers are read through.
            interval: seconds between polls, on a thread named ``natsjs-lag-<client name>``;
                ``None``: no thread, call :meth:`poll` yourself.
            meter_provider: where the gauges go (default: the global provider).
            max_consumers: the most consumers that may be registered (the metrics' cardinality).
            timeout: seconds each consumer's request may take (default: the context's timeout).

        Raises:
            ValueError: ``interval`` not above 0, or ``max_consumers`` below 1.
        """
        if interval is not None and not interval > 0:
            raise ValueError("interval must be > 0 seconds (or None: poll() by hand)")
        if max_consumers < 1:
            raise ValueError("max_consumers must be at least 1")
        self._js = js
        self.interval = interval
        self.max_consumers = max_consumers
        self._timeout = js.timeout if timeout is None else timeout
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()  # one poll at a time (the thread's and poll()'s)
        self._registered: dict[tuple[str, str], None] = {}  # in registration order
        self._values: dict[tuple[str, str], ConsumerLag] = {}
        self._stop = threading.Event()
        #: The error of the last poll of a consumer that failed for another reason than its absence.
        self.last_error: Exception | None = None
        meter = otel_metrics.get_meter(__name__, __version__, meter_provider=meter_provider)
        _join(meter, self)
        self._thread: threading.Thread | None = None
        self._start_thread()
        track(self)

    def _start_thread(self) -> None:
        if self.interval is not None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"natsjs-lag-{self._js.nc.name or 'client'}")
            self._thread.start()

    def after_fork_in_child(self) -> None:
        """In a forked child: locks of its own (the parent's poller holds one for a whole poll, requests
        included), and a poller thread of its own (the parent's does not exist here)."""
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._thread = None
        self._start_thread()

    def register(self, stream: str, consumer: str) -> None:
        """Report ``consumer`` of ``stream`` from the next poll on (idempotent).

        Raises:
            ValueError: ``max_consumers`` are registered already.
        """
        key = (stream, consumer)
        with self._lock:
            if key in self._registered:
                return
            if len(self._registered) >= self.max_consumers:
                raise ValueError(f"{self.max_consumers} consumers are registered already (max_consumers)")
            self._registered[key] = None

    def unregister(self, stream: str, consumer: str) -> None:
        """Stop reporting ``consumer`` of ``stream`` (nothing happens if it was not registered)."""
        with self._lock:
            self._registered.pop((stream, consumer), None)
            self._values.pop((stream, consumer), None)

    @property
    def registered(self) -> list[tuple[str, str]]:
        """The registered ``(stream, consumer)`` pairs, in registration order."""
        with self._lock:
            return list(self._registered)

    def snapshot(self) -> list[ConsumerLag]:
        """What the last poll read of each registered consumer that exists (what the gauges report)."""
        with self._lock:
            return [self._values[k] for k in self._registered if k in self._values]

    def poll(self) -> list[ConsumerLag]:
        """Read every registered consumer now, on the caller's thread; no request when none is registered.

        A consumer that does not exist is left out until it does; one whose request
        fails otherwise keeps its last values (the error is in :attr:`last_error`).
        While the client is disconnected (or after :meth:`close`) no request is
        made: the poll ends, and every consumer keeps its last values.

        Returns:
            What the gauges report from now on (:meth:`snapshot`).
        """
        with self._poll_lock:
            for stream, consumer in self.registered:
                # A disconnected client would hold each request for its whole timeout (one after the other:
                # many consumers, a long block), and a closed instance has nobody to report to.
                if self._stop.is_set() or not self._js.nc.is_connected:
                    break
                try:
                    info = self._js.consumer_info(stream, consumer, timeout=self._timeout)
                except (ConsumerNotFoundError, StreamNotFoundError):  # deleted with its stream too
                    with self._lock:
                        self._values.pop((stream, consumer), None)
                    continue
                except (NatsError, OSError) as exc:
                    self.last_error = exc
                    continue
                lag = ConsumerLag(stream, consumer, info.num_pending, info.num_ack_pending, info.num_redelivered,
                                  info.num_waiting)
                with self._lock:
                    if (stream, consumer) in self._registered:  # not unregistered meanwhile
                        self._values[(stream, consumer)] = lag
        return self.snapshot()

    def _run(self) -> None:
        assert self.interval is not None
        while not self._stop.is_set():
            if self._js.nc.is_closed:
                return
            if self.registered and self._js.nc.is_connected:
                self.poll()
            self._stop.wait(self.interval)

    def close(self, timeout: float | None = None) -> None:
        """Stop polling and reporting (idempotent).

        Args:
            timeout: seconds to wait for a poll under way to end (default: the requests' timeout and a second).
        """
        self._stop.set()
        with _LIVE_LOCK:
            for live in _LIVE.values():
                live.discard(self)
        with self._lock:
            self._registered.clear()
            self._values.clear()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join((self._timeout or 5.0) + 1.0 if timeout is None else timeout)

    def __enter__(self) -> ConsumerLagGauges:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
