"""A feed of JetStream advisories: subscribe, iterate typed advisories, close."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from .._core.spi import link
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg, resolve
from ..errors import ConnectionClosedError, InvalidResponseError, TimeoutError
from .models import ADVISORY_PREFIX, Advisory, decode_advisory

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription

__all__ = ["DEFAULT_MAX_PENDING", "AdvisoryFeed", "advisory_subjects"]

#: Advisories held for the reader before the oldest new ones are dropped (see :attr:`AdvisoryFeed.dropped`).
DEFAULT_MAX_PENDING = 10_000

# The subject tokens of each kind (nats-server's ``JSAdvisory*Pre`` constants).
_KINDS: dict[str, tuple[str, ...]] = {
    "max_deliver": ("CONSUMER.MAX_DELIVERIES",),
    "terminated": ("CONSUMER.MSG_TERMINATED",),
    "nak": ("CONSUMER.MSG_NAKED",),
    "consumer_action": ("CONSUMER.CREATED", "CONSUMER.DELETED"),
    "stream_action": ("STREAM.CREATED", "STREAM.UPDATED", "STREAM.DELETED"),
    "stream_leader_elected": ("STREAM.LEADER_ELECTED",),
    "consumer_leader_elected": ("CONSUMER.LEADER_ELECTED",),
}
_CONSUMER_KINDS = {"max_deliver", "terminated", "nak", "consumer_action", "consumer_leader_elected"}

_CLOSED = object()


def advisory_subjects(kinds: Sequence[str], stream: str = "*", consumer: str = "*") -> list[str]:
    """The subjects that carry the advisories of ``kinds`` about ``stream`` (and ``consumer``).

    Args:
        kinds: any of ``"max_deliver"``, ``"terminated"``, ``"nak"``, ``"consumer_action"``,
            ``"stream_action"``, ``"stream_leader_elected"``, ``"consumer_leader_elected"``.
        stream: a stream's name, or ``"*"`` for every stream.
        consumer: a consumer's name, or ``"*"`` for every consumer (ignored for stream kinds).

    Returns:
        Subjects such as ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.*``.

    Raises:
        ValueError: an unknown kind.
    """
    out: list[str] = []
    for kind in kinds:
        if kind not in _KINDS:
            raise ValueError(f"unknown advisory kind {kind!r}; one of {', '.join(sorted(_KINDS))}")
        tail = f"{stream}.{consumer}" if kind in _CONSUMER_KINDS else stream
        out += [f"{ADVISORY_PREFIX}.{tokens}.{tail}" for tokens in _KINDS[kind]]
    return out


class AdvisoryFeed:
    """Typed JetStream advisories as they arrive: iterate, or :meth:`next` with a timeout.

    The feed subscribes (core NATS, no stream involved) when made and holds at
    most ``max_pending`` advisories for its reader; past that, new ones are
    dropped and counted in :attr:`dropped` (the client's reader never waits on
    this feed). Advisories are not stored by the server: those sent while no
    feed is subscribed are gone (capture ``$JS.EVENT.ADVISORY.>`` in a stream to
    keep them). Use as a context manager, or :meth:`close` it; closing the client ends it too.

    Thread-safe: any thread may read or close; each advisory goes to one reader.

    Example::

        with AdvisoryFeed(nc) as feed:
            for adv in feed:
                if isinstance(adv, MaxDeliveriesAdvisory):
                    print(adv.stream, adv.consumer, adv.stream_seq)
    """

    def __init__(self, client: Client, subjects: str | Sequence[str] = f"{ADVISORY_PREFIX}.>", *,
                 max_pending: int = DEFAULT_MAX_PENDING, timeout: TimeoutArg = USE_DEFAULT):
        """Subscribe to ``subjects`` and wait until the server has the interest (a flush).

        Args:
            client: a connected client of the account whose advisories to read.
            subjects: a subject or subjects under ``$JS.EVENT.ADVISORY`` (default: all of them);
                see :func:`advisory_subjects`.
            max_pending: advisories held before new ones are dropped (at least 1).
            timeout: seconds for the flush (default 5).

        Raises:
            ValueError: ``max_pending`` below 1, or no subject.
            BadSubjectError: an invalid subject.
            TimeoutError: the server did not answer the flush in time.
        """
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        subjects = [subjects] if isinstance(subjects, str) else list(subjects)
        if not subjects:
            raise ValueError("give at least one subject")
        # One place more than max_pending: the end marker's, so closing never discards a received advisory.
        self._max_pending = max_pending
        self._q: queue.Queue[object] = queue.Queue(maxsize=max_pending + 1)
        self._lock = threading.Lock()
        self._dropped = 0
        self._invalid = 0
        self._closed = False
        self._subs: list[Subscription] = []
        # A closed client ends the feed (its readers would otherwise wait for ever).
        self._close_hook = link(client).on_close(self._client_closed)
        try:
            for subject in subjects:
                self._subs.append(client.subscribe(subject, cb=self._arrived))
            client.flush(timeout=resolve(timeout, 5.0))
        except BaseException:
            self.close()
            raise

    def _arrived(self, msg: Msg) -> None:
        # On the client's dispatcher: never waits (a full queue drops and counts).
        with self._lock:  # with _end: no advisory is queued after the end marker, nor in its place
            if self._closed:
                return  # delivered while closing: after the end marker nobody would read it
            if self._q.qsize() >= self._max_pending:
                self._dropped += 1
                return
            self._q.put_nowait(msg)

    @property
    def dropped(self) -> int:
        """Advisories dropped because ``max_pending`` were waiting to be read."""
        with self._lock:
            return self._dropped

    @property
    def invalid(self) -> int:
        """Messages the iterations skipped because they did not decode as advisories."""
        with self._lock:
            return self._invalid

    def _next_valid(self, timeout: TimeoutArg) -> Advisory:
        # One message on an advisory subject that is not an advisory (anyone allowed to publish there can
        # send one) must not end an iteration, nor whatever follows the feed (a dead-letter helper).
        deadline = Deadline.of(timeout, None)
        while True:
            try:
                return self.next(timeout=deadline.remaining())
            except InvalidResponseError:
                with self._lock:
                    self._invalid += 1

    @property
    def pending(self) -> int:
        """Advisories received and not yet read."""
        with self._lock:
            return max(0, self._q.qsize() - (1 if self._closed else 0))  # not the end marker

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def next(self, timeout: TimeoutArg = 1.0) -> Advisory:
        """The next advisory, decoded.

        Args:
            timeout: seconds to wait; ``None`` waits for ever.

        Raises:
            TimeoutError: none arrived in time.
            ConnectionClosedError: the feed was closed.
            InvalidResponseError: an advisory that is not a JSON object, or whose fields do not fit its type.
        """
        wait = resolve(timeout, 1.0)
        try:
            item = self._q.get(timeout=wait)
        except queue.Empty:
            raise TimeoutError(f"no advisory within {wait} s") from None
        if item is _CLOSED:
            self._q.put_nowait(_CLOSED)  # wake every other reader too (room: nothing is queued after the end)
            raise ConnectionClosedError("the advisory feed is closed")
        msg: Msg = item  # type: ignore[assignment]
        return decode_advisory(msg.data, msg.subject)

    def __iter__(self) -> Iterator[Advisory]:
        """Yield advisories until the feed is closed (no timeout; see :meth:`until_idle`); a message that
        does not decode is skipped (counted in :attr:`invalid`)."""
        while True:
            try:
                yield self._next_valid(None)
            except ConnectionClosedError:
                return

    def until_idle(self, idle: float, total: TimeoutArg = None) -> Iterator[Advisory]:
        """Yield advisories until none arrives for ``idle`` seconds, ``total`` seconds have passed,
        or the feed is closed. A message that does not decode is skipped (counted in :attr:`invalid`).

        Args:
            idle: seconds without an advisory that end the iteration.
            total: seconds the whole iteration may take (``None``: no bound but ``idle``).
        """
        deadline = Deadline.of(total, None)
        while not deadline.expired():
            try:
                yield self._next_valid(deadline.min(idle))
            except (TimeoutError, ConnectionClosedError):
                return

    def close(self) -> None:
        """Unsubscribe and wake every reader (they get ConnectionClosedError once the advisories
        already received are read). Idempotent."""
        self._close_hook.cancel()
        if not self._end():
            return
        for sub in self._subs:
            try:
                sub.unsubscribe()
            except Exception:  # the connection may be closed already: nothing left to undo
                pass

    def _client_closed(self) -> None:
        self._end()

    def _end(self) -> bool:
        """Mark the feed closed and queue the end for its readers; False when it was already."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            # At most max_pending advisories are queued (readers only take): the last place is free.
            self._q.put_nowait(_CLOSED)
        return True

    def __enter__(self) -> AdvisoryFeed:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
