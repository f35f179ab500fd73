"""A running member instance: the thread that follows the group's config and the consumer it reads.

Both kinds of group run the same loop. One thread per member instance, named
``natsjs-pcgroup-<member>``, follows the group's key in its KV bucket and
(re)creates the member's consumer as the config asks; the messages go to the
user's handler on the client's dispatcher, through the pull consumer's
``consume`` (one message at a time, in order). The priority group with a
pinned client makes only one instance of a member receive at a time; when it
stops pulling (it died), the server moves the pin to another instance after
the pinned TTL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from ..errors import BadSubscriptionError, NatsError
from ..errors import TimeoutError as NatsTimeoutError
from ..jetstream import ConsumeContext, Consumer, ConsumerConfig, JetStream, KeyValue, KeyValueOp
from ..jetstream.kv import KeyWatcher
from ..msg import Msg
from .config import DEFAULT_ACK_WAIT, MIN_PULL_EXPIRY_PINNED_TTL, PRIORITY_GROUP, PULL_TIMEOUT_DIVIDER
from .errors import ConsumerGroupExistsError
from .partitions import compose_key, strip_partition

__all__ = ["ConsumerGroupConsumeContext", "MessageHandler"]

log = logging.getLogger("natsjs_sync.pcgroups")

#: What a member's handler is called with: the message, its subject without the partition token.
MessageHandler = Callable[[Msg], None]


class PinnedElsewhere(Exception):
    """The member's consumer has other filters and an instance pinned: it is not ours to delete yet."""


class ConsumerGroupConsumeContext:
    """What ``static_consume``/``elastic_consume`` return: the member instance at work.

    Thread-safe: :meth:`stop` and :meth:`wait` may be called from any thread
    (:meth:`stop` from the handler too, without waiting for itself).

    Attributes:
        stream: the stream the member's consumer reads.
        group: the group's name.
        member: the member's name.
    """

    _idle_period = 5.0  # seconds between checks of the member's consumer

    def __init__(self, js: JetStream, kv: KeyValue, stream: str, key_stream: str, group: str, member: str,
                 handler: MessageHandler, template: ConsumerConfig,
                 error_cb: Callable[[Exception], None] | None, keep_partition: bool = False) -> None:
        self._js = js
        self._kv = kv
        self.stream = stream
        self.group = group
        self.member = member
        self._key = compose_key(key_stream, group)
        self._handler = handler
        self._error_cb = error_cb
        self._keep_partition = keep_partition
        self.ack_wait = template.ack_wait or DEFAULT_ACK_WAIT
        self._template = template
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._error: Exception | None = None
        self._consumer: Consumer | None = None
        self._consuming: ConsumeContext | None = None
        self._pin_id: str | None = None
        self._watcher: KeyWatcher | None = None
        self._thread: threading.Thread | None = None
        # Handler calls running now (of any consume context this instance had):
        # a new consume context never starts while one runs, so one member
        # instance never handles two messages at once, even across a rebalance.
        self._handlers = threading.Condition()
        self._handler_threads: list[int] = []  # the thread of each handler call running

    # ------------------------------------------------------------------ public

    @property
    def pinned_ttl(self) -> float:
        """Seconds an instance keeps the pin without pulling: ``max(ack_wait, 1)``."""
        return max(self.ack_wait, MIN_PULL_EXPIRY_PINNED_TTL)

    @property
    def pull_expiry(self) -> float:
        """Seconds each pull request lives: ``max(ack_wait / 2, 1)``, so a live instance keeps its pin."""
        return max(self.ack_wait / PULL_TIMEOUT_DIVIDER, MIN_PULL_EXPIRY_PINNED_TTL)

    @property
    def done(self) -> threading.Event:
        """Set once this instance has stopped (asked to, the group deleted, or an error)."""
        return self._done

    @property
    def error(self) -> Exception | None:
        """Why it stopped on its own (``None``: stopped by :meth:`stop` or the group's deletion)."""
        return self._error

    @property
    def consuming(self) -> bool:
        """Whether it currently has a consumer it pulls from."""
        c = self._consuming
        return c is not None and not c.closed.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it has stopped.

        Args:
            timeout: seconds (``None``: for ever).

        Returns:
            Whether it has stopped.
        """
        return self._done.wait(timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop consuming: the handler finishes the message it has, no more follow.

        The member's consumer stays (a static one is durable; an elastic one is
        removed by the server once idle), so what was not acknowledged goes to
        the next instance after the ack wait.

        Args:
            timeout: seconds to wait for the running handler and the thread.
        """
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        self._stopping.set()
        with self._handlers:
            self._handlers.notify_all()  # the member's thread may be waiting for a handler
        # Stopped here, before the watch, rather than by the thread: the consume
        # context knows not to wait for the handler when the handler itself is
        # the caller, and the thread then finds nothing to wait for.
        self._stop_consuming(timeout)
        w = self._watcher
        if w is not None:
            w.stop()
        with self._handlers:
            in_handler = threading.get_ident() in self._handler_threads
            if not in_handler:  # also a handler of a consume context already let go (a rebalance)
                self._handlers.wait_for(lambda: not self._handler_threads, left())
        t = self._thread
        # From a handler, the thread may be waiting for this very handler: it ends once it returns.
        if t is not None and t is not threading.current_thread() and not in_handler:
            t.join(left())

    def __enter__(self) -> ConsumerGroupConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.group}/{self.member} on {self.stream}>"

    # ------------------------------------------------------------------ for the kinds

    def _start(self, first_revision: int) -> None:
        """Join, then follow the config on a thread of its own."""
        # Watch from the revision read, so no change made meanwhile is missed.
        self._watcher = self._kv.watch(self._key, resume_from_revision=first_revision + 1)
        try:
            self._initial_join()
        except BaseException:
            self._watcher.stop()
            self._stop_consuming(timeout=1.0)
            raise
        name = f"natsjs-pcgroup-{self.member}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _initial_join(self) -> None:
        raise NotImplementedError

    def _on_config(self, value: bytes, revision: int) -> None:
        """A new value of the group's key."""
        raise NotImplementedError

    def _on_idle(self) -> None:
        """Called when nothing happened for ``_idle_period`` seconds."""

    def _on_group_deleted(self) -> None:
        """The group's key was deleted: a normal end."""
        self._finish(None)

    def _member_config(self, name: str, filters: list[str], *, durable: bool) -> ConsumerConfig:
        """The caller's template with what the group decides put in."""
        extra: dict[str, Any] = {"durable_name": name, "name": None} if durable else {"name": name,
                                                                                    "durable_name": None}
        return msgspec.structs.replace(
            self._template, filter_subject=None, filter_subjects=filters, priority_groups=[PRIORITY_GROUP],
            priority_policy="pinned_client", priority_timeout=self.pinned_ttl, ack_wait=self.ack_wait, **extra)

    def _create_consumer(self, stream: str, config: ConsumerConfig, *, spare_pinned: bool = False) -> Consumer:
        """Create the member's consumer; one with other filters is deleted first.

        Partitions that move to this member may need an earlier position than
        the consumer has, so changed filters mean a new consumer, not an update.

        Args:
            spare_pinned: leave a consumer with other filters alone while an
                instance holds its pin: that instance is alive, maybe finishing a
                message, and deletes it itself once done (or the pin times out
                after ``ack_wait``).

        Raises:
            PinnedElsewhere: ``spare_pinned`` and it was spared (try again later).
            ConsumerGroupExistsError: a consumer of that name exists that is no
                group member's (no ``PCG`` priority group): it is left alone.
            JetStreamError: the server refused it.
        """
        name = config.name or config.durable_name
        assert name is not None
        try:
            info = self._js.consumer(stream, name).cached_info
        except NatsError:
            info = None
        if info is not None and PRIORITY_GROUP not in (info.config.priority_groups or ()):
            raise ConsumerGroupExistsError(
                f"consumer {name!r} on stream {stream!r} exists and is not a consumer group member's "
                f"(no priority group {PRIORITY_GROUP!r}); it was left alone")
        if info is not None and list(info.config.filter_subjects or ()) != list(config.filter_subjects or ()):
            if spare_pinned and any(g.group == PRIORITY_GROUP and g.pinned_client_id
                                    for g in info.priority_groups or ()):
                raise PinnedElsewhere(f"consumer {name!r} has other filters and a pinned instance")
            try:
                self._js.delete_consumer(stream, name)
            except NatsError:
                pass
        return self._js.create_or_update_consumer(stream, config)

    def _wait_handler_done(self, timeout: float | None) -> bool:
        """Wait until no handler call of this instance runs (or it is stopping).

        Args:
            timeout: seconds (``None``: as long as a handler runs).

        Returns:
            Whether no handler runs now (``False`` also when stopping).
        """
        with self._handlers:
            self._handlers.wait_for(lambda: not self._handler_threads or self._stopping.is_set(), timeout)
            return not self._handler_threads and not self._stopping.is_set()

    def _let_go(self) -> None:
        """Stop receiving and give a running handler up to ``ack_wait`` to finish.

        Its acknowledgement then reaches the consumer that delivered it, before
        the consumer is deleted; a handler running longer lost the message to
        redelivery anyway (that is what ``ack_wait`` means).
        """
        self._stop_consuming(timeout=0)
        self._wait_handler_done(self.ack_wait)

    def _start_consuming(self, consumer: Consumer) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            self._consumer = consumer
            self._consuming = consumer.consume(self._deliver, expires=self.pull_expiry, group=PRIORITY_GROUP,
                                               error_cb=self._report)

    def _stop_consuming(self, timeout: float | None = 5.0) -> None:
        with self._lock:
            c, self._consuming, self._consumer = self._consuming, None, None
        if c is not None:
            c.stop(timeout)

    def _is_pinned(self) -> bool:
        """Whether this instance holds the pin of the member's consumer (asks the server)."""
        consumer, pin = self._consumer, self._pin_id
        if consumer is None or not pin:
            return False
        try:
            info = consumer.info(timeout=2.0)
        except NatsError:
            return False
        return any(g.group == PRIORITY_GROUP and g.pinned_client_id == pin for g in info.priority_groups or ())

    def _finish(self, error: Exception | None) -> None:
        """Stop for good: consuming ends, the watch ends, ``done`` is set."""
        if error is not None and self._error is None:
            self._error = error
            self._report(error)
        self._stopping.set()
        w = self._watcher
        if w is not None:
            w.stop()

    def _report(self, exc: Exception) -> None:
        cb = self._error_cb
        if cb is None:
            self._js._core.logs.to(log).warning("consumer group %s member %s: %r", self.group, self.member, exc)
            return
        try:
            cb(exc)
        except Exception:  # a callback's own bug must not end the member
            self._js._core.logs.to(log).exception("error_cb of consumer group %s member %s failed", self.group,
                                                  self.member)

    # ------------------------------------------------------------------ internals

    def _deliver(self, msg: Msg) -> None:
        me = threading.get_ident()
        with self._handlers:
            self._handler_threads.append(me)
        try:
            self._handle(msg)
        finally:
            with self._handlers:
                self._handler_threads.remove(me)
                self._handlers.notify_all()

    def _handle(self, msg: Msg) -> None:
        if msg.raw_headers is not None:
            hdrs = msg.headers
            pin = hdrs.get("Nats-Pin-Id") if hdrs else None
            if pin:
                self._pin_id = pin
        if self._keep_partition:
            self._handler(msg)
            return
        # The same message class (so ack/nak/metadata work on the same reply),
        # with the partition token gone from the subject.
        stripped = type(msg)(strip_partition(msg.subject), msg.sid, msg.reply, msg.raw_headers, msg.data)
        self._handler(stripped)

    def _run(self) -> None:
        w = self._watcher
        assert w is not None
        try:
            while not self._stopping.is_set():
                try:
                    entry = w.next(timeout=self._idle_period)
                except (TimeoutError, NatsTimeoutError):
                    self._safely(self._on_idle)
                    continue
                except BadSubscriptionError:
                    break  # stopped
                except NatsError as exc:
                    self._report(exc)  # the watch heals itself (ordered consumer); go on
                    continue
                if entry is None:
                    continue
                if entry.operation is not KeyValueOp.PUT:
                    self._on_group_deleted()
                    continue
                self._safely(self._on_config, entry.value, entry.revision)
        finally:
            w.stop()
            self._stop_consuming()
            self._done.set()

    def _safely(self, step: Callable[..., None], *args: Any) -> None:
        try:
            step(*args)
        except NatsError as exc:
            self._report(exc)
