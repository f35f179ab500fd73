"""A pull consumer handle: info, fetch, next, messages, consume."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.options import check_callback
from .._timeout import USE_DEFAULT, TimeoutArg, resolve
from .._typed_reads import TypedReads
from ..errors import TimeoutError
from ..msg import Msg
from .consumer_config import ConsumerInfo
from .messages import ConsumeContext, ErrorHandler, MessagesContext
from .pull import MessageBatch, Priority, pull_request, server_expiry

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .context import JetStream

#: The default wait of :meth:`Consumer.fetch` and :meth:`Consumer.next`, as nats.go's.
DEFAULT_FETCH_WAIT = 30.0


class Consumer(TypedReads):
    """A handle on one pull consumer. Thread-safe; fetches may run in parallel."""

    def __init__(self, js: JetStream, info: ConsumerInfo):
        self._js = js
        self._core = js._api.core
        self.stream = info.stream_name
        self.name: str = info.name
        self._info = info
        self._next_subject = js._api.subject(f"CONSUMER.MSG.NEXT.{self.stream}.{self.name}")
        self._pin_id: str | None = None

    @property
    def next_subject(self) -> str:
        """The subject pull requests go to."""
        return self._next_subject

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from when this handle was made or last refreshed (no request)."""
        return self._info

    def info(self, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerInfo:
        """Fresh consumer info (default timeout: the context's).

        Raises:
            ConsumerNotFoundError: the consumer does not exist (any more).
        """
        self._info = self._js._consumer_info(self.stream, self.name, timeout)
        return self._info

    # ------------------------------------------------------------------ one-shot

    def _fetch(self, batch: int, max_bytes: int | None, max_wait: float | None, no_wait: bool,
               heartbeat: float | None, prio: Priority | None) -> MessageBatch:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        if heartbeat is not None and (max_wait is None or heartbeat * 2 > max_wait):
            raise ValueError("heartbeat must be at most half of max_wait")
        core = self._core
        inbox = core.new_inbox()
        sub = core.subscribe_internal(inbox)
        body = pull_request(
            batch,
            None if no_wait or max_wait is None else server_expiry(max_wait),
            no_wait=no_wait,
            max_bytes=max_bytes,
            heartbeat=heartbeat,
            group=prio.group if prio is not None else None,
            min_pending=prio.min_pending if prio is not None else None,
            min_ack_pending=prio.min_ack_pending if prio is not None else None,
            priority=prio.priority if prio is not None else None,
            pin_id=self._pin_id if prio is not None else None,
        )
        try:
            core.publish_now(self._next_subject, body, reply=inbox)
        except BaseException:
            sub.unsubscribe()
            raise
        return MessageBatch(sub, batch, max_bytes, max_wait, heartbeat,
                            pin_cb=self._remember_pin if prio is not None else None)

    def _remember_pin(self, msg: Msg) -> None:
        h = msg.headers
        if h is not None and "Nats-Pin-Id" in h:
            self._pin_id = h["Nats-Pin-Id"]

    def fetch(self, batch: int, max_wait: TimeoutArg = USE_DEFAULT, heartbeat: float | None = None,
              group: str | None = None, min_pending: int | None = None,
              min_ack_pending: int | None = None, priority: int | None = None) -> MessageBatch:
        """Ask for up to ``batch`` messages, waiting at most ``max_wait`` seconds.

        Returns at once with a :class:`MessageBatch` that yields messages as they
        arrive. An empty or short batch is not an error.

        Args:
            max_wait: seconds the request stays open (default 30; ``None``: until
                ``batch`` messages came).
            heartbeat: idle heartbeat interval; two missed end the batch with
                :class:`~natsjs_sync.NoHeartbeatError` in :attr:`MessageBatch.error`.
            group, min_pending, min_ack_pending, priority: priority-group options
                for consumers with a ``priority_policy`` (server 2.11+, ``priority`` 2.12+).

        Raises:
            FeatureNotSupportedError: a priority option the server cannot honour.
            ValueError: a bad option, or a priority option without ``group`` (nothing sent).
        """
        wait = resolve(max_wait, DEFAULT_FETCH_WAIT)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return self._fetch(batch, None, wait, False, heartbeat, prio)

    def fetch_bytes(self, max_bytes: int, max_wait: TimeoutArg = USE_DEFAULT, heartbeat: float | None = None,
                    group: str | None = None, min_pending: int | None = None,
                    min_ack_pending: int | None = None, priority: int | None = None) -> MessageBatch:
        """Ask for messages adding up to at most ``max_bytes`` bytes; the other
        options are those of :meth:`fetch`."""
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be an int >= 1, got {max_bytes!r}")
        wait = resolve(max_wait, DEFAULT_FETCH_WAIT)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return self._fetch(1_000_000, max_bytes, wait, False, heartbeat, prio)

    def fetch_no_wait(self, batch: int, timeout: TimeoutArg = USE_DEFAULT, group: str | None = None,
                      min_pending: int | None = None, min_ack_pending: int | None = None,
                      priority: int | None = None) -> MessageBatch:
        """Only what is available now, up to ``batch`` (no waiting for new messages).

        ``timeout`` bounds the round trip (default: the context's); the priority
        options are those of :meth:`fetch`.
        """
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return self._fetch(batch, None, resolve(timeout, self._js.timeout), True, None, prio)

    def next(self, timeout: TimeoutArg = USE_DEFAULT, heartbeat: float | None = None, group: str | None = None,
             min_pending: int | None = None, min_ack_pending: int | None = None,
             priority: int | None = None) -> Msg:
        """The next message; the priority options are those of :meth:`fetch`.

        Raises:
            TimeoutError: none within ``timeout`` seconds (default 30; ``None``: wait for ever).
        """
        wait = resolve(timeout, DEFAULT_FETCH_WAIT)
        with self.fetch(1, max_wait=wait, heartbeat=heartbeat, group=group, min_pending=min_pending,
                        min_ack_pending=min_ack_pending, priority=priority) as b:
            for msg in b:
                return msg
            if b.error is not None:
                raise b.error
        raise TimeoutError(f"no message from consumer {self.name!r} within {wait} s")

    # ------------------------------------------------------------------ continuous

    def messages(self, max_messages: int | None = None, max_bytes: int | None = None, expires: float = 30.0,
                 heartbeat: float | None = None, threshold_messages: int | None = None,
                 threshold_bytes: int | None = None, error_cb: ErrorHandler | None = None,
                 group: str | None = None, min_pending: int | None = None, min_ack_pending: int | None = None,
                 priority: int | None = None, stop_after: int | None = None,
                 err_on_missing_heartbeat: bool = True) -> MessagesContext:
        """Iterate messages as they come, pulling more in the background of the loop.

        ``with cons.messages() as it: for msg in it: ...``. Missed heartbeats
        raise :class:`~natsjs_sync.NoHeartbeatError` from the iteration (the
        iterator stays usable); ``error_cb`` also hears of them.

        Args:
            max_messages: messages kept asked for (default 500); with ``max_bytes`` too,
                each request is bounded by both.
            max_bytes: bytes kept asked for.
            expires: seconds each pull request lives on the server.
            heartbeat: idle heartbeat interval (default: half of ``expires``, at most 30 s).
            group, min_pending, min_ack_pending, priority: priority-group options
                (consumers with a ``priority_policy``; server 2.11+, ``priority`` 2.12+).
            stop_after: end the iteration after this many messages (never asking
                the server for more than that).
            err_on_missing_heartbeat: ``False``: missed heartbeats only go to
                ``error_cb`` (the requests are sent again either way), the
                iteration just waits on.

        Raises:
            FeatureNotSupportedError: a priority option the server cannot honour.
        """
        check_callback(error_cb, "error_cb")
        return MessagesContext(self, self._core, max_messages, max_bytes, expires, heartbeat, threshold_messages,
                               threshold_bytes, error_cb=error_cb,
                               priority=self._priority(group, min_pending, min_ack_pending, priority),
                               stop_after=stop_after, err_on_missing_heartbeat=err_on_missing_heartbeat)

    def consume(self, handler: Callable[[Msg], None], max_messages: int | None = None, max_bytes: int | None = None,
                expires: float = 30.0, heartbeat: float | None = None, threshold_messages: int | None = None,
                threshold_bytes: int | None = None, error_cb: ErrorHandler | None = None,
                group: str | None = None, min_pending: int | None = None, min_ack_pending: int | None = None,
                priority: int | None = None, stop_after: int | None = None) -> ConsumeContext:
        """Call ``handler(msg)`` for each message, in order, on the client's dispatcher; returns a ConsumeContext.

        Takes the options of :meth:`messages`; with ``stop_after`` the context
        stops itself after that many handler calls (``ctx.closed`` is set).
        Exceptions from the handler and pull problems (missed heartbeats, the
        consumer deleted, a priority group the consumer does not have) go to
        ``error_cb`` (default: the client's error_cb).
        """
        check_callback(handler, "handler")
        check_callback(error_cb, "error_cb")
        it = MessagesContext(self, self._core, max_messages, max_bytes, expires, heartbeat, threshold_messages,
                             threshold_bytes, error_cb=error_cb, handler=handler, name=f"consume-{self.name}",
                             priority=self._priority(group, min_pending, min_ack_pending, priority),
                             stop_after=stop_after)
        return ConsumeContext(it)


    def _priority(self, group: str | None, min_pending: int | None, min_ack_pending: int | None,
                  priority: int | None) -> Priority | None:
        if group is None:
            if min_pending is not None or min_ack_pending is not None or priority is not None:
                raise ValueError("min_pending, min_ack_pending and priority need a group")
            return None
        p = Priority(group, min_pending, min_ack_pending, priority)
        self._js._require(*p.features())
        return p

    # ------------------------------------------------------------------ management

    def pause(self, until: datetime.datetime, timeout: TimeoutArg = USE_DEFAULT) -> Any:
        """Pause this consumer until ``until`` (server 2.11+); see :meth:`JetStream.pause_consumer`."""
        return self._js.pause_consumer(self.stream, self.name, until, timeout=timeout)

    def resume(self, timeout: TimeoutArg = USE_DEFAULT) -> Any:
        """Resume a paused consumer (server 2.11+)."""
        return self._js.resume_consumer(self.stream, self.name, timeout=timeout)

    def unpin(self, group: str, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Release the pinned client of a priority group (server 2.11+)."""
        self._js.unpin_consumer(self.stream, self.name, group, timeout=timeout)

    def reset(self, seq: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> Any:
        """Reset the consumer's delivery point (server 2.14+); see :meth:`JetStream.reset_consumer`."""
        return self._js.reset_consumer(self.stream, self.name, seq, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Consumer {self.stream}/{self.name}>"
