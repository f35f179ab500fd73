"""Pipelined (async) publishing: many publishes in flight, each settled by its PubAck.

:meth:`JetStream.publish_async` sends without waiting and returns a
:class:`concurrent.futures.Future`. Every JetStream context of a client shares
one :class:`AckMux`: one inbox subscription whose acks are decoded and settled
right on the reader thread (a C-level decode, no user code), so a future is
settled the moment its ack arrives and before anyone waiting for "all
complete" wakes. Done-callbacks (user code) run on the client's dispatcher;
ack timeouts are expired by the client's timer at the next deadline. Each
context has its own :class:`PublishWindow`: at most ``max_pending`` of its
publishes are in flight, the next one blocks (up to ``stall_wait``) until acks
free room. A context owns no thread and no subscription, so contexts are cheap;
releasing one (:meth:`AckMux.release`) fails what it has pending, and the mux
unsubscribes its inbox once no context is left publishing.
:class:`PublishPipeline` is the one owner of "publish in a window, then settle
all" for the layers above (the object store's chunks).

It is apart from :mod:`.publish` (the PubAck and the publish that waits for it,
one request each) because it keeps state shared between threads: a lock,
windows, a timer and an inbox subscription per client.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .._core.spi import CoreLink, Handle
from .._timeout import Deadline
from ..errors import (
    ConnectionClosedError,
    JetStreamError,
    JetStreamPublisherClosedError,
    NatsError,
    NoRespondersError,
    OutboundBufferLimitError,
    PubAckTimeoutError,
    TimeoutError,
    TooManyStalledMsgsError,
)
from ..msg import Msg
from ..protocol.headers import HeadersInput
from ..protocol.jetstream.status import is_no_responders
from .pub_futures import _FINISHED, _PENDING, PUB_FUTURE, _PubFuture, _settle
from .publish import PubAck, _fast_pub_ack, parse_pub_ack

if TYPE_CHECKING:
    from .._core.dispatch import Lane, TimerHandle


class PublishWindow:
    """One JetStream context's async publishes in flight (guarded by the mux's lock).

    ``pending`` holds token -> future in the order they were sent; with one ack
    timeout per window that is also deadline order.
    """

    def __init__(self, mux: AckMux, max_pending: int, stall_wait: float, ack_timeout: float,
                 retry_attempts: int = 2, retry_wait: float = 0.25):
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.mux = mux
        #: Sends again when nobody answered (503: a stream leader election), as nats.go does.
        self.retry_attempts = retry_attempts
        self.retry_wait = retry_wait
        self.max_pending = max_pending
        self.low_water = max_pending * 3 // 4
        self.stall_wait = stall_wait
        self.ack_timeout = ack_timeout
        self.pending: collections.OrderedDict[str, _PubFuture] = collections.OrderedDict()
        self.room = threading.Condition(mux.lock)
        self.empty = threading.Condition(mux.lock)
        self.stalled = 0
        self.released = False  #: its context let it go: it takes no more publishes

    def publish(self, subject: str, payload: bytes, headers: HeadersInput | None,
                stall_wait: float | None = None) -> Future[PubAck]:
        return self.mux.publish(self, subject, payload, headers, stall_wait)

    def wait_complete(self, deadline: Deadline) -> None:
        """Block until every publish of this window is settled (acknowledged, failed or expired)."""
        with self.mux.lock:
            while self.pending:
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{len(self.pending)} async publishes still pending")
                self.empty.wait(remaining)

    def after_fork_in_child(self, lock: threading.Lock) -> None:
        self.pending.clear()
        self.room = threading.Condition(lock)
        self.empty = threading.Condition(lock)
        self.stalled = 0


class AckMux:
    """The one inbox for async PubAcks of a client, shared by all its contexts. Thread-safe."""

    def __init__(self, core: CoreLink):
        self._core = core
        self.lock = threading.Lock()
        self.futures_cond = threading.Condition(threading.RLock())  # shared by every _SharedConditionFuture
        self._future = PUB_FUTURE  # chosen at import; kept per mux so a test can pick the plain one
        self._owner: dict[str, PublishWindow] = {}
        self._windows: weakref.WeakSet[PublishWindow] = weakref.WeakSet()
        self._tokens = itertools.count(1)
        self._prefix_b = b""
        self._prefix_len = 0
        self._route: Handle | None = None
        self._lane: Lane[Callable[[], None]] = core.lane(_call, "publish callbacks")
        self._expiry: TimerHandle | None = None
        self._expiry_at = 0.0
        self._closed = False
        self._acks: collections.deque[Msg] = collections.deque()  # acks of the current socket read
        core.on_close(self._fail_all)
        core.on_drain(self._wait_all)

    def window(self, max_pending: int, stall_wait: float, ack_timeout: float, retry_attempts: int = 2,
               retry_wait: float = 0.25) -> PublishWindow:
        w = PublishWindow(self, max_pending, stall_wait, ack_timeout, retry_attempts, retry_wait)
        with self.lock:  # release() decides under it whether any window is left
            self._windows.add(w)
        return w

    def release(self, window: PublishWindow) -> None:
        """Let ``window`` go (its JetStream context released its publisher): its
        pending futures fail with JetStreamPublisherClosedError, a publish
        stalled on it raises that, and the mux forgets it. When no window is
        left, the ack inbox is unsubscribed too (the next publish makes a new one).
        Idempotent.
        """
        closed = JetStreamPublisherClosedError(
            "the JetStream context's publisher was released before the PubAck arrived")
        route: Handle | None = None
        with self.lock:
            if window.released:
                return
            window.released = True
            for token, fut in window.pending.items():
                self._owner.pop(token, None)
                _settle(fut, None, closed)
            window.pending.clear()
            window.room.notify_all()  # a stalled publisher raises
            window.empty.notify_all()  # publish_async_complete() returns
            self._windows.discard(window)
            if not self._windows:
                route, self._route = self._route, None
            if not self._owner and self._expiry is not None:
                self._expiry.cancel()
                self._expiry = None
        if route is not None:
            try:
                route.cancel()
            except NatsError:
                pass  # the connection is closed: its subscriptions are gone already

    def _start(self) -> None:
        prefix = self._core.new_inbox() + "."
        self._prefix_b = prefix.encode()
        self._prefix_len = len(prefix)
        self._route = self._core.route_internal(prefix + "*", self._on_ack)

    @property
    def pending(self) -> int:
        return len(self._owner)

    def publish(self, window: PublishWindow, subject: str, payload: bytes,
                headers: HeadersInput | None, stall_wait: float | None = None) -> Future[PubAck]:
        if self._closed:
            raise ConnectionClosedError("the connection is closed")
        token = str(next(self._tokens))
        fut = self._future(self.futures_cond, subject, self._lane)
        with self.lock:
            if window.released:
                raise JetStreamPublisherClosedError("this JetStream context's publisher was released")
            if self._route is None:
                self._start()
            if len(window.pending) >= window.max_pending:
                self._stall(window, window.stall_wait if stall_wait is None else stall_wait)
            # After any stall, and under the lock: the ack timeout starts now,
            # and deadlines enter the window in order.
            fut._deadline = deadline = time.monotonic() + window.ack_timeout
            window.pending[token] = fut
            self._owner[token] = window
            if self._expiry is None or deadline < self._expiry_at:
                self._arm(deadline)
            reply = self._prefix_b + token.encode()
            fut._retry = (payload, headers, reply)  # kept for retries and for fut.msg
            fut._retries = window.retry_attempts
        try:
            self._core.publish_with_reply(subject, payload, reply, headers)
        except BaseException:
            with self.lock:
                self._pop(token)
            raise
        return fut

    def _stall(self, window: PublishWindow, stall_wait: float) -> None:
        """Lock held, window full: wait until it is down to the low-water mark.

        Resuming at a quarter of the window free, not at each single ack,
        turns thousands of one-slot wake-ups into a few.
        """
        window.stalled += 1
        try:
            deadline = Deadline(stall_wait)
            while len(window.pending) > window.low_water and not self._closed and not window.released:
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    raise TooManyStalledMsgsError(
                        f"{window.max_pending} async publishes waited {stall_wait} s for acks (stalled)")
                window.room.wait(remaining)
        finally:
            window.stalled -= 1
        if self._closed:
            raise ConnectionClosedError("the connection is closed")
        if window.released:
            raise JetStreamPublisherClosedError("this JetStream context's publisher was released")

    def _pop(self, token: str) -> _PubFuture | None:
        """Lock held: take ``token`` out of its window, waking a stalled publisher."""
        window = self._owner.pop(token, None)
        if window is None:
            return None
        fut = window.pending.pop(token)
        if window.stalled and len(window.pending) <= window.low_water:
            window.room.notify_all()
        return fut

    def _settled(self, window: PublishWindow) -> None:
        """Lock held, after settling: wake those waiting for the window to empty."""
        if not window.pending:
            window.empty.notify_all()

    def _on_ack(self, msg: Msg) -> None:
        """Reader thread: collect an ack; the acks of one socket read are settled
        together once it is routed (:meth:`_settle_acks`)."""
        acks = self._acks
        acks.append(msg)
        if len(acks) == 1:
            self._core.after_read(self._settle_acks)

    def _settle_acks(self) -> None:
        """Reader thread, after a socket read: settle every ack it brought under
        one taking of the lock, with one wake-up per window (quick; no user code).

        One by one, the reader and a publisher waiting for room convoyed on the
        lock, taking turns for every single ack.
        """
        # Popped, not swapped: an ack appended meanwhile (by an old reader still
        # ending beside a new one) is either taken here or registers anew.
        acks = self._acks
        batch: list[Msg] = []
        pop = acks.popleft
        try:
            while True:
                batch.append(pop())
        except IndexError:
            pass
        prefix_len = self._prefix_len
        decoded: list[tuple[str, Msg, PubAck | None]] = []
        for msg in batch:
            token = msg.subject[prefix_len:]
            if msg.raw_headers is None:
                decoded.append((token, msg, _fast_pub_ack(msg.data)))
            elif is_no_responders(msg.raw_headers, msg.data) and self._retry_later(token):
                continue
            else:
                decoded.append((token, msg, None))
        if not decoded:
            return
        touched: set[PublishWindow] = set()
        owner = self._owner
        shared = self._future.shares_condition
        with self.lock, self.futures_cond:  # the order every settling path takes them in
            for token, msg, ack in decoded:
                window = owner.pop(token, None)
                if window is None:
                    continue  # expired already, or not ours
                fut = window.pending.pop(token)
                exc: BaseException | None = None
                if ack is None:
                    try:
                        ack = parse_pub_ack(msg, fut._subject)
                    except Exception as err:
                        exc = err
                # Settled before the window can look empty: "complete" means settled.
                if (exc is None and shared and fut._state is _PENDING and not fut._waiters
                        and not fut._done_callbacks):  # type: ignore[attr-defined]
                    # What set_result() does for a future nobody waits on and no
                    # callback follows (the pipelined case), without its
                    # notify_all per future: one wakes result() callers below.
                    fut._result = ack
                    fut._state = _FINISHED
                else:
                    _settle(fut, ack, exc)
                touched.add(window)
            self.futures_cond.notify_all()  # result() and exception() wait on it
            for window in touched:
                if window.stalled and len(window.pending) <= window.low_water:
                    window.room.notify_all()
                self._settled(window)

    def _retry_later(self, token: str) -> bool:
        """Reader thread, nobody answered: send again after the window's retry wait,
        if the publish has tries left (False: settle it with the error now)."""
        with self.lock:
            window = self._owner.get(token)
            fut = window.pending.get(token) if window is not None else None
            if window is None or fut is None or fut._retry is None or fut._retries <= 0:
                return False
            fut._retries -= 1
            # Its ack timeout starts again, so it goes to the back (deadline order is kept).
            fut._deadline = time.monotonic() + window.retry_wait + window.ack_timeout
            window.pending.move_to_end(token)
            payload, headers, reply = fut._retry
        subject = fut._subject

        def send_again() -> None:
            try:
                self._core.publish_with_reply(subject, payload, reply, headers)
            except NatsError as exc:
                with self.lock:
                    if self._pop(token) is fut:
                        _settle(fut, None, exc)
                        self._settled(window)

        self._core.call_later(window.retry_wait, send_again)
        return True

    def _arm(self, when: float) -> None:
        """Lock held: make the timer expire acks at ``when``."""
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = when
        self._expiry = self._core.call_later(max(0.0, when - time.monotonic()), self._expire)

    def _expire(self) -> None:
        """Timer thread: fail publishes whose ack is overdue, then wait for the next deadline."""
        now = time.monotonic()
        with self.lock:
            self._expiry = None
            nearest: float | None = None
            for window in list(self._windows):
                while window.pending:
                    token, fut = next(iter(window.pending.items()))
                    if fut._deadline > now:
                        nearest = fut._deadline if nearest is None else min(nearest, fut._deadline)
                        break
                    self._pop(token)
                    _settle(fut, None,
                            PubAckTimeoutError(f"no PubAck for {fut._subject!r} within {window.ack_timeout} s"))
                self._settled(window)
            if nearest is not None:
                self._arm(nearest)

    def _wait_all(self, deadline: Deadline) -> None:
        """Draining: wait until every async publish of the client is settled."""
        with self.lock:
            windows = [w for w in self._windows if w.pending]
        for w in windows:
            try:
                w.wait_complete(deadline)
            except NatsError:
                return

    def _fail_all(self) -> None:
        closed = ConnectionClosedError("the connection closed before the PubAck arrived")
        with self.lock:
            self._closed = True
            for window in list(self._windows):
                for fut in window.pending.values():
                    _settle(fut, None, closed)
                window.pending.clear()
                window.room.notify_all()
                window.empty.notify_all()
            self._owner.clear()
            if self._expiry is not None:
                self._expiry.cancel()

    def after_fork_in_child(self) -> None:
        """The parent's publishes are not ours: start over (a new inbox on first use)."""
        self.lock = threading.Lock()
        self.futures_cond = threading.Condition(threading.RLock())
        self._owner.clear()
        self._acks = collections.deque()
        for window in list(self._windows):
            window.after_fork_in_child(self.lock)
        self._route = None
        self._expiry = None
        self._lane = self._core.lane(_call, "publish callbacks")


def _call(fn: Callable[[], None]) -> None:
    fn()



def ack_mux(core: CoreLink) -> AckMux:
    """The client's one :class:`AckMux`."""
    return core.attachment("jetstream.acks", lambda: AckMux(core))


class PublishPipeline:
    """Many async publishes with a bounded number in flight, all settled at the end.

    "publish_async in a window, wait for the oldest, settle the rest", as the
    object store writes an object's chunks::

        with PublishPipeline(js.publish_async, 256, Deadline(60)) as pipe:
            for chunk in chunks:
                pipe.publish(subject, chunk)
        pipe.acks  # every PubAck, in order

    Leaving the block waits for every ack within ``timeout`` (one deadline for
    the whole pipeline) and raises the first error after all are settled.
    Not thread-safe: one publishing thread.
    """

    def __init__(self, publish: Callable[..., Future[PubAck]], window: int, deadline: Deadline,
                 on_ack: Callable[[PubAck], None] | None = None, resend_for: float = 0.0):
        if window < 1:
            raise ValueError("window must be >= 1")
        self._publish = publish
        self._window = window
        self._deadline = deadline
        self._inflight: collections.deque[Future[PubAck]] = collections.deque()
        self._on_ack = on_ack
        # Sending again is safe only when every message carries a msg id: the
        # caller opts in. Each message in flight keeps what it needs to be sent again.
        self._resend_for = resend_for
        self._resend_until: float | None = None
        self._sent: collections.deque[tuple[str, bytes, dict[str, Any]]] | None = (
            collections.deque() if resend_for > 0 else None)
        self.count = 0  #: PubAcks received
        self.resent = 0  #: publishes sent again after a timeout or an outage
        self.error: BaseException | None = None  #: the first failure

    def publish(self, subject: str, payload: bytes, **options: Any) -> None:
        """Publish (blocks while the window is full). Raises the first failure so far."""
        if self.error is not None:
            raise self.error
        self._send(subject, payload, options)
        while len(self._inflight) >= self._window:
            self._settle_oldest()
        if self.error is not None:
            raise self.error

    def _send(self, subject: str, payload: bytes, options: dict[str, Any]) -> None:
        if self._sent is None:
            self._inflight.append(self._publish(subject, payload, **options))
            return
        while True:
            try:
                fut = self._publish(subject, payload, **options)
            except (TimeoutError, OutboundBufferLimitError) as exc:  # stalled by an outage
                if not self._may_resend(exc):
                    raise
                if isinstance(exc, OutboundBufferLimitError):
                    time.sleep(0.05)  # the reconnect buffer is full: give the reconnect time
                continue
            self._inflight.append(fut)
            self._sent.append((subject, payload, options))
            return

    def _may_resend(self, exc: BaseException) -> bool:
        """After ``exc``: is there time left to send again (one budget per outage)?"""
        if not isinstance(exc, (TimeoutError, NoRespondersError, OutboundBufferLimitError)) and not (
                isinstance(exc, JetStreamError) and exc.code == 503):
            return False
        now = time.monotonic()
        if self._resend_until is None:
            self._resend_until = now + self._resend_for
        remaining = self._deadline.remaining()
        return now < self._resend_until and (remaining is None or remaining > 0)

    def _settle_oldest(self) -> None:
        fut = self._inflight.popleft()
        sent = self._sent.popleft() if self._sent is not None else None
        try:
            ack = fut.result(timeout=self._deadline.remaining())
        except BaseException as exc:  # kept; the rest still settle
            if sent is not None and self.error is None and fut.done() and self._may_resend(exc):
                self.resent += 1
                self._send(*sent)
                return
            if isinstance(exc, TimeoutError) and not fut.done():
                exc = PubAckTimeoutError(f"no PubAck within the pipeline's timeout for {fut._subject!r}")  # type: ignore[attr-defined]
            if self.error is None:
                self.error = exc
            return
        self.count += 1
        self._resend_until = None  # an ack: the next outage has a budget of its own
        if self._on_ack is not None:
            self._on_ack(ack)

    def finish(self) -> None:
        """Wait for every ack in flight; raises the first failure once all are settled."""
        while self._inflight:
            self._settle_oldest()
        if self.error is not None:
            raise self.error

    def abandon(self) -> None:
        """Settle what is in flight quietly (after a failure elsewhere)."""
        while self._inflight:
            self._settle_oldest()

    def __enter__(self) -> PublishPipeline:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abandon()
