"""Continuous pulling: :class:`MessagesContext` (``consumer.messages()``) and
:class:`ConsumeContext` (``consumer.consume(handler)``).

They keep pull requests (built by :mod:`.pull`) outstanding and heal
themselves: after a reconnect every waiter is woken and the requests are sent
again at once (they died with the old connection); missed idle heartbeats are
reported and the requests sent again; a consumer that has gone is reported
(:class:`~natsjs_sync.ConsumerDeletedError`), or, for an ordered consumer,
made anew. When the client drains, every live one of its continuous pulls
stops asking first and hands out what it was sent.
"""

from __future__ import annotations

import collections
import functools
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .._backoff import Backoff
from .._core.dispatch import current_lane
from .._core.spi import CoreLink, Handle
from .._timeout import WAIT_MAX, Deadline, check_seconds, resolve
from ..errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStreamError,
    NatsError,
    NoHeartbeatError,
    TimeoutError,
)
from ..msg import Msg
from ..protocol.jetstream.pullstate import PullAccounting
from ..protocol.jetstream.status import MESSAGE, Kind, Status, classify
from ._errands import Errands
from .pull import OrderedHooks, Priority, PullTarget, _release, counted_size, pull_request

if TYPE_CHECKING:
    from .._core.dispatch import Lane, TimerHandle
    from ..subscription import Subscription

ErrorHandler = Callable[[Exception], None]

#: Waits before asking again when nobody serves the consumer (503), so a gone
#: consumer or a server in a leader election is never hammered, or when the
#: next message is larger than a whole request's ``max_bytes`` (the server
#: refuses such a request at once).
NO_RESPONDERS_BACKOFF = Backoff(0.05, 2.0, factor=2.0, jitter=0.05)
#: The most seconds one heal of an ordered consumer (a delete sent and a create
#: waited for, retried with back-off) may take before the next attempt.
HEAL_BUDGET = 5.0
#: Seconds without a message after which a drain ends (the server sends what
#: outstanding requests owe within moments of the flush).
_DRAIN_QUIET = 0.05


class _Owned:
    """What a :class:`MessagesContext` holds on the client and the server, released
    together (also by a finalizer, on the client's timer thread: nothing here waits
    for the server; an ordered consumer's server-side consumer is only asked to go)."""

    __slots__ = ("drain_timer", "inbox", "ordered", "reconnect", "route", "sub", "timer")

    def __init__(self, ordered: OrderedHooks | None) -> None:
        self.sub: Subscription | None = None
        self.route: Handle | None = None
        self.reconnect: Handle | None = None
        self.timer: TimerHandle | None = None
        self.drain_timer: TimerHandle | None = None
        self.inbox = ""
        self.ordered = ordered

    def release(self) -> None:
        route, self.route = self.route, None
        _release(self.sub, route, self.reconnect, self.timer, self.drain_timer)
        self.reconnect = self.timer = self.drain_timer = None
        if self.ordered is not None:
            self.ordered.cancel()


def _release_owned(owned: _Owned) -> None:
    owned.release()


class MessagesContext:
    """Continuous pulling: iterate messages as they come. Thread-safe to stop.

    Keeps up to ``max_messages`` (or ``max_bytes``) requested; when what is
    owed falls to the threshold it asks for more. With idle heartbeats (on by
    default when ``expires`` is at least 2 s), two missed heartbeats raise
    :class:`~natsjs_sync.NoHeartbeatError` from :meth:`next` (a dead server is
    not an idle stream) after the requests were sent again; iterating may go
    on. An ordered consumer's iteration never raises it: it makes a new
    consumer and goes on (``error_cb`` still hears of it); with heartbeats it
    does so in the background too while nobody reads. After a reconnect
    the requests are sent again at once. :meth:`stop` ends the iteration;
    :meth:`drain` ends it once the messages already received are read. A
    context dropped without :meth:`stop` releases its inbox shortly after it
    is garbage collected (on the client's timer thread: a finalizer never
    takes the connection's lock). Neither waits for the server: an ordered
    consumer's server-side consumer is asked to go, and the answer not awaited.

    Round trips nobody's thread waits for (a heal while nobody reads, for
    ``consume()`` every heal and the check that the consumer still exists)
    run on the client's errand threads (the ``_errands`` module), never on the
    timer or the dispatcher's workers.
    """

    def __init__(
        self,
        consumer: PullTarget,
        core: CoreLink,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_cb: ErrorHandler | None = None,
        ordered: OrderedHooks | None = None,
        handler: Callable[[Msg], None] | None = None,
        name: str = "messages",
        priority: Priority | None = None,
        stop_after: int | None = None,
        err_on_missing_heartbeat: bool = True,
    ):
        exp = check_seconds(expires, "expires")
        if exp is None or exp < 0.001:  # None: inf, or too long for any wait (the timeout rule)
            raise ValueError(f"expires must be at least 1 ms and finite (below {WAIT_MAX:.0f} s), got {expires!r}")
        if heartbeat is None:
            heartbeat = min(30.0, exp / 2) if exp >= 2 else None
        elif check_seconds(heartbeat, "heartbeat") is None or heartbeat >= exp:
            raise ValueError("heartbeat must be shorter than expires")
        self._acct = PullAccounting(max_messages, max_bytes, threshold_messages, threshold_bytes, stop_after)
        # An ordered consumer heals itself: missed heartbeats make a new
        # consumer from the next stream sequence and nothing is lost, so the
        # reader never hears of them (as nats.go's ordered Next()); only what
        # cannot be healed ends its iteration.
        self._raise_missed = bool(err_on_missing_heartbeat) and ordered is None
        self._priority = priority
        self._pin_id: str | None = None  # a pinned client's id, sent back with every pull request
        self._consumer = consumer
        self._core = core
        self._expires = exp
        self._heartbeat = heartbeat
        self._error_cb = error_cb
        self._ordered = ordered
        self._handler = handler
        self._stopped = False
        self.stopped_event = threading.Event()  #: set once stopped (by the user, or a terminal error)
        self._draining = False
        self._needs_reset = False
        self._retry_at = 0.0
        self._failures = 0
        self._last_activity = time.monotonic()
        # Messages the background heal of an idle ordered iterator took from the inbox
        # (it reads the inbox to see the heartbeats behind them); next() hands them out
        # first. At most what pull requests asked for: the heal pulls only when it is empty.
        self._held: collections.deque[Msg] = collections.deque()
        self._lock = threading.Lock()
        self._busy = threading.Lock()  # held while the handler runs (callback mode)
        self._lane: Lane[object] | None = None
        self._owned = _Owned(ordered)
        ref = weakref.ref(self)
        # What waits on the server without a caller's thread (a consumer made anew, a
        # check that a consumer still exists, a drain's flush asked for from the handler)
        # runs on an errand lane of its own, never on the timer or a dispatcher worker.
        self._errand: Lane[Callable[[], None]] | None = None
        # Iterator mode of an ordered consumer with heartbeats: a consumer deleted (or
        # heartbeats stopped) while nobody reads is made anew in the background, so the
        # consumer exists again before the next read. The heal runs on the errand lane,
        # at most one queued or running, and only while no reader is in next(), which
        # heals on its own. Two flags keep the two apart at the cost of two
        # attribute writes per message: each side raises its own, then looks at the
        # other's, so they never both go on. That needs the two accesses of each side kept
        # in order: the GIL does, and without it both flags live on one object, whose
        # attribute writes a free-threaded interpreter serialises under that object's lock. The
        # heal holds ``_healing_lock`` throughout; a reader that finds a heal under way
        # waits on it for no longer than its own timeout, and a heal that finds a reader
        # backs off (the reader heals itself). What the heal reports goes to
        # ``error_cb`` through a dispatcher lane (user code runs on the dispatcher only).
        self._heal_queued = False  # set by the timer, cleared by the heal when it ends
        self._report_lane: Lane[Exception] | None = None
        self._pulled = False  # a pull request was sent (the iteration has begun)
        self._idle_error: JetStreamError | None = None
        self._in_next = False
        self._healing = False
        self._healing_lock = threading.Lock()
        # Callback mode: an ordered consumer being made anew on the errand lane (no pull
        # request goes out meanwhile), and a consumer check queued there.
        self._remaking = False
        self._probing = False
        if handler is not None:
            self._lane = core.lane(self._on_item, name)
            self._errand = Errands.of(core).lane(name)
            if heartbeat:
                self._owned.timer = core.call_every(heartbeat, _weak(ref, "_tick"))
        elif ordered is not None and heartbeat:
            self._errand = Errands.of(core).lane(f"{name}-heal")
            if error_cb is not None:
                self._report_lane = core.lane(self._report_now, f"{name}-errors")
            self._owned.timer = core.call_every(heartbeat, _weak(ref, "_tick_idle"))
        self._open_inbox()
        self._owned.reconnect = core.on_reconnect(_weak(ref, "_after_reconnect"))
        self._drain_group = core.attachment(_DrainGroup.KEY, lambda: _DrainGroup(core))
        self._drain_group.add(self)
        # Stopped: released now. Collected first: on a core thread (see spi.Release).
        self._release = core.release_on_collect(self, _release_owned, self._owned)

    # -- the inbox -----------------------------------------------------------------

    def _open_inbox(self) -> None:
        """A fresh inbox (also after an ordered reset: nothing for the old consumer can reach us)."""
        owned = self._owned
        old_sub, old_route = owned.sub, owned.route
        owned.inbox = self._core.new_inbox()
        if self._lane is not None:
            owned.route = self._core.route_internal(owned.inbox, self._lane.put)
            owned.sub = None
        else:
            owned.sub = self._core.subscribe_internal(owned.inbox)
            owned.route = None
        _release(old_sub, old_route)

    # -- bookkeeping ---------------------------------------------------------------

    def _report(self, exc: Exception) -> None:
        if self._healing and self._report_lane is not None:
            # On the errand thread of a heal: error_cb is user code, which runs on the dispatcher.
            self._report_lane.put(exc)
            return
        self._report_now(exc)

    def _report_now(self, exc: Exception) -> None:
        if self._stopped or self._core.is_closed:
            # Ended by the user (a stop, a close of the client): what the machinery still
            # meets on the way out (the connection closed under a heal) is no news to them.
            return
        if self._error_cb is None:
            if self._handler is not None:
                self._core.report_error(exc)
            return
        try:
            self._error_cb(exc)
        except Exception as cb_exc:  # an error handler's own bug goes to the client's error_cb
            self._core.report_error(cb_exc)

    def _after_reconnect(self) -> None:
        """Reconnect thread: the pull requests died with the old connection; wake the reader to ask again."""
        if self._lane is not None:
            self._lane.put(_Control(self._restart))
        else:
            self._needs_reset = True
            sub = self._owned.sub
            if sub is not None:
                sub.wake()

    def _tick(self) -> None:
        """Timer thread (callback mode): look at the heartbeats from the lane."""
        if self._lane is not None and not self._stopped:
            self._lane.put(_Control(self._check_heartbeat_cb))

    def _tick_idle(self) -> None:
        """Timer thread (iterator mode, ordered, with heartbeats): look at the consumer
        on the errand lane; one look queued or running at a time, however slow the server."""
        errand = self._errand
        if errand is None or self._stopped or self._in_next or self._heal_queued:
            return
        self._heal_queued = True
        errand.put(self._on_idle_item)

    def _on_idle_item(self, _item: object = None) -> None:
        """Errand lane: heal an ordered consumer while no reader is in :meth:`next`."""
        try:
            if not self._healing_lock.acquire(blocking=False):
                return  # start() is sending the first request, or holding the first message
            try:
                self._healing = True
                if self._in_next or self._stopped or self._draining:
                    return  # a reader in next() heals on its own
                self._heal_idle()
            except JetStreamError as exc:  # cannot be healed: the next read raises it
                self._idle_error = exc
            except NatsError as exc:  # the server is away or slow: the next tick tries again
                if not self._stopped:
                    self._needs_reset = True
                    self._report(exc)
            finally:
                self._healing = False
                self._healing_lock.release()  # a reader that arrived meanwhile goes on
        finally:
            self._heal_queued = False

    def _heal_idle(self) -> None:
        """Take the bookkeeping queued ahead of the first message (heartbeats, a
        ``409 Consumer Deleted``), then re-create the consumer if it is gone or silent."""
        if self._idle_error is not None:
            return  # the reader has something to see first
        sub = self._owned.sub
        if sub is None:
            return
        held = self._held
        for _ in range(10_000):  # bounded: heartbeats keep coming while this runs
            try:
                msg = sub.poll()
            except TimeoutError:  # a wake-up meant for a reader: nothing more queued before it
                break
            if msg is None:
                break
            out = self._on_msg(msg)
            if out is not None:
                # Kept for the reader, in order; the heartbeats queued behind it are
                # read too, so a consumer deleted while messages wait is still noticed.
                held.append(out)
        if not self._needs_reset:
            if self._acct.pending_msgs <= 0:
                if held:
                    # Messages wait for the reader and no request is out (none is sent
                    # until they are read, to keep what is held bounded), so no heartbeat
                    # tells whether the consumer still exists: ask the server instead.
                    self._ask_while_held()
                    if not self._needs_reset:
                        return
                else:
                    # The requests expired unanswered: ask again as a reader would (a consumer
                    # gone meanwhile answers "no responders", healed on the next tick); never
                    # before the first request.
                    if self._pulled:
                        self._maybe_pull()
                    return
            else:
                self._check_heartbeat()
        if self._needs_reset and not self._stopped:
            self._needs_reset = False
            self._reset(Deadline(HEAL_BUDGET))  # a stop meanwhile: the consumer made is deleted, and it raises
            if not held:  # else the reader asks once it has read them (what is held stays bounded)
                self._maybe_pull()

    def _ask_while_held(self) -> None:
        """Errand lane (an idle ordered iterator holding unread messages): once per two
        heartbeat intervals, the silence that counts as missed heartbeats elsewhere, ask
        whether the consumer still exists; a deleted one is made anew by the caller."""
        hb = self._heartbeat
        now = time.monotonic()
        if not hb or now - self._last_activity < 2 * hb:
            return
        self._last_activity = now
        try:
            self._consumer.info(timeout=HEAL_BUDGET)
        except ConsumerNotFoundError:
            self._needs_reset = True
        except NatsError:
            pass  # the server is away or slow: the next tick asks again

    def _reset(self, deadline: Deadline | None = None) -> None:
        self._acct.reset()
        self._retry_at = 0.0
        if self._ordered is not None and not self._stopped:
            self._open_inbox()
            self._ordered.recreate(deadline)
        self._last_activity = time.monotonic()

    def _restart(self) -> None:
        """Callback mode (the lane): the outstanding requests are gone; ask again
        (``_on_item`` does, after this). An ordered consumer is made anew first,
        on the errand lane: that waits on the server."""
        self._acct.reset()
        self._last_activity = time.monotonic()
        if self._ordered is None or self._stopped:
            self._retry_at = 0.0
            return
        if self._remaking:
            self._needs_reset = True  # again once the one under way is made
            return
        self._remaking = True
        self._retry_at = math.inf  # no pull request before the new consumer exists
        self._open_inbox()
        assert self._errand is not None
        self._errand.put(self._remake)

    def _remake(self) -> None:
        """Errand lane (callback mode): make the ordered consumer anew within
        :data:`HEAL_BUDGET`, then let the lane go on."""
        ordered, lane = self._ordered, self._lane
        assert ordered is not None and lane is not None
        try:
            ordered.recreate(Deadline(HEAL_BUDGET))  # a stop meanwhile: the consumer made is deleted, and it raises
        except NatsError as exc:
            lane.put(_Control(functools.partial(self._not_remade, exc)))
            return
        lane.put(_Control(self._remade))

    def _remade(self) -> None:
        """Callback mode: the new consumer exists; ``_on_item`` asks it for messages next."""
        self._remaking = False
        self._retry_at = 0.0
        self._last_activity = time.monotonic()

    def _not_remade(self, exc: NatsError) -> None:
        """Callback mode: the consumer could not be made anew. Raises what cannot
        be healed (``_on_item`` reports it and stops); otherwise reports and tries again."""
        self._remaking = False
        self._retry_at = 0.0
        if isinstance(exc, JetStreamError):
            raise exc
        self._report(exc)
        self._needs_reset = True  # the server is away or slow: ``_on_item`` starts the next attempt

    def _consumer_gone(self) -> ConsumerDeletedError | None:
        """After missed heartbeats or a 503: a consumer deleted while no request
        was waiting sends no 409, so ask. (An ordered consumer makes its own anew.)
        In callback mode the question goes to the errand lane and the answer to
        the lane later: None here."""
        if self._ordered is not None:
            return None
        if self._lane is not None:
            self._probe()
            return None
        try:
            self._consumer.info(timeout=2.0)
        except ConsumerNotFoundError:
            return ConsumerDeletedError(f"consumer {self._consumer.name!r} was deleted", code=409)
        except NatsError:
            pass  # the server is away: keep pulling, it may come back
        return None

    def _probe(self) -> None:
        """Callback mode: ask on the errand lane whether the consumer still exists (one ask at a time)."""
        if self._probing or self._errand is None:
            return
        self._probing = True
        self._errand.put(self._ask_exists)

    def _ask_exists(self) -> None:
        """Errand lane: a consumer found deleted ends consumption (on the lane: reported, then stopped)."""
        lane = self._lane
        assert lane is not None
        try:
            self._consumer.info(timeout=2.0)
        except ConsumerNotFoundError:
            gone = ConsumerDeletedError(f"consumer {self._consumer.name!r} was deleted", code=409)
            lane.put(_Control(functools.partial(_raise, gone)))
        except NatsError:
            pass  # the server is away: keep pulling, it may come back
        finally:
            self._probing = False

    def _maybe_pull(self) -> None:
        acct = self._acct
        if self._stopped or not acct.wants_more() or time.monotonic() < self._retry_at:
            return
        ask = acct.ask()
        p = self._priority
        if p is None:
            body = pull_request(ask.batch, self._expires, max_bytes=ask.max_bytes, heartbeat=self._heartbeat)
        else:
            body = pull_request(ask.batch, self._expires, max_bytes=ask.max_bytes, heartbeat=self._heartbeat,
                                group=p.group, min_pending=p.min_pending, min_ack_pending=p.min_ack_pending,
                                priority=p.priority, pin_id=self._pin_id)
        try:
            self._core.publish(self._consumer.next_subject, body, reply=self._owned.inbox)
        except NatsError as exc:
            acct.reset()
            self._report(exc)
            return
        self._last_activity = time.monotonic()
        self._pulled = True

    def _backoff(self) -> None:
        """Nobody served the request: ask again only after a back-off."""
        self._failures += 1
        delay = NO_RESPONDERS_BACKOFF.delay(self._failures)
        self._retry_at = max(self._retry_at, time.monotonic() + delay)  # inf: a consumer being made anew
        self._acct.reset()
        if self._lane is not None:
            lane = self._lane
            self._core.call_later(delay, lambda: lane.put(_Control(self._maybe_pull)))

    def _on_msg(self, msg: Msg) -> Msg | None:
        """One message from the inbox: the user's, or bookkeeping (None). Raises terminal errors."""
        self._last_activity = time.monotonic()
        hdr = msg.raw_headers
        # status_of(), inline: most messages have no headers (this runs per message)
        st = MESSAGE if hdr is None else classify(hdr, msg.reply)
        if st is MESSAGE:
            acct = self._acct
            if acct.max_bytes:
                acct.delivered(counted_size(msg))
            else:
                acct.pending_msgs -= 1  # acct.delivered(0), inline: this runs per message
            self._failures = 0
            if self._priority is not None:
                hdrs = msg.headers
                if hdrs is not None and "Nats-Pin-Id" in hdrs:
                    self._pin_id = hdrs["Nats-Pin-Id"]
            if self._ordered is not None:
                verdict = self._ordered.accept(msg)
                if verdict != "ok":
                    if verdict == "gap":
                        self._needs_reset = True
                    return None
            acct.handed_out += 1  # acct.handed(), inline
            return msg
        if msg.subject == self._owned.inbox:  # not a late one of an inbox left by a reset
            self._on_status(st, msg.reply)
        return None

    def _on_status(self, st: Status, reply: str | None) -> None:
        """A status message: bookkeeping; raises what ends the iteration."""
        kind = st.kind
        if kind is Kind.HEARTBEAT:
            return
        if kind is Kind.FLOW_CONTROL:
            if reply:
                self._core.publish(reply, b"")
        elif kind is Kind.REQUEST_ENDED or kind is Kind.LIMIT:
            acct = self._acct
            acct.ended(st.pending_msgs, st.pending_bytes)
            if kind is Kind.LIMIT:
                self._report(st.error())  # type: ignore[arg-type]
            elif st.too_large and acct.max_bytes and st.pending_bytes >= acct.max_bytes:
                self._too_large(acct.max_bytes)
        elif kind is Kind.RESET:
            self._acct.reset()
            if st.pin_id_reset:
                self._pin_id = None  # another client holds the pin now: ask without ours
        elif kind is Kind.NO_RESPONDERS:
            gone = self._consumer_gone()
            if gone is not None:
                raise gone
            self._needs_reset = self._ordered is not None
            self._backoff()
        elif kind is Kind.CONSUMER_DELETED and self._ordered is not None:
            self._report(st.error())  # type: ignore[arg-type]
            self._needs_reset = True
        else:
            err = st.error()
            assert err is not None
            raise err  # deleted, or a request that can never work (400): stop

    def _too_large(self, max_bytes: int) -> None:
        """A whole request could take nothing: the next message is larger than
        ``max_bytes`` and asking the same way again is refused at once. Report it
        and ask again only after a back-off (the message may expire or be removed;
        nats.go counts such a 409 as an ended request and asks again at once)."""
        self._report(JetStreamError(
            f"the next message of consumer {self._consumer.name!r} is larger than max_bytes={max_bytes} "
            "(Message Size Exceeds MaxBytes): it cannot be delivered until max_bytes is raised", code=409))
        self._backoff()

    def _check_heartbeat(self) -> NoHeartbeatError | None:
        """Missed heartbeats: report, ask again; raises ConsumerDeletedError when it is gone."""
        hb = self._heartbeat
        # No pull request is out while an ordered consumer is made anew, so nothing is
        # missed then: counted, a make slower than two heartbeats was thrown away and
        # started again on its completion, for ever (nats.go skips a reset while one runs).
        if not hb or self._draining or self._remaking or time.monotonic() - self._last_activity < 2 * hb:
            return None
        err = NoHeartbeatError(f"missed idle heartbeats from consumer {self._consumer.name!r}: pulling again")
        self._report(err)
        gone = self._consumer_gone()
        if gone is not None:
            raise gone
        self._needs_reset = True
        self._last_activity = time.monotonic()
        return err

    # -- iterator mode ---------------------------------------------------------------

    def next(self, timeout: float | None = None) -> Msg:
        """The next message.

        Args:
            timeout: seconds to wait (``None``: for ever).

        Raises:
            TimeoutError: none within ``timeout``.
            NoHeartbeatError: heartbeats stopped (the requests are sent again; call again to go on).
                Never for an ordered consumer, which makes a new consumer instead.
            BadSubscriptionError: the iterator was stopped or drained.
            ConsumerDeletedError: the consumer was deleted.
            JetStreamError: the server refused the requests for good (e.g. a priority group missing).
        """
        if self._handler is not None:
            raise BadSubscriptionError("next() cannot be used on a consume() context")
        return self._next(timeout)

    def _next(self, timeout: float | None) -> Msg:
        """:meth:`next` without the check for a handler (``__iter__`` settles it once)."""
        # While a reader is here the background heal stays away (see __init__); one
        # reader at a time, as with every iterator of this class. Without the heal
        # (no idle lane) the two flags are never looked at by anyone else.
        self._in_next = True
        try:
            deadline: Deadline | None = None
            if self._healing:
                deadline = Deadline(timeout)
                self._await_heal(deadline)
            if self._idle_error is not None:
                err, self._idle_error = self._idle_error, None
                self.stop()
                raise err
            if self._held and not self._stopped:  # stopped: what was held is dropped (see stop())
                return self._held.popleft()
            while True:
                if self._stopped:
                    raise BadSubscriptionError("the messages iterator is stopped")
                sub = self._owned.sub
                assert sub is not None
                try:
                    if self._needs_reset:
                        deadline = deadline or Deadline(timeout)
                        sub = self._reset_now(deadline)
                    acct = self._acct
                    if acct.counts_bytes or acct.pending_msgs <= acct.threshold_messages:
                        self._maybe_pull()  # else enough is owed (wants_more() is False): skip the call
                    polled = sub.poll()  # under load a message is already waiting: no deadline, no clock
                    if polled is not None:
                        msg = polled
                    else:
                        deadline = deadline or Deadline(timeout)
                        msg = sub.next_msg(timeout=self._wait(deadline))
                    out = self._on_msg(msg)
                except TimeoutError:
                    self._after_quiet(deadline)
                    continue
                except (BadSubscriptionError, ConnectionClosedError):
                    if self._owned.sub is not sub and not self._stopped:
                        continue  # an ordered reset swapped the inbox
                    self._stopped = True
                    raise BadSubscriptionError("the messages iterator is stopped") from None
                except JetStreamError:
                    self.stop()
                    raise
                if out is not None:
                    if acct.stop_after is not None and acct.finished:
                        self.stop()  # stop_after reached: this was the last message
                    return out
        finally:
            self._in_next = False

    def _await_heal(self, deadline: Deadline) -> None:
        """Iterator mode: wait for a background heal to end, within the reader's deadline.

        Raises:
            TimeoutError: the heal (a round trip to a slow server) outlasted the deadline.
        """
        left = deadline.remaining()
        if not self._healing_lock.acquire(timeout=-1 if left is None else left):
            raise TimeoutError("no message in time (the consumer is being made anew)")
        self._healing_lock.release()

    def _reset_now(self, deadline: Deadline) -> Subscription:
        """Iterator mode: start over (raises TimeoutError when it cannot be done in time)."""
        self._reset(deadline)
        self._needs_reset = False
        sub = self._owned.sub
        assert sub is not None
        return sub

    def _after_quiet(self, deadline: Deadline | None) -> None:
        """Iterator mode: nothing came in the wait; raises what that means, or returns to wait on."""
        if self._draining and self._drained():
            self.stop()
            raise BadSubscriptionError("the messages iterator is drained") from None
        missed = self._check_heartbeat_iter()
        if missed is not None and self._raise_missed:
            raise missed from None
        if deadline is not None and deadline.expired():
            raise TimeoutError("no message in time") from None

    def _check_heartbeat_iter(self) -> NoHeartbeatError | None:
        try:
            return self._check_heartbeat()
        except JetStreamError:
            self.stop()
            raise

    def _wait(self, deadline: Deadline) -> float | None:
        """How long to block: the caller's deadline, cut by a drain's quiet spell,
        the heartbeat check and a back-off's end."""
        wait = deadline.remaining()
        now = time.monotonic()
        if self._draining:
            wait = _min(wait, self._drain_quiet_left())
        if self._heartbeat:
            wait = _min(wait, max(0.0, self._last_activity + 2 * self._heartbeat - now))
        if self._retry_at > now:
            wait = _min(wait, self._retry_at - now)
        return wait

    def start(self, hold_first: float | None = None) -> None:
        """Send the first pull request now rather than on the first read.

        With ``hold_first`` (seconds) also wait for the first message and keep
        it for the first read: once it is here the server has read it, so a
        write made after this call cannot replace it first (a key watcher must
        show the value present when it was made, even in a history-1 bucket).
        """
        if self._lane is not None:
            self._lane.put(_Control(self._maybe_pull))
            return
        # No background heal from the first request until the first message is kept:
        # one that ran between next() returning it and ``_held`` taking it could keep a
        # second message there and see it replaced (lost).
        with self._healing_lock:
            self._maybe_pull()
            if hold_first is not None:
                try:
                    self._held.append(self.next(timeout=hold_first))
                except TimeoutError:
                    pass

    def _drain_quiet_left(self) -> float:
        """How much longer a drain waits for messages still owed by pull
        requests the server is serving: they come within moments, so after a
        quiet spell none are coming."""
        if self._acct.pending_msgs <= 0:
            return 0.0
        return max(0.0, self._last_activity + _DRAIN_QUIET - time.monotonic())

    def _drained(self) -> bool:
        sub = self._owned.sub
        pending = sub.pending_msgs if sub is not None else 0
        return pending == 0 and not self._held and self._drain_quiet_left() == 0.0

    def __iter__(self) -> Iterator[Msg]:
        # The check of next() is settled at construction: each message costs one call less.
        read = self.next if self._handler is not None else self._next
        while True:
            try:
                yield read(None)
            except BadSubscriptionError:
                return

    def stop(self) -> None:
        """End the iteration now; messages received but not read are dropped."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._held.clear()  # received, not read: dropped with the rest
        self._drain_group.discard(self)
        self._release()  # the inbox, the reconnect hook, the timer, an ordered consumer's server-side one
        if self._lane is not None:
            self._lane.close()
        if self._errand is not None:
            self._errand.close()  # what is queued there is for a consumption that has ended
        self.stopped_event.set()

    @property
    def is_stopped(self) -> bool:
        """True once the iteration ended (stopped, drained, or the consumer is gone)."""
        return self._stopped

    def drain(self, timeout: float | None = 5.0) -> None:
        """Ask for no more; the iteration ends once what was received is read.

        Messages the server already sent for outstanding pull requests are
        waited for (one round trip, bounded by ``timeout``), so they are read
        rather than left unacknowledged until their ack wait runs out.
        """
        self._stop_asking()
        if not self._core.on_reader_thread():  # there a flush could not be answered
            try:
                # The PONG comes after every message the server had sent us.
                self._core.flush(timeout, vouch=False)
            except NatsError:
                pass
        self._flushed()

    def _stop_asking(self) -> None:
        """Send no more pull requests (those outstanding are still served)."""
        self._acct.stopped = True

    def _flushed(self) -> None:
        """The drain's flush came back: what was sent before it is queued; end once it is read."""
        self._last_activity = time.monotonic()
        self._draining = True
        sub = self._owned.sub
        if sub is not None:
            sub.wake()  # a reader waiting for more must notice

    def __enter__(self) -> MessagesContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- callback mode ---------------------------------------------------------------

    def _on_item(self, item: object) -> None:
        """Dispatcher lane (callback mode): one inbox message or control action."""
        if self._stopped:
            return
        try:
            if type(item) is _Control:
                item.fn()
            else:
                out = self._on_msg(item)  # type: ignore[arg-type]
                if out is not None:
                    with self._busy:
                        try:
                            self._handler(out)  # type: ignore[misc]
                        except Exception as exc:  # a handler's bug must not stop consumption
                            self._report(exc)
                    if self._acct.finished:
                        self.stop()  # stop_after reached
                        return
            if self._needs_reset and not self._remaking:
                self._needs_reset = False
                self._restart()
            self._maybe_pull()
        except JetStreamError as exc:
            self._report(exc)
            self.stop()
        except NatsError as exc:
            self._report(exc)

    def _check_heartbeat_cb(self) -> None:
        self._check_heartbeat()

    def barrier(self, deadline: Deadline) -> bool:
        """Callback mode: wait until every item queued so far was handled (False: out of time)."""
        if self._lane is None or current_lane() is self._lane or self._stopped:
            return True
        done = threading.Event()
        self._lane.put(_Control(done.set))
        return done.wait(deadline.remaining())

    def _finish(self, deadline: Deadline) -> None:
        """Callback mode: ask for no more, let the handler take every message
        received (and those still owed, until a quiet spell), then stop.

        Called from the handler itself it returns at once: the handler cannot
        take the rest while it waits here, so the drain completes on the lane
        after it returns (see :meth:`_drain_later`).

        Args:
            deadline: when to stop waiting for the handler (it is stopped then anyway).
        """
        if self._lane is not None and current_lane() is self._lane:
            self._drain_later(deadline)
            return
        self.drain(deadline.min(5.0))
        self._settle(deadline)

    def _drain_later(self, deadline: Deadline) -> None:
        """Callback mode, from the handler: ask for no more, and flush on an errand
        lane of the drain's own (not behind a heal of this consumer); what the server
        sent before the flush's answer is queued on the lane ahead of the step that
        ends the drain (:meth:`_drain_step`). Consumption stops at the deadline
        whatever is still waiting then (a flush not yet served, a handler still busy)."""
        self._stop_asking()
        lane = self._lane
        assert lane is not None
        left = deadline.remaining()
        if left is not None:
            ref = weakref.ref(self)
            self._owned.drain_timer = self._core.call_later(left, _weak(ref, "stop"))
        errand = Errands.of(self._core).lane(f"{lane.name}-drain")

        def flush() -> None:
            try:
                self._core.flush(deadline.min(5.0), vouch=False)  # the PONG comes after every message sent before it
            except NatsError:
                pass  # a broken connection: nothing more is coming anyway
            lane.put(_Control(functools.partial(self._drain_step, deadline, True)))

        errand.put(flush)

    def _drain_step(self, deadline: Deadline, flushed: bool) -> None:
        """Callback mode (the lane): stop once nothing is queued behind this step and
        the quiet spell passed; otherwise look again after what is queued, or after
        the quiet spell (a message still owed may come meanwhile)."""
        lane = self._lane
        assert lane is not None
        if flushed:
            self._flushed()
        again = _Control(functools.partial(self._drain_step, deadline, False))
        if deadline.expired() or (not len(lane) and self._drain_quiet_left() == 0):
            self.stop()
        elif len(lane):
            lane.put(again)  # behind the messages queued meanwhile
        else:
            self._core.call_later(self._drain_quiet_left(), functools.partial(lane.put, again))

    def _settle(self, deadline: Deadline) -> None:
        """Callback mode, after a drain's flush: let the handler take what is
        queued and what still comes until a quiet spell, then stop.

        Args:
            deadline: when to stop waiting for the handler (it is stopped then anyway).
        """
        # The flush put everything sent before it into the lane; a barrier
        # waits for it, and again while stragglers keep coming.
        while self.barrier(deadline) and self._drain_quiet_left() > 0 and not deadline.expired():
            quiet = threading.Event()
            quiet.wait(self._drain_quiet_left())  # the quiet spell itself: no event marks "nothing came"
        self.stop()
        self.wait_idle(deadline.remaining())

    def wait_idle(self, timeout: float | None) -> None:
        """Callback mode: wait until the handler is not running (not from the handler itself)."""
        if current_lane() is self._lane:
            return
        t = resolve(timeout, None)  # the timeout rule: a huge one is no limit
        if self._busy.acquire(timeout=-1 if t is None else t):
            self._busy.release()


class _DrainGroup:
    """Every live continuous pull of one client, drained first when the client drains.

    Without it a client's drain refused the acks of consume() handlers still
    busy with a batch (the connection was draining), so every graceful
    shutdown redelivered up to a batch per consumer after its ack wait. The
    group stops them all from asking, waits for one flush (everything the
    server sent before it is then queued), and lets each consume() handler
    take what it was given while acks still go out; iterators end once read.
    Thread-safe.
    """

    KEY = "natsjs_sync.jetstream.messages.drain"

    def __init__(self, core: CoreLink):
        self._core = core
        self._lock = threading.Lock()
        self._live: weakref.WeakSet[MessagesContext] = weakref.WeakSet()
        core.on_drain_start(self._client_draining)

    def add(self, ctx: MessagesContext) -> None:
        with self._lock:
            self._live.add(ctx)

    def discard(self, ctx: MessagesContext) -> None:
        with self._lock:
            self._live.discard(ctx)

    def _client_draining(self, deadline: Deadline) -> None:
        """The client began a drain (publishes still go out).

        All stop asking before one flush, and their quiet spells overlap, so
        many consumers drain in about the time of one.
        """
        with self._lock:
            live = [m for m in self._live if not m.is_stopped]
        if not live:
            return
        for m in live:
            m._stop_asking()
        try:
            self._core.flush(deadline.min(5.0), vouch=False)
        except NatsError:
            pass  # a broken connection: nothing more is coming anyway
        for m in live:
            m._flushed()
        for m in live:
            if m._lane is not None:  # consume(): its handler takes what is queued
                m._settle(deadline)


class _Control:
    """An action for a consume() lane, run in order with the messages."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn


def _weak(ref: weakref.ref[MessagesContext], method: str) -> Callable[[], None]:
    """A callback that calls ``method`` of the context while it lives (hooks must not keep it alive)."""

    def call() -> None:
        obj = ref()
        if obj is not None:
            getattr(obj, method)()

    return call


def _raise(exc: Exception) -> None:
    """A lane action that raises what an errand found (the lane reports it)."""
    raise exc


def _min(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


class ConsumeContext:
    """``consume(handler)``: the handler runs for each message on the client's dispatcher.

    It owns no thread: messages, reconnects and heartbeat checks are items of
    one dispatcher lane, so the handler never runs twice at once.
    """

    def __init__(self, messages: MessagesContext):
        self._messages = messages
        messages.start()

    @property
    def closed(self) -> threading.Event:
        """Set once consumption has ended (stopped, drained, or the consumer is gone)."""
        return self._messages.stopped_event

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop now: the handler finishes the message it has, no more follow.

        Waits up to ``timeout`` for a running handler (not when called from the handler).
        """
        self._messages.stop()
        self._messages.wait_idle(timeout)

    def drain(self, timeout: float | None = 30.0) -> None:
        """Ask for no more and return once every received message was handled.

        Messages the server is still sending for outstanding pull requests are
        waited for until a quiet spell (they come within moments). Called from
        the handler itself it returns at once (the handler cannot take the rest
        while it waits): the drain goes on after the handler returns, every
        message already received still goes to the handler, and :attr:`closed`
        is set once it is done.

        Args:
            timeout: seconds to wait (``None``: for ever); when they are up,
                consumption stops anyway.
        """
        self._messages._finish(Deadline.of(timeout, None))

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
