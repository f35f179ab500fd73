"""The one dispatcher of user code, and the one timer of internal deadlines.

**Dispatcher.** Every piece of user code the library calls (subscription
callbacks, connection event callbacks, ``consume()`` handlers, done-callbacks
of publish futures, service handlers) runs here, never on the reader thread.
Work comes in *lanes*: the items of one lane run one at a time and in order
(a subscription's messages), different lanes run in parallel on a pool of
worker threads that grows on demand up to ``max_workers`` and shrinks when
idle. Each lane scheduled is promised a worker of its own (an idle one, else
a new one) until ``max_workers`` are busy: a callback that blocks holds back
its own lane only, so a callback may wait for a reply that another lane's
callback sends. So 10,000 callback subscriptions cost as many threads as lanes
have work at once (at most ``max_workers``), not 10,000.

One exception policy: an exception from user code goes to the lane's error
handler (the client's ``error_cb``); an exception from that handler is logged.
A call that would wait for its own lane to finish (``sub.drain()`` inside the
subscription's own callback) can ask :func:`current_lane` and not wait.

**Timer.** One thread that runs *internal* callbacks at given times
(keep-alive PINGs, publish-ack expiry, heartbeat checks). Its callbacks must be
quick and never call user code; they hand user code to the dispatcher.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .._timeout import WAIT_MAX
from ..protocol._compiled import speedups

log = logging.getLogger("natsjs_sync.dispatch")

T = TypeVar("T")

_local = threading.local()

#: Items a lane runs before it lets other lanes have the worker (fairness).
_BATCH = 256


def current_lane() -> Lane[Any] | None:
    """The lane whose item this thread is running, if it is a dispatcher worker."""
    return getattr(_local, "lane", None)


def on_dispatcher_thread(dispatcher: Dispatcher | None = None) -> bool:
    """True on a worker thread (of ``dispatcher``, when given)."""
    owner = getattr(_local, "dispatcher", None)
    return owner is not None and (dispatcher is None or owner is dispatcher)


class Lane(Generic[T]):
    """Items run in order by ``handler``, one at a time, on the dispatcher's workers.

    :attr:`put` may be called from any thread and never blocks and never runs
    the handler itself. Thread-safe.
    """

    __slots__ = ("_dispatcher", "_handler", "_items", "_on_error", "_scheduled", "closed", "name", "put", "queued")

    def __init__(self, dispatcher: Dispatcher, handler: Callable[[T], None], name: str,
                 on_error: Callable[[BaseException], None] | None):
        self._dispatcher = dispatcher
        self._handler = handler
        self._items: deque[T] = deque()
        #: ``len(lane)`` as a compiled callable (the deque's own): a subscription's inlet
        #: asks it for every message it queues, without a Python call.
        self.queued: Callable[[], int] = self._items.__len__
        # Held while the lane is scheduled or running: taking it (without waiting)
        # is the one atomic "schedule it unless it already is".
        self._scheduled = threading.Lock()
        self._on_error = on_error
        self.closed = False
        self.name = name
        #: Queue ``item``; a worker runs the handler on it soon, after the items before it.
        #: :meth:`_put`, in one compiled call where the extension is in use: the reader
        #: thread puts every message of a callback subscription or a consume() here.
        self.put: Callable[[T], None] = (
            self._put if speedups is None or type(dispatcher) is not Dispatcher
            else speedups.LanePut(self, self._items, self._scheduled, dispatcher))

    def __len__(self) -> int:
        return len(self._items)

    def _put(self, item: T) -> None:
        """:attr:`put` (the reference of the compiled ``LanePut``: a change here, with
        :meth:`Dispatcher._schedule`, is made there too)."""
        self._items.append(item)
        # A lane already scheduled will find the item: the worker re-checks the
        # queue after releasing _scheduled (see _run), so no item is stranded.
        if self._scheduled.acquire(False):
            self._dispatcher._schedule(self)

    def close(self) -> None:
        """Drop queued items; nothing more runs (the item running now finishes)."""
        self.closed = True
        self._items.clear()

    def _run(self, budget: int) -> bool:
        """Run up to ``budget`` items; True when items remain (still scheduled)."""
        items = self._items
        handler = self._handler
        n = 0
        while True:
            if self.closed:
                items.clear()
            try:
                item = items.popleft()
            except IndexError:
                self._scheduled.release()
                # An item put just before the release found the lane scheduled:
                # take the lane back for it, unless that put scheduled it anew.
                if items and self._scheduled.acquire(False):
                    continue
                return False
            try:
                handler(item)
            except BaseException as exc:  # user code: report, never kill the worker
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                self._report(exc)
            n += 1
            if n >= budget and items:
                return True

    def _report(self, exc: BaseException) -> None:
        if self._on_error is None:
            self._dispatcher.log.error("exception in %s", self.name, exc_info=exc)
            return
        try:
            self._on_error(exc)
        except Exception:
            self._dispatcher.log.exception("exception in the error handler of %s", self.name)

    def __repr__(self) -> str:
        return f"<Lane {self.name} queued={len(self._items)}>"


class Dispatcher:
    """A pool of worker threads running lanes. Thread-safe.

    Args:
        name: thread names are ``natsjs-<role>-<name>-N``.
        max_workers: the most threads at once (a callback that blocks holds one).
        idle_timeout: seconds a worker beyond the first waits for work before it ends.
        role: the role in the thread names (``dispatch``: the client's one
            dispatcher of user code).
        keep_one: keep the first worker while idle (the dispatcher of user code
            does); otherwise the last worker ends too after ``idle_timeout``.
        batch: items a lane runs before it lets the other lanes queued have the
            worker. Many quick items (messages) pass cheaply in batches; items
            that each may wait long (errands) take turns one by one, so one
            owner's work never keeps other owners' waiting behind all of its own.
    """

    def __init__(self, name: str, max_workers: int = 64, idle_timeout: float = 10.0, role: str = "dispatch",
                 keep_one: bool = True, batch: int = _BATCH):
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self._batch = batch
        self.name = name
        self.max_workers = max_workers
        self._role = role
        self._keep = 1 if keep_one else 0
        #: Where exceptions are logged (the connection's adapter, see :mod:`.logs`).
        self.log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log
        self._idle_timeout = idle_timeout
        self._runq: queue.SimpleQueue[Lane[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers: set[threading.Thread] = set()
        # One entry per worker waiting for work that no scheduled lane has
        # claimed yet. Scheduling a lane takes an entry (or starts a worker), so
        # an idle worker is promised to one lane only: two lanes scheduled in one
        # burst never both count on it and leave the second to wait behind
        # whatever the first runs. list append/pop are atomic: no lock per hand-off.
        self._idle: list[None] = []
        # Lanes queued with no worker promised (every worker was busy at
        # max_workers): the next worker to finish takes one instead of
        # announcing itself idle. Changed under _lock.
        self._unclaimed = 0
        self._closed = False
        self._serial = itertools.count(1)

    def lane(self, handler: Callable[[T], None], name: str,
             on_error: Callable[[BaseException], None] | None = None) -> Lane[T]:
        """A new lane whose items ``handler`` runs in order."""
        return Lane(self, handler, name, on_error)

    def call(self, lane: Lane[Callable[[], None]], fn: Callable[[], None]) -> None:
        """Run ``fn()`` on ``lane`` (a lane of plain callables)."""
        lane.put(fn)

    @property
    def threads(self) -> int:
        return len(self._workers)

    def _schedule(self, lane: Lane[Any]) -> None:
        # Its steps are the compiled LanePut's too (see Lane.put).
        self._runq.put(lane)
        try:
            self._idle.pop()  # an idle worker is promised to this lane
        except IndexError:
            self._spawn()

    def _spawn(self) -> None:
        """Promise a worker to a lane just queued: an idle one, a new one, or the next to finish."""
        with self._lock:
            if self._closed:
                return
            try:
                self._idle.pop()  # a worker went idle since _schedule looked
                return
            except IndexError:
                pass
            if len(self._workers) >= self.max_workers:
                self._unclaimed += 1
                return
            # Not counted idle: it starts on the lane it was made for. Started under the
            # lock: close() joins every worker it finds, and joining a thread not yet
            # started raises (a close racing a spawn failed with RuntimeError). The new
            # thread takes the lock only once it runs, so starting it here cannot deadlock.
            t = threading.Thread(target=self._work, name=f"natsjs-{self._role}-{self.name}-{next(self._serial)}",
                                 daemon=True)
            self._workers.add(t)
            t.start()

    def _claim_unclaimed(self) -> bool:
        """A worker that finished: take a lane queued with no worker promised, if any."""
        if not self._unclaimed:  # the common case: no lock
            return False
        with self._lock:
            if self._unclaimed:
                self._unclaimed -= 1
                return True
        return False

    def _work(self) -> None:
        me = threading.current_thread()
        _local.dispatcher = self
        runq = self._runq
        lock = self._lock
        idle = self._idle
        try:
            while True:
                try:
                    lane = runq.get(timeout=self._idle_timeout)
                except queue.Empty:
                    with lock:
                        # Not while lanes count on the next worker to finish:
                        # an entry may then stand for a worker that is busy.
                        if (len(self._workers) > self._keep and not self._unclaimed) or self._closed:
                            try:
                                idle.pop()  # no longer waiting: withdraw the entry
                            except IndexError:
                                continue  # every entry is promised: a lane is on its way
                            self._workers.discard(me)
                            return
                    continue
                if lane is None:
                    with lock:
                        self._workers.discard(me)
                    return
                _local.lane = lane
                try:
                    more = lane._run(self._batch)
                finally:
                    _local.lane = None
                if more:
                    # Let other lanes in, then carry on: this worker stays
                    # promised to one queued lane, so no entry changes hands.
                    runq.put(lane)
                elif not self._claim_unclaimed():
                    idle.append(None)
        finally:
            _local.dispatcher = None

    def close(self, timeout: float | None = 2.0) -> None:
        """Finish what is queued, then stop the workers (waits up to ``timeout``).

        Called from a worker, it does not wait for that worker.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
        for _ in workers:
            self._runq.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        me = threading.current_thread()
        for t in workers:
            if t is me:
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            t.join(left)

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist here."""
        self._runq = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = set()
        self._idle = []
        self._unclaimed = 0
        self._closed = False


class TimerHandle:
    """A scheduled call; :meth:`cancel` stops it (and any repeats)."""

    __slots__ = ("cancelled", "fn", "interval", "when")

    def __init__(self, when: float, fn: Callable[[], None], interval: float | None):
        self.when = when
        self.fn = fn
        self.interval = interval
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: TimerHandle) -> bool:
        return self.when < other.when


class Timer:
    """Runs internal callbacks at monotonic times on one thread, started on first use.

    Callbacks must be quick and must not call user code. Thread-safe.
    """

    def __init__(self, name: str):
        self.name = name
        #: Where a failed callback is logged (the connection's adapter, see :mod:`.logs`).
        self.log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[TimerHandle] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def call_at(self, when: float, fn: Callable[[], None], interval: float | None = None) -> TimerHandle:
        handle = TimerHandle(when, fn, interval)
        with self._cond:
            if self._closed:
                handle.cancelled = True
                return handle
            heapq.heappush(self._heap, handle)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"natsjs-timer-{self.name}", daemon=True)
                self._thread.start()
            elif self._heap[0] is handle:
                self._cond.notify()
        return handle

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        return self.call_at(time.monotonic() + delay, fn)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that runs the callbacks (None before the first)."""
        return self._thread

    def call_every(self, interval: float, fn: Callable[[], None], first: float | None = None) -> TimerHandle:
        """Call ``fn`` every ``interval`` seconds (first after ``first``, default ``interval``)."""
        if interval <= 0:
            raise ValueError("interval must be > 0")
        return self.call_at(time.monotonic() + (interval if first is None else first), fn, interval)

    def _run(self) -> None:
        cond = self._cond
        heap = self._heap
        while True:
            with cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    while heap and heap[0].cancelled:
                        heapq.heappop(heap)
                    if heap and heap[0].when <= now:
                        handle = heapq.heappop(heap)
                        if handle.interval is not None:
                            handle.when = max(now, handle.when + handle.interval)
                            heapq.heappush(heap, handle)
                        break
                    # A call so far ahead that no wait accepts it (a huge ack
                    # timeout) never comes due: wait for a nearer one instead of
                    # letting OverflowError end this thread and every timer with it.
                    delay = None if not heap else heap[0].when - now
                    cond.wait(delay if delay is None or delay < WAIT_MAX else None)
            try:
                handle.fn()
            except Exception:
                self.log.exception("internal timer callback failed")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(2.0)

    def reset_after_fork(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap = []
        self._thread = None
        self._closed = False
