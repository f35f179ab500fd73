"""The future of one async publish, in its two forms.

Each :meth:`JetStream.publish_async` returns a :class:`concurrent.futures.Future`
that the ack mux settles on the reader thread. Pipelined publishing keeps
thousands of them alive, so the cheap form (:class:`_SharedConditionFuture`)
shares one Condition and is settled by writing CPython's private Future fields.
That reliance on another library's layout is what sets this apart from the
publishing machinery: the layout is checked once at import
(:func:`shared_condition_fits`) and the plain public-API form
(:class:`_PubFuture`) is chosen otherwise, and both are tested as Futures.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FuturesTimeoutError
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING, Any

from .._timeout import Deadline, check_seconds
from ..errors import PubAckTimeoutError
from ..msg import Msg
from ..protocol.headers import HeadersInput, encode_headers

if TYPE_CHECKING:
    from .._core.dispatch import Lane
    from .publish import PubAck


def _settle(fut: Future[PubAck], ack: PubAck | None, exc: BaseException | None) -> None:
    """Complete a future unless the user cancelled it (it is never set running,
    which saves a lock round per publish).

    A cancelled one is told so now, as an executor tells the futures it would
    have run: :func:`concurrent.futures.wait` and ``as_completed`` count a
    cancelled future as done only from then on.
    """
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(ack)  # type: ignore[arg-type]
    except InvalidStateError:
        if fut.cancelled():
            fut.set_running_or_notify_cancel()


def _discard(_: object) -> None:
    """A done-callback's return value means nothing."""


class _PubFuture(Future):  # type: ignore[type-arg]
    """The future of one async publish: a plain :class:`concurrent.futures.Future`
    (``wait``, ``as_completed``, callbacks, cancellation all work), settled on the
    reader thread, with its done-callbacks run on the client's dispatcher.

    This class uses only Future's public methods. It is what every interpreter
    gets whose Future is not laid out as :class:`_SharedConditionFuture` was
    written for (see :func:`shared_condition_fits`).

    A wait that runs out raises :class:`~natsjs_sync.errors.PubAckTimeoutError`
    (a ``natsjs_sync.TimeoutError``), never the message-less one of
    ``concurrent.futures``.
    """

    #: Whether the mux may settle it by writing its fields (only :class:`_SharedConditionFuture`).
    shares_condition = False

    def __init__(self, cond: threading.Condition, subject: str, lane: Lane[Callable[[], None]]):
        """Args:
            cond: the mux's condition (only the shared-condition future uses it).
            subject: where it is published, for error messages and :attr:`msg`.
            lane: the dispatcher lane its done-callbacks run on.
        """
        super().__init__()
        self._init_publish(subject, lane)

    def _init_publish(self, subject: str, lane: Lane[Callable[[], None]]) -> None:
        self._subject = subject  # for the error message when no ack comes
        self._deadline = 0.0  # time.monotonic() after which it fails; set once sent
        self._lane = lane
        self._retry: tuple[bytes, HeadersInput | None, bytes] | None = None  # payload, headers, reply
        self._retries = 0

    def _wait_timed_out(self, timeout: float | None) -> PubAckTimeoutError:
        return PubAckTimeoutError(f"no PubAck for {self._subject!r} within the {timeout} s waited for it")

    def result(self, timeout: float | None = None) -> PubAck:
        """The PubAck, waiting at most ``timeout`` seconds (None: until settled).

        ``timeout`` follows the library's one rule (:mod:`natsjs_sync._timeout`):
        ``None``, ``inf`` or anything from ``threading.TIMEOUT_MAX`` up waits
        until settled.

        Raises:
            PubAckTimeoutError: not settled within ``timeout`` (it stays pending).
            JetStreamError, TimeoutError, ConnectionClosedError: the publish failed.
            concurrent.futures.CancelledError: it was cancelled.
            ValueError, TypeError: ``timeout`` is negative, NaN or not a number.
        """
        seconds = check_seconds(timeout)
        try:
            return super().result(seconds)  # type: ignore[no-any-return]
        except FuturesTimeoutError:
            if not self.done():
                raise self._wait_timed_out(timeout) from None
        # Settled as the wait ran out, or failed with a TimeoutError of its own.
        return super().result(0)  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The publish's error (None after a PubAck), waiting at most ``timeout``
        seconds (the same rule as :meth:`result`).

        Raises:
            PubAckTimeoutError: not settled within ``timeout``.
            concurrent.futures.CancelledError: it was cancelled.
            ValueError, TypeError: ``timeout`` is negative, NaN or not a number.
        """
        seconds = check_seconds(timeout)
        try:
            return super().exception(seconds)
        except FuturesTimeoutError:
            if not self.done():
                raise self._wait_timed_out(timeout) from None
        return super().exception(0)

    @property
    def msg(self) -> Msg:
        """The message this future publishes (subject, data, headers), e.g. to
        publish it again after a failure (nats.go's ``PubAckFuture.Msg``)."""
        if self._retry is None:
            return Msg(self._subject)
        payload, headers, _ = self._retry
        raw = encode_headers(headers) if headers else None
        return Msg(self._subject, hdr=raw, data=bytes(payload))

    def add_done_callback(self, fn: Callable[[Future[PubAck]], object]) -> None:
        """``fn(future)`` runs on the client's dispatcher once the future is done
        (never on the thread that received the ack)."""
        lane = self._lane

        def dispatch(f: Future[PubAck]) -> None:
            lane.put(lambda: _discard(fn(f)))

        super().add_done_callback(dispatch)


#: What ``Future.__init__`` sets, in the CPython versions this was written for
#: (3.10 to 3.13): the fields :class:`_SharedConditionFuture` sets itself.
_FUTURE_FIELDS = frozenset({"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"})


def _future_states() -> tuple[Any, Any]:
    """The states a new Future starts in and set_result() leaves it in (None, None: not plain fields)."""
    fresh: Future[None] = Future()
    pending = getattr(fresh, "__dict__", {}).get("_state")  # no __dict__ (slots): not the layout
    fresh.set_result(None)
    return pending, getattr(fresh, "__dict__", {}).get("_state")


_PENDING, _FINISHED = _future_states()


class _SharedConditionFuture(_PubFuture):
    """The same future, made cheaply: all futures of a client share the mux's
    reentrant Condition instead of each making its own.

    Pipelined publishing keeps thousands of futures alive, and a Condition each
    (lock plus waiter deque) cost more Python work than the publish and fed the
    garbage collector. A shared condition wakes every waiter when any future
    settles, so :meth:`result` and :meth:`exception` wait in a loop until their
    own future is done.

    It skips ``Future.__init__`` and sets Future's private fields itself, and the
    mux settles a future nobody waits on by writing them: that depends on
    CPython's layout of :class:`concurrent.futures.Future`, so it is used only
    where :func:`shared_condition_fits` found that layout at import.
    """

    shares_condition = True

    def __init__(self, cond: threading.Condition, subject: str, lane: Lane[Callable[[], None]]):
        # What Future.__init__ sets (_FUTURE_FIELDS), with the shared condition.
        self._condition = cond
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []
        # _init_publish(), inline: one call frame less per pipelined publish.
        self._subject = subject
        self._deadline = 0.0
        self._lane = lane
        self._retry = None
        self._retries = 0

    def _wait_done(self, timeout: float | None) -> bool:
        deadline = Deadline(check_seconds(timeout))
        with self._condition:
            while not self.done():
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def result(self, timeout: float | None = None) -> PubAck:
        if not self._wait_done(timeout):
            raise self._wait_timed_out(timeout)
        return Future.result(self, 0)  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._wait_done(timeout):
            raise self._wait_timed_out(timeout)
        return Future.exception(self, 0)


def shared_condition_fits(future: Callable[[], object] = Future) -> bool:
    """Whether this interpreter's Future is the one :class:`_SharedConditionFuture`
    was written for: checked once, at import.

    The fields ``Future.__init__`` sets must be exactly :data:`_FUTURE_FIELDS`,
    and a future made and settled the shared way must behave as a plain one
    to Future's own methods and to :func:`concurrent.futures.wait`.
    Anything else (another interpreter, a CPython that changed Future)
    selects the plain :class:`_PubFuture`.

    Args:
        future: makes the fresh future whose fields are compared (a test passes another layout).
    """
    try:
        if set(vars(future())) != _FUTURE_FIELDS or _PENDING is None or _PENDING == _FINISHED:
            return False
        cond = threading.Condition(threading.RLock())
        lane: Any = None  # the probe adds no callbacks
        ack: Any = object()
        quiet = _SharedConditionFuture(cond, "probe", lane)
        with cond:  # as AckMux._settle_acks settles a future nobody waits on
            quiet._result = ack
            quiet._state = _FINISHED
            cond.notify_all()
        failed = _SharedConditionFuture(cond, "probe", lane)
        failed.set_exception(ValueError("probe"))
        cancelled = _SharedConditionFuture(cond, "probe", lane)
        pending = _SharedConditionFuture(cond, "probe", lane)
        done, not_done = futures_wait([quiet, failed, pending], timeout=0)
        return (quiet.done() and quiet.result(0) is ack and quiet.exception(0) is None
                and isinstance(failed.exception(0), ValueError)
                and cancelled.cancel() and cancelled.cancelled() and cancelled.done()
                and not pending.done() and done == {quiet, failed} and not_done == {pending})
    except Exception:
        return False


def _future_class() -> type[_PubFuture]:
    """The future class of this interpreter (``NATSJS_SYNC_PUBLIC_FUTURES=1`` forces the plain one)."""
    if os.environ.get("NATSJS_SYNC_PUBLIC_FUTURES", "") not in ("", "0"):
        return _PubFuture
    return _SharedConditionFuture if shared_condition_fits() else _PubFuture


#: The class of every async publish's future, chosen once at import.
PUB_FUTURE: type[_PubFuture] = _future_class()
