"""What key-value and object-store watches share: an ordered consumer read as
items, with ``None`` once at the end of the values present when it began."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from .._timeout import Deadline, TimeoutArg
from ..errors import BadSubscriptionError
from ..msg import Msg
from .paging import pull_bytes

if TYPE_CHECKING:
    from typing_extensions import Self

    from .messages import MessagesContext
    from .ordered import OrderedConsumer

T = TypeVar("T")


class Watcher(Generic[T]):
    """Items of a watch, then ``None`` once at the end of the initial values.

    Iterate it, or call :meth:`next`/:meth:`updates` with a timeout. :meth:`stop`
    (from any thread) ends the iteration; it never blocks on the reader.
    """

    def __init__(self, oc: OrderedConsumer, ignore_deletes: bool, initial: bool):
        self._oc = oc
        self._ignore_deletes = ignore_deletes
        # Each pull is bounded by bytes too: a pull's messages are sent at once, and 256 values of up
        # to max_payload bytes pass a server's max_pending, which disconnects the client (a slow consumer).
        self._it: MessagesContext = oc.messages(max_messages=256, max_bytes=pull_bytes(oc._core))
        self._init_done = not initial
        info = oc.cached_info
        # Nothing to catch up on: the marker comes first.
        self._marker_due = initial and info is not None and info.num_pending == 0
        # Hold the first initial value: a write made after watch() returns
        # cannot then replace it before it was read (history-1 buckets).
        self._it.start(hold_first=5.0 if initial and not self._marker_due else None)

    def _decode(self, msg: Msg) -> tuple[T | Exception, int, bool]:
        """``(item, messages still pending after it, is a delete or purge)``.

        An item that cannot be decoded is given as the exception to raise: the
        watch's place (the end of the initial values) is kept before it is raised.
        """
        raise NotImplementedError

    def next(self, timeout: TimeoutArg = None) -> T | None:
        """The next item, or ``None`` for the end of the initial values.

        Raises:
            TimeoutError: nothing within ``timeout`` seconds (``None``: wait for ever).
            BadSubscriptionError: the watcher was stopped.
        """
        if self._marker_due:
            self._marker_due = False
            self._init_done = True
            return None
        deadline = Deadline.of(timeout, None)
        while True:
            item, pending, deleted = self._decode(self._it.next(timeout=deadline.remaining()))
            if not self._init_done and pending == 0:
                self._marker_due = True  # this was the last initial value
            if self._ignore_deletes and deleted:
                if self._marker_due:
                    self._marker_due = False
                    self._init_done = True
                    return None
                continue
            if isinstance(item, Exception):
                raise item
            return item

    def updates(self, timeout: float | None = 5.0) -> T | None:
        """nats-py's name for :meth:`next`."""
        return self.next(timeout)

    def __iter__(self) -> Iterator[T | None]:
        while True:
            try:
                yield self.next()
            except BadSubscriptionError:
                return

    def stop(self) -> None:
        """End the watch (thread-safe; deletes its server-side consumer)."""
        self._it.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
