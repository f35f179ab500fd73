"""Subscriptions: a bounded queue per subscription, read by an iterator or a callback."""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from ._core.inlet import Inlet
from ._core.options import DEFAULT_PENDING_BYTES_LIMIT, DEFAULT_PENDING_MSGS_LIMIT, UNLIMITED
from ._timeout import USE_DEFAULT, Deadline, TimeoutArg, resolve
from ._typed_reads import TypedReads
from .errors import BadSubscriptionError, ConnectionClosedError, SlowConsumerError, TimeoutError
from .msg import Msg

_T = TypeVar("_T")

if TYPE_CHECKING:
    from ._core.connection import Connection
    from ._core.dispatch import Lane

MsgHandler = Callable[[Msg], None]
#: Reader-thread filter of a subscription (JetStream status messages): False drops the message.
StatusFilter = Callable[["Subscription", Msg], bool]

__all__ = ["DEFAULT_PENDING_BYTES_LIMIT", "DEFAULT_PENDING_MSGS_LIMIT", "Control", "MsgHandler", "Subscription"]

# Placed in a subscription's queue to wake readers when it ends.
_END = object()
_WAKE = object()  # wakes one next_msg() waiter with a TimeoutError (internal use)


class Control:
    """An action queued among a subscription's messages, run by the reader of
    the queue when it gets there (e.g. a flow-control reply sent once the
    messages before it were handed to the user)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn

    def run(self) -> None:
        try:
            self.fn()
        except Exception:
            pass  # a failed control reply must not break reading


_OPEN, _DRAINING, _DRAINED, _UNSUBSCRIBED, _CLOSED = range(5)


class Subscription(TypedReads):
    """An interest in a subject. Thread-safe.

    Messages wait in a bounded queue. Read them with :meth:`next_msg` or by
    iterating; or pass ``cb=`` to :meth:`Client.subscribe` and the client's
    dispatcher calls it for each message in order (on a worker thread shared
    with other subscriptions, never two messages of one subscription at once).
    The client's reader thread only ever enqueues: when the queue is over its
    pending limits the message is dropped for this subscription, counted in
    :attr:`dropped`, and a :class:`SlowConsumerError` is reported to the
    client's ``error_cb`` once per episode (until a message fits again).
    """

    def __init__(
        self,
        conn: Connection,
        sid: int,
        subject: str,
        queue_group: str | None = None,
        cb: MsgHandler | None = None,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
        status_filter: StatusFilter | None = None,
    ):
        self._conn = conn
        self.sid = sid
        self.subject = subject
        self.queue = queue_group
        self._cb = cb
        self._q: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lane: Lane[object] | None = None
        if cb is not None:
            self._lane = lane = conn.lane(self._handle, f"sub{sid}-{subject}")
            put, qsize = lane.put, lane.queued
        else:
            put, qsize = self._q.put, self._q.qsize
        self._filter = status_filter
        # The reader-thread end: counts, applies the pending limits, enqueues.
        # Its counters are written by the reader thread, except bytes_out, which
        # the consuming side adds to (bytes_in - bytes_out = pending bytes).
        self._inlet = inlet = Inlet(put, qsize, pending_msgs_limit, pending_bytes_limit,
                                    functools.partial(_report_slow, conn, subject, sid))
        # The consuming end: next_msg's common case is one call of inlet.take.
        inlet.on_take = self._take_other
        if cb is None:
            inlet.get = self._q.get
            inlet.takeable = 1
        #: What the reader thread calls for each message of this subscription.
        self.route: Callable[[Msg], None] = self._inlet if status_filter is None else self.deliver
        self._forked = False
        self._state = _OPEN
        # The user ended it: unsubscribe(), or a drain() that returned. From then on
        # unsubscribe() and drain() refuse it (a drain that raised may be repeated).
        self._ended_by_user = False
        self._done = threading.Event()

    # ---------------------------------------------------------------- reader side

    def deliver(self, msg: Msg) -> None:
        """Reader thread: filter, then enqueue or drop. Never blocks, never runs user code.

        (Without a status filter the reader calls the inlet directly: :attr:`route`.)
        """
        inlet = self._inlet
        if inlet.closed:
            return
        if self._filter is not None and not self._filter(self, msg):
            return
        inlet(msg)

    def enqueue_control(self, fn: Callable[[], None]) -> None:
        """Reader thread: run ``fn`` on the consuming side once the items before it were read."""
        item = Control(fn)
        if self._lane is not None:
            self._lane.put(item)
        else:
            self._q.put(item)

    def remaining(self) -> int | None:
        """Messages left before the server unsubscribes it (``None``: no limit)."""
        inlet = self._inlet
        return None if inlet.max < 0 else inlet.max - inlet.received

    def set_max(self, limit: int) -> None:
        """Connection side: end the subscription after ``limit`` messages in all (``unsubscribe(limit)``)."""
        inlet = self._inlet
        inlet.on_max = self._max_reached
        inlet.max = limit

    def _max_reached(self) -> None:
        """Reader thread: the last message of ``unsubscribe(limit)`` arrived."""
        self._conn.remove_subscription(self.sid)
        self.finish_drained()

    # ---------------------------------------------------------------- ending

    def _end(self, state: int) -> None:
        current = self._state
        # A drained subscription can still be unsubscribed (one that ended at its
        # message limit: see ended_at_limit), which drops what is queued.
        if current in (_UNSUBSCRIBED, _CLOSED) or (current == _DRAINED and state != _UNSUBSCRIBED):
            return
        self._state = state
        inlet = self._inlet
        inlet.closed = 1  # the reader hands it nothing more
        if state == _UNSUBSCRIBED:
            inlet.takeable = 0  # next_msg raises at once (what is queued is dropped)
        lane = self._lane
        if lane is None:
            self._q.put(_END)
            self._done.set()
        elif state == _DRAINED:
            lane.put(_END)  # handled after what is queued; sets _done
        else:
            lane.close()
            self._done.set()

    def finish_drained(self) -> None:
        """No more messages will come: readers see the end once the queue is read."""
        self._end(_DRAINED)

    def finish_unsubscribed(self) -> None:
        """Ended by unsubscribe(): what is queued is dropped."""
        self._ended_by_user = True
        self._end(_UNSUBSCRIBED)

    def finish_closed(self) -> None:
        """The client closed: readers get ConnectionClosedError once the queue is read."""
        self._end(_CLOSED)

    def mark_draining(self) -> None:
        """Connection side: a drain started; queued messages are still delivered, then the end."""
        if self._state == _OPEN:
            self._state = _DRAINING

    def disown_after_fork(self) -> None:
        """In a forked child: this subscription belongs to the parent. Its queue
        is not ours (a parent thread may have held its lock), so it is replaced
        and every read ends at once."""
        inlet = self._inlet
        inlet.closed = 1
        inlet.takeable = 0
        self._q = queue.SimpleQueue()
        self._q.put(_END)
        inlet.get = self._q.get
        self._lane = None
        self._state = _UNSUBSCRIBED
        self._forked = True
        self._done = threading.Event()
        self._done.set()

    # ---------------------------------------------------------------- user side

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed to the user."""
        if self._lane is not None:
            return len(self._lane)
        return max(0, self._q.qsize() - (1 if self._state >= _DRAINED else 0))

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet handed to the user."""
        inlet = self._inlet
        return max(0, inlet.bytes_in - inlet.bytes_out)

    @property
    def delivered(self) -> int:
        """Messages received from the server (dropped ones included)."""
        return self._inlet.received

    @property
    def dropped(self) -> int:
        """Messages dropped because the pending limits were reached."""
        return self._inlet.dropped

    @property
    def is_valid(self) -> bool:
        """False once the subscription is unsubscribed, drained or closed."""
        return self._state in (_OPEN, _DRAINING)

    @property
    def ended_at_limit(self) -> bool:
        """True when the subscription ended because its message limit (``max_msgs=``,
        ``unsubscribe(limit=)``) was reached, and the user has not ended it since."""
        inlet = self._inlet
        return self._state == _DRAINED and not self._ended_by_user and 0 <= inlet.max <= inlet.received

    @property
    def is_draining(self) -> bool:
        """True while the subscription drains (no new messages; the queued ones are still delivered)."""
        return self._state == _DRAINING

    @property
    def has_callback(self) -> bool:
        """True when messages go to a callback (``subscribe(cb=...)``), not to :meth:`next_msg`."""
        return self._lane is not None

    @property
    def lane(self) -> Lane[object] | None:
        """The dispatcher lane running this subscription's callback (``None`` without one)."""
        return self._lane

    def set_pending_limits(self, msgs: int, bytes_: int) -> None:
        """Change the pending limits (messages, bytes); ``0`` or a negative value means no limit."""
        self._inlet.msgs_limit = msgs if msgs > 0 else UNLIMITED
        self._inlet.bytes_limit = bytes_ if bytes_ > 0 else UNLIMITED

    def next_msg(self, timeout: TimeoutArg = 1.0) -> Msg:
        """Wait for the next message.

        Args:
            timeout: seconds to wait; ``None`` waits for ever.

        Raises:
            TimeoutError: no message in time.
            BadSubscriptionError: the subscription ended (unsubscribed or drained and empty).
            ConnectionClosedError: the client closed.
        """
        try:
            msg: Msg = self._inlet.take(timeout)  # the common case in one call (compiled where built)
            return msg
        except queue.Empty:  # only from take's own wait, which takes a plain number of seconds
            self._timed_out(timeout)

    def _timed_out(self, timeout: TimeoutArg) -> NoReturn:
        """Raise :meth:`next_msg`'s error for a wait of ``timeout`` seconds that took nothing."""
        raise TimeoutError(f"no message on {self.subject!r} within {float(timeout)} s") from None  # type: ignore[arg-type]

    def _next_msg_parts(self) -> tuple[Callable[[TimeoutArg], Msg], type[BaseException],
                                       Callable[[TimeoutArg], NoReturn]] | None:
        """:meth:`next_msg` in parts for a compiled caller: ``(take, empty, timed_out)``.

        ``take(timeout)`` is the message, or raises ``empty`` when its wait
        timed out; ``timed_out(timeout)`` then raises the error :meth:`next_msg`
        raises. ``None`` when :meth:`next_msg` is not the library's own: a
        subclass's, a function put on the class in its place (by a tracing or
        test library), or one set on this subscription.
        """
        if type(self).next_msg is not _NEXT_MSG or "next_msg" in self.__dict__:
            return None
        return self._inlet.take, queue.Empty, self._timed_out

    def _take_other(self, timeout: TimeoutArg, item: object) -> Msg:
        """:meth:`next_msg` beyond the common case (the inlet's ``on_take``): ``item``
        is a control item ``take`` got from the queue, or None when it took nothing."""
        t = resolve(timeout, 1.0)
        if item is None:
            if self._lane is not None:
                raise BadSubscriptionError("next_msg() cannot be used on a subscription with a callback")
            if self._state == _UNSUBSCRIBED:
                if self._forked:
                    raise BadSubscriptionError(
                        f"subscription to {self.subject!r} was made in the parent process before fork(); "
                        "subscribe again in this process"
                    )
                raise BadSubscriptionError(f"subscription to {self.subject!r} is unsubscribed")
            try:
                item = self._q.get(timeout=t)
            except queue.Empty:
                raise TimeoutError(f"no message on {self.subject!r} within {t} s") from None
        msg = self._unwrap(item)
        if msg is None:
            deadline = Deadline(t)
            try:
                while msg is None:  # rare (flow control): the rest of the budget
                    msg = self._unwrap(self._q.get(timeout=deadline.remaining()))
            except queue.Empty:
                raise TimeoutError(f"no message on {self.subject!r} within {t} s") from None
        return msg

    def _unwrap(self, item: object) -> Msg | None:
        """A queue item -> the message, or None after running a control item."""
        if item is _END:
            self._q.put(_END)  # every other waiting reader must wake too
            if self._state == _CLOSED:
                raise ConnectionClosedError("the connection is closed")
            raise BadSubscriptionError(f"subscription to {self.subject!r} has ended")
        if item is _WAKE:
            raise TimeoutError(f"woken while waiting on {self.subject!r}")
        if type(item) is Control:
            item.run()
            return None
        msg: Msg = item  # type: ignore[assignment]
        self._inlet.bytes_out += len(msg.data)
        return msg

    def poll(self) -> Msg | None:
        """A message already queued, else None at once (for iterators built on this)."""
        try:
            item = self._q.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, Msg):  # the common case, inline
            self._inlet.bytes_out += len(item.data)
            return item
        return self._unwrap(item)

    def wake(self) -> None:
        """Make one waiting (or the next) ``next_msg`` raise TimeoutError after the
        messages already queued: lets an iterator built on this see a state change."""
        self._q.put(_WAKE)

    def __iter__(self) -> Iterator[Msg]:
        """Yield messages until the subscription ends (no timeout)."""
        while True:
            try:
                yield self.next_msg(timeout=None)
            except (BadSubscriptionError, ConnectionClosedError):
                return

    @property
    def messages(self) -> Iterator[Msg]:
        """The same as iterating the subscription (nats-py's ``sub.messages``)."""
        return iter(self)


    def unsubscribe(self, limit: int | None = None) -> None:
        """Stop receiving.

        Args:
            limit: when given, stop after that many messages in all (the server
                is told, so nothing more is sent), else stop now and discard the queue.

        Raises:
            BadSubscriptionError: it was unsubscribed or drained already. One that ended
                because its message limit was reached is accepted (as by nats-py): the
                end is expected, and the call releases what is still queued.
            ConnectionClosedError: the client is closed.
        """
        self._conn.unsubscribe(self, limit)

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stop interest, then let queued messages be read or handled before ending.

        Blocks until the callback has handled everything queued (callback
        subscriptions) or until the server confirmed the unsubscribe
        (iterators: read on to the end), or for ``timeout`` (default: the
        client's drain timeout). Called from the subscription's own callback it
        returns without waiting: the rest of the queue is handled after the
        callback returns.

        Raises:
            BadSubscriptionError: it was unsubscribed, or drained by an earlier
                ``drain`` that returned (as nats-py raises).
            TimeoutError: not drained in time. The subscription has ended all
                the same (as in nats.go): nothing more is taken for it, a
                reconnect does not restore it, what is queued can still be
                read; calling ``drain`` again waits again for a callback to
                handle its queue.
        """
        if self._ended_by_user:
            raise BadSubscriptionError(f"subscription to {self.subject!r} has already ended")
        self._conn.drain_subscription(self, Deadline.of(timeout, self._conn.options.drain_timeout))
        self._ended_by_user = True

    def wait_done(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: no limit) for the subscription to end and its
        queue to be consumed; True when it has.
        """
        return self._done.wait(resolve(timeout, None))  # the timeout rule: a huge one is no limit

    # ---------------------------------------------------------------- callback side

    def _handle(self, item: object) -> None:
        """Dispatcher lane: one queued item."""
        if item is _END:
            self._done.set()
            return
        if self._state in (_UNSUBSCRIBED, _CLOSED):
            return
        if type(item) is Control:
            item.run()
            return
        msg: Any = item
        self._inlet.bytes_out += len(msg.data)
        self._cb(msg)  # type: ignore[misc]  # exceptions go to error_cb via the lane

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription sid={self.sid} subject={self.subject!r}{q}>"


#: The library's own Subscription.next_msg, as defined (what _next_msg_parts takes apart).
_NEXT_MSG = Subscription.next_msg


def _report_slow(conn: Connection, subject: str, sid: int, dropped: int) -> None:
    """Reader thread (an inlet's ``on_slow``): the first drop of a slow-consumer episode."""
    conn.report_error(SlowConsumerError(f"slow consumer on subject {subject!r} (sid {sid}): dropping messages",
                                        subject=subject, sid=sid, dropped=dropped))
