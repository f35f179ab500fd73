"""Push consumers: nats-py's ``js.subscribe`` and nats.go's ``PushConsumer``.

The server pushes a push consumer's messages to its *deliver subject*; the
client is an ordinary subscription there (in a queue group when the consumer
has a ``deliver_group``). Two kinds of status messages ride along and are never
shown to the user:

* flow control (``100 FlowControl Request`` with a reply subject): answered
  once the messages received before it have been handed to the user, so a
  slow reader slows the server down instead of being dropped as a slow consumer;
* idle heartbeats (``100 Idle Heartbeat``): proof of life; when one carries
  ``Nats-Consumer-Stalled``, that subject is answered to un-stall the consumer.

:class:`PushConsumer` is the same thing with nats.go's ``jetstream`` API
(``js.create_push_consumer(...)``, then ``consume(handler)``). New code should
prefer pull consumers (:class:`~natsjs_sync.jetstream.Consumer`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.spi import CoreLink
from .._timeout import USE_DEFAULT, TimeoutArg, resolve
from .._typed_reads import TypedReads
from ..errors import BadSubscriptionError, ConsumerNotFoundError, JetStreamError, NatsError, NoHeartbeatError
from ..msg import Msg
from ..protocol.jetstream.ackreply import ACK_PREFIX
from ..protocol.jetstream.status import Kind, classify
from ..subscription import MsgHandler, Subscription
from .consumer_config import ConsumerConfig, ConsumerInfo

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .context import JetStream
    from .messages import ConsumeContext, MessagesContext
    from .ordered import OrderedConsumer

_CONFIG_FIELDS = frozenset(ConsumerConfig.__struct_fields__)


class PushSubscription(Subscription):
    """A subscription on a push consumer's deliver subject.

    Iterate it or call :meth:`next_msg` as with any subscription (or pass
    ``cb=``); status messages are handled underneath.
    """

    _js: JetStream
    _stream: str
    _consumer: str
    _owns_consumer: bool
    last_activity: float = 0.0

    @property
    def stream(self) -> str:
        """The name of the stream the consumer reads."""
        return self._stream

    @property
    def consumer(self) -> str:
        """The name of the consumer."""
        return self._consumer

    def consumer_info(self, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerInfo:
        """The consumer's info from the server."""
        return self._js._consumer_info(self._stream, self._consumer, timeout)

    def unsubscribe(self, limit: int | None = None) -> None:
        """Stop receiving; an ephemeral consumer made by ``subscribe`` is deleted too."""
        super().unsubscribe(limit)
        if not limit:
            self._delete_owned()

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Deliver what was received, then end; a consumer this subscription made is deleted."""
        super().drain(timeout)
        self._delete_owned()

    def _delete_owned(self) -> None:
        if self._owns_consumer:
            self._owns_consumer = False
            try:  # within the context's API timeout, as every other JetStream call
                self._js.delete_consumer(self._stream, self._consumer)
            except NatsError:
                pass  # it goes away on its own after its inactive threshold

    def __repr__(self) -> str:
        return f"<PushSubscription {self._stream}/{self._consumer} on {self.subject!r}>"


def push_filter(core: CoreLink) -> Callable[[Subscription, Msg], bool]:
    """The reader-thread filter of a push subscription: keep stream messages,
    answer flow control and stalls underneath."""

    def keep(sub: Subscription, msg: Msg) -> bool:
        reply = msg.reply
        sub.last_activity = time.monotonic()  # type: ignore[attr-defined]
        if msg.raw_headers is None or (reply is not None and reply.startswith(ACK_PREFIX)):
            return True
        st = classify(msg.raw_headers, reply)
        if st.kind is Kind.FLOW_CONTROL:
            if reply:  # answered once the messages before it were handed to the user
                sub.enqueue_control(lambda: core.publish(reply, b""))
            return False
        if st.kind is Kind.HEARTBEAT:
            if st.stalled:
                try:
                    core.publish(st.stalled, b"")
                except NatsError:
                    pass  # reconnecting: the next heartbeat asks again
            return False
        return True

    return keep


def _auto_ack(cb: MsgHandler) -> MsgHandler:
    def handler(msg: Msg) -> None:
        cb(msg)
        if not msg.is_acked:
            msg.ack()

    return handler


def subscribe_push(
    js: JetStream,
    subject: str,
    queue: str | None = None,
    cb: MsgHandler | None = None,
    durable: str | None = None,
    stream: str | None = None,
    config: ConsumerConfig | None = None,
    manual_ack: bool = False,
    idle_heartbeat: float | None = None,
    flow_control: bool = False,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
    deliver_policy: str | None = None,
    headers_only: bool | None = None,
    inactive_threshold: float | None = None,
    **config_fields: Any,
) -> PushSubscription:
    """Bind to (or create) a push consumer and subscribe to its deliver subject."""
    unknown = set(config_fields) - _CONFIG_FIELDS
    if unknown:
        raise TypeError(f"unknown subscribe arguments: {sorted(unknown)}")
    if stream is None:
        stream = js.stream_name_by_subject(subject)
    if queue and not durable:
        durable = queue  # queue members must share one consumer
    info = _existing(js, stream, durable, queue)
    owns = False
    if info is not None:
        deliver = info.config.deliver_subject
    else:
        fields: dict[str, Any] = {
            "filter_subject": subject,
            "deliver_subject": js.nc.new_inbox(),
            "ack_policy": "explicit",
            "durable_name": durable,
            "deliver_group": queue or None,
            "deliver_policy": deliver_policy,
            "headers_only": headers_only,
            "inactive_threshold": inactive_threshold,
            "idle_heartbeat": idle_heartbeat,
            "flow_control": flow_control or None,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        fields.update(config_fields)
        if config is not None:
            # What the config sets wins over the defaults above; arguments win over both.
            unset = {k: v for k, v in fields.items() if getattr(config, k) in (None, False)}
            # As nats-py: a deliver policy, heartbeat or threshold given as an argument wins too.
            given: dict[str, Any] = {k: fields[k] for k in ("deliver_policy", "inactive_threshold", "idle_heartbeat")
                     if k in fields}
            merged: dict[str, Any] = {**unset, **given, **config_fields}
            cfg = config.replace(**merged)
        else:
            cfg = ConsumerConfig(**fields)
        info = js.create_consumer(stream, cfg).cached_info
        deliver = cfg.deliver_subject
        owns = not durable
    assert deliver is not None
    ack_none = str(getattr(info.config.ack_policy, "value", info.config.ack_policy)) == "none"
    handler = _auto_ack(cb) if cb is not None and not manual_ack and not ack_none else cb
    sub = js._core.subscribe(deliver, queue, handler, pending_msgs_limit=pending_msgs_limit,
                             pending_bytes_limit=pending_bytes_limit, status_filter=push_filter(js._core),
                             cls=PushSubscription)
    assert isinstance(sub, PushSubscription)
    sub._js = js
    sub._stream = stream
    sub._consumer = info.name
    sub._owns_consumer = owns
    sub.last_activity = time.monotonic()
    return sub


def _existing(js: JetStream, stream: str, durable: str | None, queue: str | None) -> ConsumerInfo | None:
    """The durable push consumer to bind to, if it exists and fits; raises when it cannot be bound."""
    if not durable:
        return None
    try:
        info = js._consumer_info(stream, durable, USE_DEFAULT)
    except ConsumerNotFoundError:
        return None
    if not info.config.deliver_subject:
        raise JetStreamError(f"consumer {durable!r} is a pull consumer: use pull_subscribe")
    # nats-py's texts, which programs match on.
    group = info.config.deliver_group
    if not group:
        if queue:
            raise JetStreamError("cannot create a queue subscription for a consumer without a deliver group")
        if info.push_bound:
            raise JetStreamError("consumer is already bound to a subscription")
    elif not queue:
        raise JetStreamError(f"cannot create a subscription for a consumer with a deliver group {group}")
    elif queue != group:
        raise JetStreamError(f"cannot create a queue subscription {queue} for a consumer with a deliver group {group}")
    return info


class OrderedSubscription(TypedReads):
    """``js.subscribe(..., ordered_consumer=True)``: the ordered consumer behind a
    subscription's face (iterate, ``next_msg``, ``cb=``, ``unsubscribe``).

    It is pull-based underneath (ADR-17), which heals the same way a push one
    would: a new consumer from the next stream sequence after any doubt.
    """

    def __init__(self, oc: OrderedConsumer, cb: Callable[[Msg], None] | None,
                 error_cb: Callable[[Exception], None] | None, idle_heartbeat: float | None = None):
        self._oc = oc
        self.subject = ", ".join(oc.filter_subjects) or ">"
        self._ctx: ConsumeContext | None = None
        self._it: MessagesContext | None = None
        # idle_heartbeat: the server's heartbeats on each pull; when they stop, the
        # consumer is re-created from the next stream sequence in the background.
        if cb is not None:
            self._ctx = oc.consume(cb, error_cb=error_cb, heartbeat=idle_heartbeat)
        else:
            self._it = oc.messages(error_cb=error_cb, heartbeat=idle_heartbeat)
            # Delivery starts now, as a push subscription's does: the server's heartbeats
            # flow before the first read, so a consumer lost meanwhile is made anew.
            self._it.start()

    def next_msg(self, timeout: TimeoutArg = 1.0) -> Msg:
        """The next message in stream order. Raises TimeoutError."""
        if self._it is None:
            raise BadSubscriptionError("next_msg() cannot be used on a subscription with a callback")
        return self._it.next(resolve(timeout, 1.0))

    def __iter__(self) -> Iterator[Msg]:
        if self._it is None:
            raise BadSubscriptionError("a subscription with a callback cannot be iterated")
        return iter(self._it)

    @property
    def messages(self) -> Iterator[Msg]:
        """The messages in stream order, as an iterator (same as iterating the subscription)."""
        return iter(self)

    def consumer_info(self, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerInfo:
        """Fresh info of the ordered consumer's current server-side consumer."""
        return self._oc.info(timeout)

    def unsubscribe(self) -> None:
        """Stop now (the ordered consumer is deleted)."""
        if self._ctx is not None:
            self._ctx.stop()
        if self._it is not None:
            self._it.stop()

    def drain(self, timeout: TimeoutArg = 30.0) -> None:
        """Handle what was received, then stop (the ordered consumer is deleted)."""
        t = resolve(timeout, 30.0)
        if self._ctx is not None:
            self._ctx.drain(t)
        if self._it is not None:
            self._it.drain(t)
            self._it.stop()

    def __repr__(self) -> str:
        return f"<OrderedSubscription {self._oc.stream} {self.subject!r}>"




class PushConsumer(TypedReads):
    """A handle on a push consumer, as nats.go's ``jetstream.PushConsumer``.

    Make one with :meth:`JetStream.create_push_consumer` (the config must have
    a ``deliver_subject``) or :meth:`JetStream.push_consumer`; then
    :meth:`consume` delivers its messages to a handler. Thread-safe.
    """

    def __init__(self, js: JetStream, info: ConsumerInfo):
        if not info.config.deliver_subject:
            raise JetStreamError(f"consumer {info.name!r} is a pull consumer: use js.consumer()")
        self._js = js
        self.stream = info.stream_name
        self.name = info.name
        self._info = info

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from when this handle was made or last refreshed (no request)."""
        return self._info

    def info(self, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerInfo:
        """Fresh consumer info. Raises ConsumerNotFoundError."""
        self._info = self._js._consumer_info(self.stream, self.name, timeout)
        return self._info

    def consume(self, handler: MsgHandler, error_cb: Callable[[Exception], None] | None = None,
                pending_msgs_limit: int | None = None,
                pending_bytes_limit: int | None = None) -> PushConsumeContext:
        """Call ``handler(msg)`` for each message, in order, on the client's dispatcher.

        Flow control is answered after the messages before it were handled; with
        idle heartbeats configured, two missed ones are reported to ``error_cb``
        (default: the client's) as :class:`~natsjs_sync.NoHeartbeatError`.
        Exceptions from the handler go to ``error_cb`` too. Acknowledge messages
        as the consumer's ack policy asks.

        Raises:
            JetStreamError: the consumer is bound to another subscription (no deliver group).
        """
        from .._core.options import check_callback

        check_callback(handler, "handler")
        check_callback(error_cb, "error_cb")
        cfg = self._info.config
        if not cfg.deliver_group and self.info().push_bound:
            raise JetStreamError(f"consumer {self.name!r} is already bound to a subscription")
        return PushConsumeContext(self, handler, error_cb, pending_msgs_limit, pending_bytes_limit)

    def __repr__(self) -> str:
        return f"<PushConsumer {self.stream}/{self.name}>"



class PushConsumeContext:
    """A running :meth:`PushConsumer.consume`; :meth:`stop` or :meth:`drain` ends it."""

    def __init__(self, consumer: PushConsumer, handler: MsgHandler, error_cb: Callable[[Exception], None] | None,
                 pending_msgs_limit: int | None, pending_bytes_limit: int | None):
        js = consumer._js
        core = js._core
        cfg = consumer.cached_info.config
        self._core = core
        self._error_cb = error_cb

        def run(msg: Msg) -> None:
            try:
                handler(msg)
            except Exception as exc:  # a handler's bug must not stop consumption
                self._report(exc)

        assert cfg.deliver_subject is not None
        self._sub = core.subscribe(cfg.deliver_subject, cfg.deliver_group, run, pending_msgs_limit=pending_msgs_limit,
                                   pending_bytes_limit=pending_bytes_limit, status_filter=push_filter(core))
        self._sub.last_activity = time.monotonic()  # type: ignore[attr-defined]
        self._heartbeat = cfg.idle_heartbeat or 0.0
        self._timer = core.call_every(self._heartbeat, self._check) if self._heartbeat else None
        self._missed = False

    def _report(self, exc: Exception) -> None:
        if self._error_cb is None:
            self._core.report_error(exc)
            return
        try:
            self._error_cb(exc)
        except Exception as cb_exc:
            self._core.report_error(cb_exc)

    def _check(self) -> None:
        """Timer thread: two heartbeats without a message or heartbeat mean trouble (reported once per gap)."""
        quiet = time.monotonic() - self._sub.last_activity  # type: ignore[attr-defined]
        if quiet < 2 * self._heartbeat:
            self._missed = False
            return
        if not self._missed:
            self._missed = True
            err = NoHeartbeatError(f"missed idle heartbeats on push consumer {self._sub.subject!r}")
            self._sub.enqueue_control(lambda: self._report(err))  # reported on the dispatcher, in order

    @property
    def closed(self) -> bool:
        """True once consumption ended (stopped, drained, or the client closed)."""
        return not self._sub.is_valid

    def stop(self) -> None:
        """Stop now (messages queued and not handled are dropped; redelivered per the ack policy)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._sub.is_valid:
            try:
                self._sub.unsubscribe()
            except NatsError:
                pass

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stop taking messages and return once those received were handled."""
        if self._timer is not None:
            self._timer.cancel()
        if self._sub.is_valid:
            self._sub.drain(timeout)

    def __enter__(self) -> PushConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
