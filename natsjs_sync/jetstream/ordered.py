"""Ordered consumer (ADR-17): every stream message once and in order, no acks.

It is an ephemeral pull consumer (memory storage, one replica, ack none, one
delivery) that the client re-creates whenever continuity is in doubt: a gap in
consumer sequences, missed heartbeats, the consumer deleted or gone (removed
after ``inactive_threshold``, a memory consumer lost in a restart), a
reconnect. The new consumer starts at the stream sequence after the last one
delivered, so nothing is skipped and nothing repeats. Each reset uses a new
inbox, so messages still in flight for the old consumer cannot arrive.

It composes the pull consumer: :meth:`OrderedConsumer.fetch` is
:meth:`Consumer.fetch` on the current consumer, filtered by sequence, and
:meth:`OrderedConsumer.messages` is continuous pulling steered by
:class:`~natsjs_sync.jetstream.pull.OrderedHooks`. Re-creation backs off
exponentially, so a gone consumer or stream is never hammered; a stream that
no longer exists raises :class:`~natsjs_sync.StreamNotFoundError` at once.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._backoff import Backoff
from .._core.options import check_callback
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from .._typed_reads import TypedReads
from ..errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    JetStreamError,
    JetStreamNotEnabledError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    TimeoutError,
)
from ..msg import Msg
from ..protocol.jetstream.ackreply import ack_tail, sequences
from ..protocol.jetstream.status import Kind
from ..protocol.nuid import next_nuid
from .consumer import DEFAULT_FETCH_WAIT, Consumer
from .consumer_config import ConsumerConfig, ConsumerInfo
from .messages import ConsumeContext, ErrorHandler, MessagesContext
from .pull import MessageBatch

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .context import JetStream

log = logging.getLogger("natsjs_sync.jetstream")

#: Waits between re-creation attempts: 50 ms doubling to 5 s, with jitter.
RECREATE_BACKOFF = Backoff(0.05, 5.0, factor=2.0, jitter=0.05)

#: Seconds a create goes on being asked for under one name while unanswered;
#: the next attempt after that takes a new name. Asked for again, a consumer
#: keeps the place the server gave it at the first ask: an R1 consumer placed
#: on a node of a cluster that died meanwhile is never made and never answered
#: (a cluster takes a killed node for alive for minutes), and asking for it
#: under that name healed only once the node was back.
SAME_NAME_FOR = 3.0

#: The idle heartbeat of an ordered consumer's pulls when none is given. Its
#: consumer is an ephemeral R1 one: when the server holding it goes away (a
#: node of a cluster restarting) nothing else says so, and two missed
#: heartbeats are how it is noticed and made anew. 5 s (nats.go's heartbeat
#: for long fetches) notices that within 10 s instead of a pull consumer's 30.
ORDERED_HEARTBEAT = 5.0


def _heartbeat(expires: float, heartbeat: float | None) -> float | None:
    if heartbeat is not None or not isinstance(expires, (int, float)) or expires < 2 * ORDERED_HEARTBEAT:
        return heartbeat
    return ORDERED_HEARTBEAT


def _transient(exc: NatsError, server_has_jetstream: bool) -> bool:
    """Whether creating the consumer again later may succeed.

    Never once the client is closed, nor when JetStream is off: the server
    said so (``err_code`` 10076, or 10039 for the account), or nobody answers
    the API (503) on a server whose INFO announces no JetStream. A 503 from a
    server with JetStream is a server still starting, and is retried.

    Args:
        exc: what the create request raised.
        server_has_jetstream: the connected server's INFO announces JetStream.
    """
    if isinstance(exc, ConnectionClosedError):
        return False
    if isinstance(exc, JetStreamNotEnabledError):
        return exc.err_code is None and server_has_jetstream
    if isinstance(exc, NoRespondersError):
        return server_has_jetstream
    if isinstance(exc, (TimeoutError, NatsConnectionError)):
        return True
    return isinstance(exc, JetStreamError) and (exc.code or 0) >= 500


class OrderedConsumer(TypedReads):
    """An ordered, self-healing view of a stream. Use one iteration at a time.

    Args:
        filter_subjects: only these subjects (wildcards allowed).
        deliver_policy: where to start the first time: ``all``, ``last``,
            ``new``, ``by_start_sequence`` (with ``opt_start_seq``),
            ``by_start_time`` (with ``opt_start_time``), ``last_per_subject``.
        max_reset_attempts: give up after this many failed re-creations in a
            row (``None``: never give up).
        inactive_threshold: seconds after which the server removes an idle consumer.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        opt_start_time: datetime.datetime | None = None,
        replay_policy: str = "instant",
        headers_only: bool = False,
        inactive_threshold: float = 300.0,
        max_reset_attempts: int | None = None,
        name_prefix: str | None = None,
        metadata: dict[str, str] | None = None,
    ):
        self._js = js
        self._core = js._api.core
        self.stream = stream
        self._filters = list(filter_subjects or [])
        self._deliver_policy = deliver_policy
        self._opt_start_seq = opt_start_seq
        self._opt_start_time = opt_start_time
        self._replay_policy = replay_policy
        self._headers_only = headers_only
        self._inactive_threshold = inactive_threshold
        self._max_resets = max_reset_attempts
        self._prefix = name_prefix or next_nuid()
        self._metadata = metadata
        self._serial = 0
        # The stream sequence the create of the current serial's name was last tried
        # from, while that create's outcome is unknown (it failed: a timeout may still
        # make it on the server later). The next attempt asks for the same consumer
        # again (a create of an identical config is answered with the one made), as
        # nats.go does, rather than leave one behind per attempt until inactive_threshold;
        # for SAME_NAME_FOR seconds from the first ask (``_named_at``), then under a new name.
        self._tried: int | None = None
        self._named_at = 0.0
        self._current: Consumer | None = None
        # "$JS.ACK.<stream>.<consumer>" of the current consumer: the common
        # (domain-less) ack subject is recognised by one comparison.
        self._ack_prefix = "\0"
        self._stream_seq = 0  # last stream sequence handed to the user
        self._consumer_seq = 0  # last consumer sequence seen from the current consumer
        self.resets = 0
        # Failed re-creations in a row, across calls: a heal has a budget of its own
        # (a few seconds), and max_reset_attempts counts what its heals tried together.
        self._failures = 0
        # The read that owns the current consumer (an iteration, or a one-shot read).
        # A read's stop cancels that read alone and deletes the consumer only while it
        # still owns it: an earlier iteration released late (collected on the timer
        # thread, or stopped after the next began) leaves the next one alone.
        self._lock = threading.Lock()
        self._owner: _Read | None = None

    # ------------------------------------------------------------------ the current consumer

    @property
    def name(self) -> str | None:
        """The name of the current server-side consumer (``None`` between two)."""
        return self._current.name if self._current is not None else None

    @property
    def filter_subjects(self) -> list[str]:
        """The subjects it reads (empty: the whole stream)."""
        return list(self._filters)

    @property
    def next_subject(self) -> str:
        """The pull request subject of the current server-side consumer (it changes on a reset)."""
        assert self._current is not None
        return self._current.next_subject

    @property
    def cached_info(self) -> ConsumerInfo | None:
        """The current consumer's info from when it was made (no request)."""
        return self._current.cached_info if self._current is not None else None

    def info(self, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerInfo:
        """Fresh info of the current consumer (made first if there is none).

        Raises:
            ConsumerNotFoundError: it is gone (the next read makes a new one).
        """
        deadline = Deadline.of(timeout, self._js.timeout)
        self._ensure(deadline, self._owner or self._claim())
        assert self._current is not None
        return self._current.info(timeout=deadline.remaining())

    def _config(self) -> ConsumerConfig:
        kwargs: dict[str, Any] = {}
        if self._stream_seq > 0:
            kwargs = {"deliver_policy": "by_start_sequence", "opt_start_seq": self._stream_seq + 1}
        else:
            kwargs = {"deliver_policy": getattr(self._deliver_policy, "value", self._deliver_policy)}
            if self._opt_start_seq is not None:
                kwargs["opt_start_seq"] = self._opt_start_seq
            if self._opt_start_time is not None:
                kwargs["opt_start_time"] = self._opt_start_time
        filters = self._filters
        if not filters and kwargs["deliver_policy"] == "last_per_subject":
            filters = [">"]  # the server wants a filter for this policy (as nats.go fills it)
        if len(filters) == 1:
            kwargs["filter_subject"] = filters[0]
        elif filters:
            kwargs["filter_subjects"] = filters
        return ConsumerConfig(
            name=f"{self._prefix}_{self._serial}",
            ack_policy="none",
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=self._inactive_threshold,
            replay_policy=self._replay_policy,
            headers_only=self._headers_only,
            metadata=self._metadata,
            **kwargs,
        )

    def _claim(self) -> _Read:
        """A new read that owns the consumer from now on (the one before it is left alone)."""
        read = _Read(self)
        with self._lock:
            self._owner = read
        return read

    def _recreate(self, deadline: Deadline | None, read: _Read) -> None:
        """Delete the current consumer (best effort) and make the next one for ``read``.

        Transient failures (server away, no JetStream leader yet, timeouts) are
        retried with back-off, for ever unless ``max_reset_attempts`` or the
        deadline says otherwise; a permanent one (stream deleted, bad config)
        is raised at once. A stop of ``read`` wins: a consumer made after it is
        deleted at once, and :class:`~natsjs_sync.BadSubscriptionError` raised.
        """
        stopped = read.stopped
        with self._lock:
            if stopped.is_set():
                # A heal of a read already stopped (it ran on an errand thread): a
                # later read may own the consumer now, and it is not this one's to drop.
                raise BadSubscriptionError("the ordered consumer was stopped")
            old, self._current = self._current, None
            self._owner = read
        self._ack_prefix = "\0"
        if old is not None:
            self._discard(old.name)
        while True:
            if stopped.is_set():
                self._forget_tried()
                raise BadSubscriptionError("the ordered consumer was stopped")
            self._next_name()
            try:
                cons = self._js.create_consumer(self.stream, self._config(),
                                                timeout=deadline.min(self._js.timeout) if deadline else USE_DEFAULT)
            except NatsError as exc:
                self._tried = self._stream_seq
                if not _transient(exc, bool(self._core.server_info.get("jetstream"))):
                    raise
                self._failures += 1
                if self._max_resets is not None and self._failures >= self._max_resets:
                    raise JetStreamError(f"ordered consumer could not be re-created: {exc}") from exc
                wait = RECREATE_BACKOFF.delay(self._failures)
                left = deadline.remaining() if deadline is not None else None
                if left is not None and left <= wait:
                    stopped.wait(left)  # spend the rest rather than retry in a tight loop
                    made = "re-created" if old is not None else "created"
                    raise TimeoutError(f"ordered consumer could not be {made} in time: {exc}") from exc
                if stopped.wait(wait):  # back-off, cut short by a stop
                    self._forget_tried()
                    raise BadSubscriptionError("the ordered consumer was stopped") from exc
                continue
            self._tried = None
            # Under the lock with release(): either the stop sees the new consumer and
            # deletes it, or this sees the stop and does; never neither (a leak until
            # inactive_threshold).
            with self._lock:
                kept = not stopped.is_set()
                if kept:
                    self._current = cons
            if not kept:
                self._discard(cons.name)
                raise BadSubscriptionError("the ordered consumer was stopped")
            self._failures = 0
            self._ack_prefix = f"$JS.ACK.{self.stream}.{cons.name}"
            self._consumer_seq = 0
            if old is not None:
                self.resets += 1
                self._core.logs.to(log).info("ordered consumer on %s made anew from stream sequence %d (reset %d)",
                                             self.stream, self._stream_seq + 1, self.resets)
            return

    def _next_name(self) -> None:
        """The name of the next create: the one tried last while its outcome is
        unknown, the consumer asked for the same and its first ask is less than
        :data:`SAME_NAME_FOR` seconds old, else a new one (the one given up is
        asked to be deleted: a late create of it is undone)."""
        now = time.monotonic()
        if self._tried is not None and self._tried == self._stream_seq and now - self._named_at < SAME_NAME_FOR:
            return
        self._forget_tried()
        self._serial += 1
        self._named_at = now

    def _forget_tried(self) -> None:
        """A create whose outcome is unknown will not be asked again: have the
        consumer it may have made deleted (without waiting; see ``_discard``)."""
        if self._tried is not None:
            self._tried = None
            self._discard(f"{self._prefix}_{self._serial}")

    def _ensure(self, deadline: Deadline | None, read: _Read) -> None:
        if self._current is None:
            self._recreate(deadline, read)

    def _release(self, read: _Read) -> None:
        """``read`` has ended: cut its re-creation short and ask the server to delete
        the consumer, if ``read`` still owns it (without waiting: see ``_discard``)."""
        read.stopped.set()
        with self._lock:
            if self._owner is not read:
                return  # a later read owns the consumer now
            current, self._current = self._current, None
            self._owner = None
        if current is None:
            self._forget_tried()  # a create that timed out may have made it after all
        else:
            self._ack_prefix = "\0"
            self._discard(current.name)

    def _delete(self, name: str | None) -> None:
        if name is not None:
            try:
                self._js.delete_consumer(self.stream, name, timeout=1.0)
            except NatsError:
                pass  # gone already, or the server is away: it expires on its own

    def _discard(self, name: str | None) -> None:
        """Ask the server to delete a consumer this one no longer uses, without waiting.

        The one rule of every clean-up an iteration makes (a stop, a reset, a
        collected key lister released on the timer thread): it is a request
        nobody waits for, as nats.go deletes from a goroutine of its own, so
        it never holds the thread that ends the iteration. Made while the client
        is reconnecting, it waits in the write buffer and goes out once the
        connection is back (as nats.go's delete waits in its reconnect buffer).
        One that cannot arrive (the client closed, the buffer full or off with
        ``pending_size=0``, or written to a connection that was already dead)
        leaves the consumer to the server's ``inactive_threshold`` (300 s by
        default, nats.go's 5 minutes), which every ordered consumer carries.
        """
        if name is not None:
            try:
                self._js._api.post(f"CONSUMER.DELETE.{self.stream}.{name}")
            except NatsError:
                pass  # the client is closing: the consumer expires on its own

    # ------------------------------------------------------------------ OrderedHooks

    def accept(self, msg: Msg) -> str:
        """``"ok"`` to deliver, ``"stale"`` to drop, ``"gap"`` to start over (runs for every message)."""
        reply = msg.reply
        # The current consumer's common (domain-less) ack subject: one compiled
        # check where the extension is built; anything else takes the full parse.
        tail = ack_tail(reply, self._ack_prefix)
        if tail is not None:
            if tail[1] != self._consumer_seq + 1:
                return "gap"
            self._stream_seq, self._consumer_seq = tail
            return "ok"
        seq = sequences(reply)
        if seq is None or self._current is None or seq.consumer != self._current.name:
            return "stale"
        if seq.consumer_seq != self._consumer_seq + 1:
            return "gap"
        self._consumer_seq = seq.consumer_seq
        self._stream_seq = seq.stream_seq
        return "ok"


    # ------------------------------------------------------------------ one-shot reads

    def _read(self, deadline: Deadline, limit: int,
              fetch: Callable[[Consumer, float | None], MessageBatch]) -> list[Msg]:
        """One fetch on the current consumer, in order; a lost consumer is made anew
        (with back-off) and asked again while time is left."""
        read = self._claim()
        attempt = 0
        while True:
            self._ensure(deadline, read)
            assert self._current is not None
            out: list[Msg] = []
            with fetch(self._current, deadline.remaining()) as batch:
                for msg in batch:
                    verdict = self.accept(msg)
                    if verdict == "ok":
                        out.append(msg)
                    elif verdict == "gap":
                        self._recreate(deadline, read)
                        return out
                    if len(out) >= limit:
                        return out
            st = batch.status
            if out or st is None or st.kind in (Kind.REQUEST_ENDED, Kind.HEARTBEAT):
                return out
            if st.kind in (Kind.NO_RESPONDERS, Kind.CONSUMER_DELETED, Kind.RESET):
                attempt += 1
                wait = RECREATE_BACKOFF.delay(attempt) if attempt > 1 else 0.0
                left = deadline.remaining()
                if left is not None and left <= wait:
                    return out
                if wait and read.stopped.wait(wait):
                    return out
                self._recreate(deadline, read)
                continue
            if batch.error is not None:
                raise batch.error
            return out

    def fetch(self, batch: int, max_wait: TimeoutArg = USE_DEFAULT) -> list[Msg]:
        """Up to ``batch`` messages in order (a list; a gap ends the batch early).

        Raises:
            StreamNotFoundError: the stream is gone.
        """
        deadline = Deadline.of(max_wait, DEFAULT_FETCH_WAIT)
        return self._read(deadline, batch, lambda c, wait: c.fetch(batch, max_wait=wait))

    def fetch_bytes(self, max_bytes: int, max_wait: TimeoutArg = USE_DEFAULT) -> list[Msg]:
        """Messages in order adding up to at most ``max_bytes`` bytes."""
        deadline = Deadline.of(max_wait, DEFAULT_FETCH_WAIT)
        return self._read(deadline, 1 << 62, lambda c, wait: c.fetch_bytes(max_bytes, max_wait=wait))

    def fetch_no_wait(self, batch: int, timeout: TimeoutArg = USE_DEFAULT) -> list[Msg]:
        """Only the messages available now, in order, up to ``batch``."""
        deadline = Deadline.of(timeout, self._js.timeout)
        return self._read(deadline, batch, lambda c, wait: c.fetch_no_wait(batch, timeout=wait))

    def next(self, timeout: TimeoutArg = USE_DEFAULT) -> Msg:
        """The next message in order.

        Raises:
            TimeoutError: none within ``timeout`` (default 30 s; ``None``: wait for ever).
            StreamNotFoundError: the stream is gone.
        """
        deadline = Deadline.of(timeout, DEFAULT_FETCH_WAIT)
        while True:
            got = self._read(deadline, 1, lambda c, wait: c.fetch(1, max_wait=wait))
            if got:
                return got[0]
            if deadline.expired():
                raise TimeoutError(f"no message from ordered consumer on {self.stream!r} in time")

    # ------------------------------------------------------------------ continuous reads

    def messages(self, max_messages: int = 500, expires: float = 30.0, heartbeat: float | None = None,
                 error_cb: ErrorHandler | None = None, max_bytes: int | None = None) -> MessagesContext:
        """Iterate every message in order, healing the consumer underneath as needed.

        ``max_bytes`` bounds what is requested ahead by size instead of count
        (for large messages such as object chunks). Stopping the iterator
        deletes the server-side consumer. Missed heartbeats, a deleted or lost
        consumer and reconnects never end the iteration (a new consumer goes
        on from the next stream sequence; ``error_cb`` hears of them).

        Raises:
            JetStreamNotEnabledError: JetStream is off on the server or for the account.
            StreamNotFoundError: there is no such stream.
            TimeoutError: the first consumer could not be made within the
                context's API timeout (``JetStream.timeout``).
        """
        check_callback(error_cb, "error_cb")
        read = self._claim()
        self._ensure(Deadline(self._js.timeout), read)  # the first create: one API call's time
        return MessagesContext(self, self._core, max_messages, max_bytes, expires, _heartbeat(expires, heartbeat),
                               error_cb=error_cb, ordered=read)

    def consume(self, handler: Callable[[Msg], None], max_messages: int = 500, expires: float = 30.0,
                heartbeat: float | None = None, error_cb: ErrorHandler | None = None) -> ConsumeContext:
        """Call ``handler(msg)`` for each message in order, on the client's dispatcher.

        Raises:
            JetStreamNotEnabledError: JetStream is off on the server or for the account.
            StreamNotFoundError: there is no such stream.
            TimeoutError: the first consumer could not be made within the
                context's API timeout (``JetStream.timeout``).
        """
        check_callback(handler, "handler")
        check_callback(error_cb, "error_cb")
        read = self._claim()
        self._ensure(Deadline(self._js.timeout), read)  # the first create: one API call's time
        it = MessagesContext(self, self._core, max_messages, None, expires, _heartbeat(expires, heartbeat),
                             error_cb=error_cb, ordered=read, handler=handler, name=f"ordered-{self.stream}")
        return ConsumeContext(it)


    def delete(self) -> None:
        """Delete the current server-side consumer (it would expire on its own)."""
        current, self._current = self._current, None
        self._ack_prefix = "\0"
        if current is not None:
            self._delete(current.name)

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream} at stream seq {self._stream_seq}>"


class _Read:
    """One read of an ordered consumer (an iteration, or a one-shot read): the
    :class:`~natsjs_sync.jetstream.pull.OrderedHooks` of its iteration. Its stop
    touches only what it made. Thread-safe."""

    __slots__ = ("_oc", "accept", "stopped")

    def __init__(self, oc: OrderedConsumer):
        self._oc = oc
        self.accept = oc.accept  # bound once: it runs for every message
        self.stopped = threading.Event()  #: set once the read has ended

    def recreate(self, deadline: Deadline | None = None) -> None:
        """Make a new server-side consumer from the sequence after the last one delivered
        (blocks with back-off until ``deadline``; raises when that cannot be done in time,
        :class:`~natsjs_sync.BadSubscriptionError` once stopped)."""
        self._oc._recreate(deadline, self)

    def cancel(self) -> None:
        """Stop: cut a re-creation short and delete the server-side consumer this read made."""
        self._oc._release(self)


#: The iterator an ordered consumer's :meth:`~OrderedConsumer.messages` returns.
OrderedMessages = MessagesContext

__all__ = ["OrderedConsumer", "OrderedMessages"]
