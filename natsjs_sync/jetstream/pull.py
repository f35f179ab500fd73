"""Pull requests and one-shot fetches (:class:`MessageBatch`).

A pull request (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) asks for up
to ``batch`` messages or ``max_bytes`` bytes, delivered to an inbox, until it
``expires``. Status messages on that inbox are bookkeeping, never shown to the
user; :func:`~natsjs_sync.protocol.jetstream.status.classify` says what each
one means, and :class:`~natsjs_sync.protocol.jetstream.pullstate.PullAccounting`
counts what the outstanding requests still owe.

The server's ``expires`` is set a little shorter than the client's wait, so
the request is over on the server before the client stops listening: a fetch
that times out leaves no pull request behind.

Continuous pulling (:class:`~natsjs_sync.jetstream.messages.MessagesContext`)
lives in :mod:`.messages` and builds on what is here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from .._core.spi import Handle, core_of
from .._timeout import Deadline
from ..errors import BadSubscriptionError, ConnectionClosedError, NatsError, NoHeartbeatError, TimeoutError
from ..msg import Msg
from ..protocol.jetstream.pullstate import nanos
from ..protocol.jetstream.status import MESSAGE, Kind, Status, classify

if TYPE_CHECKING:
    from .._core.dispatch import TimerHandle
    from ..subscription import Subscription

_encode = msgspec.json.encode


def server_expiry(wait: float) -> float:
    """The ``expires`` to send for a client wait of ``wait`` seconds."""
    return max(0.001, wait - min(0.5, wait * 0.1))


def pull_request(
    batch: int,
    expires: float | None = None,
    no_wait: bool = False,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    group: str | None = None,
    min_pending: int | None = None,
    min_ack_pending: int | None = None,
    priority: int | None = None,
    pin_id: str | None = None,
) -> bytes:
    body: dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = nanos(expires)
    if no_wait:
        body["no_wait"] = True
    if max_bytes:
        body["max_bytes"] = max_bytes
    if heartbeat:
        body["idle_heartbeat"] = nanos(heartbeat)
    if group is not None:
        body["group"] = group
    if min_pending is not None:
        body["min_pending"] = min_pending
    if min_ack_pending is not None:
        body["min_ack_pending"] = min_ack_pending
    if priority is not None:
        body["priority"] = priority
    if pin_id:
        body["id"] = pin_id
    return _encode(body)


def status_of(msg: Msg) -> Status:
    """The classified status of a message on a pull inbox (:data:`MESSAGE` for a stream message)."""
    if msg.raw_headers is None:
        return MESSAGE
    return classify(msg.raw_headers, msg.reply)


def counted_size(msg: Msg) -> int:
    """A message's size as the server counts it against a pull request's
    ``max_bytes``: subject, reply, headers and payload (as nats.go counts it);
    the payload alone would leave the client thinking bytes are still owed
    after the server ended the request."""
    hdr = msg.raw_headers
    return len(msg.subject) + len(msg.reply or "") + (len(hdr) if hdr else 0) + len(msg.data)


@dataclass(frozen=True)
class Priority:
    """Priority-group options of pull requests (consumers with a ``priority_policy``)."""

    group: str
    min_pending: int | None = None
    min_ack_pending: int | None = None
    priority: int | None = None

    def features(self) -> list[str]:
        """The server features these options need."""
        return ["priority_groups"] + (["priority_prioritized"] if self.priority is not None else [])


class PullTarget(Protocol):
    """What pulling needs of a consumer handle (a :class:`Consumer`, or an ordered consumer's current one)."""

    @property
    def name(self) -> str | None: ...

    @property
    def next_subject(self) -> str: ...

    def info(self, timeout: Any = ...) -> Any: ...


class OrderedHooks(Protocol):
    """How an ordered consumer steers continuous pulling: one per iteration (its stop
    touches nothing a later iteration of the same ordered consumer uses)."""

    def accept(self, msg: Msg) -> str:
        """``"ok"`` to deliver, ``"stale"`` to drop, ``"gap"`` to start over."""

    def recreate(self, deadline: Deadline | None = None) -> None:
        """Make the next consumer (blocks, with back-off; raises when it cannot be done
        in time, and :class:`~natsjs_sync.BadSubscriptionError` once cancelled, after
        deleting a consumer made meanwhile)."""

    def cancel(self) -> None:
        """Stop: cut a re-creation short and ask the server to delete the consumer this
        iteration made (never waits for the server)."""


# ---------------------------------------------------------------------- one-shot


class MessageBatch:
    """The messages of one fetch, yielded as they arrive.

    Iterate it (once through; a second iteration repeats what was received);
    after the iteration ends, :attr:`error` holds why the fetch ended early, if
    it was an error (an expired request or no messages is not an error: that
    batch is just short or empty). Use it as a context manager or read it to the
    end so its inbox is released at once; otherwise it is released shortly
    after the batch is garbage collected (by the client's timer thread: a
    finalizer never takes the connection's lock).
    """

    def __init__(self, sub: Subscription, batch: int, max_bytes: int | None, wait: float | None,
                 heartbeat: float | None = None, pin_cb: Callable[[Msg], None] | None = None):
        self._sub = sub
        self._batch = batch
        self._max_bytes = max_bytes
        self._deadline = Deadline(wait)
        self._heartbeat = heartbeat
        self._pin_cb = pin_cb
        self._received: list[Msg] = []
        self._done = False
        #: Why the fetch ended early, if an error ended it (after the iteration).
        self.error: Exception | None = None
        #: The status that ended the batch early, if a status did.
        self.status: Status | None = None
        # Called: releases now. Collected first: the release goes to a core thread
        # (a finalizer must not take the connection's lock; see spi.Release).
        self._release = core_of(sub).release_on_collect(self, _release, sub)

    def __iter__(self) -> Iterator[Msg]:
        yield from list(self._received)
        if self._done:
            return
        yield from self._stream()

    def _stream(self) -> Iterator[Msg]:
        size = sum(map(counted_size, self._received))
        last_activity = time.monotonic()
        closed = False
        try:
            while len(self._received) < self._batch and not self._done:
                try:
                    # What is already queued arrived in time: it is taken whatever the
                    # clocks say (a caller slow between reads must not lose it), and it
                    # is a sign of life. The deadline and the heartbeat are looked at
                    # only when nothing is queued, as the continuous pull does.
                    msg = self._sub.poll()
                    if msg is None:
                        wait = self._deadline.remaining()
                        if wait is not None and wait <= 0:
                            return
                        if self._heartbeat:
                            hb_left = last_activity + 2 * self._heartbeat - time.monotonic()
                            if hb_left <= 0:
                                self.error = NoHeartbeatError("missed idle heartbeats from the server during fetch")
                                return
                            wait = hb_left if wait is None else min(wait, hb_left)
                        msg = self._sub.next_msg(timeout=wait)
                except TimeoutError:
                    continue
                except (BadSubscriptionError, ConnectionClosedError) as exc:
                    self.error = exc
                    return
                last_activity = time.monotonic()
                st = status_of(msg)
                if st is MESSAGE:
                    if self._pin_cb is not None:
                        self._pin_cb(msg)
                    self._received.append(msg)
                    size += counted_size(msg)
                    yield msg
                    if self._max_bytes and size >= self._max_bytes:
                        return
                    continue
                if st.kind is Kind.HEARTBEAT:
                    continue
                self.status = st
                self.error = st.error()
                return
        except GeneratorExit:
            # Closed: by a break (the batch's close() or its collection releases),
            # or by the garbage collector, perhaps on a thread that holds the
            # connection's lock. Either way not released here.
            closed = True
            raise
        finally:
            self._done = True
            if not closed:
                self._release()

    def __len__(self) -> int:
        """Messages received so far (all of them once iterated)."""
        return len(self._received)

    def close(self) -> None:
        """Stop listening (messages not yet received will be redelivered after ack_wait)."""
        self._done = True
        self._release()

    def __enter__(self) -> MessageBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _release(sub: Subscription | None, *handles: Handle | TimerHandle | None) -> None:
    for h in handles:
        if h is not None:
            h.cancel()
    try:
        if sub is not None and sub.is_valid:
            sub.unsubscribe()
    except NatsError:
        pass
