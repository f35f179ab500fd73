"""A pull consumer handle: info, fetch, next, messages, consume."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._timeout import USE_DEFAULT, TimeoutArg, resolve
from ..errors import TimeoutError
from ..msg import Msg
from .consumer_config import ConsumerInfo
from .pull import ConsumeContext, ErrorHandler, MessageBatch, MessagesContext, pull_request, server_expiry

if TYPE_CHECKING:
    from .context import JetStream

DEFAULT_FETCH_WAIT = 30.0


class Consumer:
    """A handle on one pull consumer. Thread-safe; fetches may run in parallel."""

    def __init__(self, js: JetStream, info: ConsumerInfo):
        self._js = js
        self.stream = info.stream_name
        self.name = info.name
        self._info = info
        self._next_subject = js._api.subject(f"CONSUMER.MSG.NEXT.{self.stream}.{self.name}")
        self._pin_id: str | None = None

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from when this handle was made or last refreshed (no request)."""
        return self._info

    def info(self, timeout: float | None = None) -> ConsumerInfo:
        """Fresh consumer info. Raises ConsumerNotFoundError."""
        self._info = self._js._consumer_info(self.stream, self.name, timeout)
        return self._info

    # ------------------------------------------------------------------ one-shot

    def _fetch(self, batch: int, max_bytes: int | None, max_wait: float, no_wait: bool,
               heartbeat: float | None, group: str | None, **priority: Any) -> MessageBatch:
        if batch < 1:
            raise ValueError("batch must be >= 1")
        if heartbeat is not None and heartbeat * 2 > max_wait:
            raise ValueError("heartbeat must be at most half of max_wait")
        nc = self._js._api.nc
        inbox = nc.new_inbox()
        sub = nc._subscribe_internal(inbox)
        body = pull_request(
            batch,
            None if no_wait else server_expiry(max_wait),
            no_wait=no_wait,
            max_bytes=max_bytes,
            heartbeat=heartbeat,
            group=group,
            pin_id=self._pin_id if group is not None else None,
            **priority,
        )
        try:
            nc.publish_now(self._next_subject, body, reply=inbox)
        except BaseException:
            sub.unsubscribe()
            raise
        return MessageBatch(sub, batch, max_bytes, max_wait, heartbeat,
                            pin_cb=self._remember_pin if group is not None else None)

    def _remember_pin(self, msg: Msg) -> None:
        h = msg.headers
        if h is not None and "Nats-Pin-Id" in h:
            self._pin_id = h["Nats-Pin-Id"]

    def fetch(self, batch: int, max_wait: TimeoutArg = USE_DEFAULT, heartbeat: float | None = None,
              group: str | None = None, min_pending: int | None = None,
              min_ack_pending: int | None = None, priority: int | None = None) -> MessageBatch:
        """Ask for up to ``batch`` messages, waiting at most ``max_wait`` seconds (default 30).

        Returns at once with a :class:`MessageBatch` that yields messages as they
        arrive. An empty or short batch is not an error.

        Args:
            group, min_pending, min_ack_pending, priority: priority-group options
                for consumers with a priority policy.
        """
        wait = resolve(max_wait, DEFAULT_FETCH_WAIT)
        return self._fetch(batch, None, wait if wait is not None else DEFAULT_FETCH_WAIT, False, heartbeat, group,
                           min_pending=min_pending, min_ack_pending=min_ack_pending, priority=priority)

    def fetch_bytes(self, max_bytes: int, max_wait: TimeoutArg = USE_DEFAULT,
                    heartbeat: float | None = None) -> MessageBatch:
        """Ask for messages adding up to at most ``max_bytes`` bytes."""
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        wait = resolve(max_wait, DEFAULT_FETCH_WAIT)
        return self._fetch(1_000_000, max_bytes, wait if wait is not None else DEFAULT_FETCH_WAIT, False,
                           heartbeat, None)

    def fetch_no_wait(self, batch: int, timeout: float | None = None) -> MessageBatch:
        """Only what is available now, up to ``batch`` (no waiting for new messages)."""
        wait = self._js._api.timeout if timeout is None else timeout
        return self._fetch(batch, None, wait, True, None, None)

    def next(self, timeout: TimeoutArg = USE_DEFAULT, heartbeat: float | None = None) -> Msg:
        """The next message.

        Raises:
            TimeoutError: none within ``timeout`` seconds (default 30).
        """
        wait = resolve(timeout, DEFAULT_FETCH_WAIT)
        with self.fetch(1, max_wait=wait if wait is not None else DEFAULT_FETCH_WAIT, heartbeat=heartbeat) as b:
            for msg in b:
                return msg
            if b.error is not None:
                raise b.error
        raise TimeoutError(f"no message from consumer {self.name!r} within {wait} s")

    # ------------------------------------------------------------------ continuous

    def messages(self, max_messages: int = 500, max_bytes: int | None = None, expires: float = 30.0,
                 heartbeat: float | None = None, threshold_messages: int | None = None,
                 threshold_bytes: int | None = None) -> MessagesContext:
        """Iterate messages as they come, pulling more in the background of the loop.

        ``with cons.messages() as it: for msg in it: ...``
        """
        return MessagesContext(self, max_messages, max_bytes, expires, heartbeat, threshold_messages,
                               threshold_bytes)

    def consume(self, handler: Callable[[Msg], None], max_messages: int = 500, max_bytes: int | None = None,
                expires: float = 30.0, heartbeat: float | None = None, threshold_messages: int | None = None,
                threshold_bytes: int | None = None, error_cb: ErrorHandler | None = None) -> ConsumeContext:
        """Call ``handler(msg)`` for each message on a thread of its own; returns a ConsumeContext.

        Exceptions from the handler (and pull problems) go to ``error_cb``.
        """
        it = MessagesContext(self, max_messages, max_bytes, expires, heartbeat, threshold_messages,
                             threshold_bytes, error_cb=error_cb)
        return ConsumeContext(it, handler, error_cb, self.name)

    def __repr__(self) -> str:
        return f"<Consumer {self.stream}/{self.name}>"
