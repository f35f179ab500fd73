"""The reader-thread end of a subscription's queue, and the reader's run of messages.

An :data:`Inlet` is what the reader thread calls for each message of a plain
subscription (its route): it counts the message and puts it on the queue, or,
over the pending limits, drops it and reports the first drop of an episode.
The subscription keeps its counters there, so the reader-thread side of a
delivery runs no Python code where the compiled extension is built.

:func:`route_run_py` is the reader's inner loop over a read's events: every
message up to the next other event is counted, then goes to its route.

Both have compiled twins in ``protocol/_speedups.c``; the classes and
functions here are the reference and what runs without a compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._timeout import WAIT_MAX
from ..msg import Msg
from ..protocol._compiled import twin
from .options import UNLIMITED


class InletPy:
    """A subscription's reader-side end (Python twin of ``_speedups.Inlet``).

    Args:
        put: enqueues one item (the queue's or the dispatcher lane's ``put``).
        qsize: the number of items queued.
        msgs_limit, bytes_limit: pending limits (:data:`~.options.UNLIMITED`: none).
        on_slow: called with the dropped count at the first drop of an episode.

    Attributes read and written by the subscription: ``received``, ``bytes_in``,
    ``bytes_out`` (the consuming side adds what it hands over), ``dropped``,
    ``slow``, ``closed`` (nonzero: take nothing more), ``max`` (-1: no limit)
    and ``on_max`` (called once ``max`` messages were received).

    The consuming side's common case is :meth:`take`, for which the
    subscription sets ``get`` (its queue's), ``on_take`` (the other cases)
    and ``takeable`` (nonzero while ``take`` may wait on ``get`` itself).
    """

    __slots__ = ("bytes_in", "bytes_limit", "bytes_out", "closed", "dropped", "get", "max", "msgs_limit", "on_max",
                 "on_slow", "on_take", "put", "qsize", "received", "slow", "takeable")

    def __init__(self, put: Callable[[Any], None], qsize: Callable[[], int], msgs_limit: int, bytes_limit: int,
                 on_slow: Callable[[int], None] | None = None):
        self.put = put
        self.qsize = qsize
        self.msgs_limit = msgs_limit
        self.bytes_limit = bytes_limit
        self.on_slow = on_slow
        self.on_max: Callable[[], None] | None = None
        self.received = self.bytes_in = self.bytes_out = self.dropped = 0
        self.max = -1
        self.closed = self.slow = 0
        self.get: Callable[[bool, float | None], Any] | None = None
        self.on_take: Callable[[Any, Any], Any] | None = None
        self.takeable = 0

    def __call__(self, msg: Any) -> None:
        if self.closed:
            return
        size = len(msg.data)
        self.received += 1
        over = self.bytes_in - self.bytes_out + size > self.bytes_limit
        if not over and self.msgs_limit < UNLIMITED:
            over = self.qsize() >= self.msgs_limit
        if over:
            self.dropped += 1
            if not self.slow:
                self.slow = 1
                if self.on_slow is not None:
                    self.on_slow(self.dropped)
        else:
            self.slow = 0  # the episode is over; the next one is reported again
            self.bytes_in += size
            self.put(msg)
        if self.max >= 0 and self.received >= self.max and self.on_max is not None:
            self.on_max()

    def take(self, timeout: Any) -> Any:
        """The next message, for a consumer waiting up to ``timeout`` seconds.

        When ``takeable`` and ``timeout`` is ``None`` or a number of seconds in
        [0, ``WAIT_MAX``) (the longest wait ``threading`` accepts), waits on
        ``get(True, timeout)`` (``queue.Empty`` from it propagates) and returns a
        message, adding its size to ``bytes_out``.
        Anything else goes to ``on_take(timeout, item)``: ``item`` is what
        ``get`` returned when it was not a message, or ``None`` when nothing
        was taken.
        """
        on_take = self.on_take
        if on_take is None:
            raise TypeError("the inlet has no on_take")
        get = self.get
        fast = self.takeable and get is not None
        if fast and timeout is not None:
            cls = timeout.__class__
            if cls is float:
                fast = 0 <= timeout < WAIT_MAX
            elif cls is int:
                try:
                    fast = 0 <= float(timeout) < WAIT_MAX
                except OverflowError:  # too large: Python's rule words the error
                    fast = False
            else:
                fast = False
        if fast:
            item = get(True, timeout)  # type: ignore[misc]
            if isinstance(item, Msg):
                self.bytes_out += len(item.data)
                return item
            return on_take(timeout, item)
        return on_take(timeout, None)


def route_run_py(events: list[Any], start: int, routes: dict[int, Callable[[Any], None]], cls: Any,
                 stats: Any) -> int:
    """Route the run of messages at ``events[start:]``.

    The run is every event up to the first that is not an instance of exactly
    ``cls``; returns that event's index (``len(events)`` when there is none).
    The run is counted in ``stats.in_msgs`` and ``stats.in_bytes`` before any
    of it is routed (a message a user is handed was counted), then each
    message goes to ``routes.get(msg.sid)``, if any.
    """
    stop = start
    n = len(events)
    nbytes = 0
    while stop < n:
        ev: Any = events[stop]
        if ev.__class__ is not cls:
            break
        nbytes += len(ev.data)
        stop += 1
    if stop > start:
        stats.in_msgs += stop - start
        stats.in_bytes += nbytes
    get = routes.get
    for i in range(start, stop):
        ev = events[i]
        route = get(ev.sid)
        if route is not None:
            route(ev)
    return stop


#: The class used for subscriptions' inlets: compiled where built.
Inlet: type[InletPy] = twin("Inlet", InletPy)
route_run: Callable[[list[Any], int, dict[int, Callable[[Any], None]], Any, Any], int] = twin(
    "route_run", route_run_py)
