"""The declared interface between the core and the layers above it (JetStream, services).

Those layers never touch a private member of :class:`~natsjs_sync.Client`;
they ask :func:`link` for the client's :class:`CoreLink` and use only what the
protocol below declares. Every registration returns a :class:`Handle` whose
``cancel()`` undoes it, so each owner releases what it registered.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._timeout import Deadline

if TYPE_CHECKING:
    from ..msg import Msg
    from ..protocol.headers import HeadersInput
    from ..subscription import Subscription
    from .dispatch import Lane, TimerHandle
    from .logs import ConnectionLogs

log = logging.getLogger("natsjs_sync.core")

T = TypeVar("T")


class Handle:
    """Undo a registration (idempotent)."""

    __slots__ = ("_cancel",)

    def __init__(self, cancel: Callable[[], None]):
        self._cancel: Callable[[], None] | None = cancel

    def cancel(self) -> None:
        fn, self._cancel = self._cancel, None
        if fn is not None:
            fn()


class Release:
    """Undo what an owner holds on a client, once: now, or after the owner is garbage collected.

    Calling it releases on the calling thread (an explicit ``close()``). When
    the owner is collected first, its finalizer only hands the release to the
    client's timer thread (:meth:`CoreLink.release_later`): the cyclic
    collector runs finalizers on whatever thread's allocation crossed its
    threshold, which may be one holding the connection's lock, and a
    release takes that lock (UNSUB). Thread-safe.
    """

    __slots__ = ("_finalizer",)

    def __init__(self, owner: object, hand_off: Callable[[Callable[[], None]], None], fn: Callable[..., None],
                 *args: Any):
        """Args:
            owner: the object whose collection releases.
            hand_off: queues a function for a core thread without taking any lock.
            fn, args: the release itself, ``fn(*args)``.
        """
        self._finalizer = weakref.finalize(owner, _hand_over, hand_off, fn, args)
        self._finalizer.atexit = False  # at interpreter exit the client is going away anyway

    def __call__(self) -> None:
        """Release now, on this thread (never from a finalizer); nothing when already released."""
        info = self._finalizer.detach()
        if info is not None:
            _, fn, args = info[2]
            fn(*args)


def _hand_over(hand_off: Callable[[Callable[[], None]], None], fn: Callable[..., None], args: tuple[Any, ...]) -> None:
    # A finalizer: builds the call and queues it, nothing else (no lock is taken).
    hand_off(functools.partial(fn, *args))


class Releasing:
    """``with core.releasing(fn):`` around a generator's body: ``fn()`` runs when the block ends.

    On this thread when the generator ends or fails; handed to the core's
    thread when the generator is closed (``GeneratorExit``), which the garbage
    collector does on any thread, possibly one holding the connection's lock.
    """

    __slots__ = ("_fn", "_hand_off")

    def __init__(self, hand_off: Callable[[Callable[[], None]], None], fn: Callable[[], None]):
        self._hand_off = hand_off
        self._fn = fn

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if tp is not None and issubclass(tp, GeneratorExit):
            self._hand_off(self._fn)
        else:
            self._fn()


class Hooks:
    """Internal listeners, run in registration order; each must be quick and never block."""

    def __init__(self, what: str, logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None):
        """Args:
            what: names the hooks in the log.
            logger: where a failing hook is logged (the connection's adapter; default: this module's).
        """
        self._what = what
        self._log = log if logger is None else logger
        self._lock = threading.Lock()
        self._fns: dict[int, Callable[..., None]] = {}
        self._ids = itertools.count()

    def add(self, fn: Callable[..., None]) -> Handle:
        key = next(self._ids)
        with self._lock:
            self._fns[key] = fn

        def cancel() -> None:
            with self._lock:
                self._fns.pop(key, None)

        return Handle(cancel)

    def __len__(self) -> int:
        return len(self._fns)

    def run(self, *args: Any) -> None:
        with self._lock:
            fns = list(self._fns.values())
        for fn in fns:
            try:
                fn(*args)
            except Exception:
                self._log.exception("internal %s hook failed", self._what)

    def reset(self) -> None:
        self._lock = threading.Lock()


class CoreLink(Protocol):
    """What JetStream, the stores and services may use of a client's core."""

    name: str | None
    tag: str
    #: The connection's loggers: ``core.logs.to(logger)`` is ``logger`` with the
    #: connection's name and server on every record (see :mod:`.logs`).
    logs: ConnectionLogs

    @property
    def is_connected(self) -> bool: ...

    @property
    def is_closed(self) -> bool:
        """True once the client is closed (by the user, or after giving up reconnecting)."""

    @property
    def server_info(self) -> dict[str, Any]: ...

    @property
    def max_payload(self) -> int: ...

    def new_inbox(self) -> str: ...

    def subscribe(self, subject: str, queue: str | None = None, cb: Callable[[Msg], None] | None = None, *,
                  max_msgs: int | None = None, pending_msgs_limit: int | None = None,
                  pending_bytes_limit: int | None = None, status_filter: Any = None,
                  cls: type[Subscription] | None = None, internal: bool = False) -> Subscription:
        """A subscription (subject and queue validated by the caller); ``status_filter(sub, msg)``
        runs on the reader thread and drops the message when it returns False."""

    def subscribe_internal(self, subject: str, cb: Callable[[Msg], None] | None = None) -> Subscription:
        """A library-owned subscription: no slow-consumer limits, restored on reconnect.
        With ``cb`` the messages go to ``cb`` on a lane of the dispatcher, in order."""

    def route_internal(self, subject: str, route: Callable[[Msg], None]) -> Handle:
        """Call ``route(msg)`` on the reader thread for each message (quick, never user code).
        ``cancel()`` unsubscribes."""

    def publish(self, subject: str, payload: bytes | bytearray | memoryview = b"", reply: str | None = None,
                headers: HeadersInput | None = None) -> None: ...

    def publish_now(self, subject: str, payload: bytes | bytearray | memoryview = b"", reply: str | None = None,
                    headers: HeadersInput | None = None, trusted: bool = False) -> None:
        """Publish and send the buffer from this thread (replies, requests: somebody waits).

        Args:
            subject: where to publish.
            payload: the data, any bytes-like object.
            reply: an optional reply subject (``None`` or ``""``: none).
            headers: optional headers; validated and encoded here.
            trusted: ``subject`` and ``reply`` came from the server (a received
                message's reply subject) and are sent back byte for byte, not
                validated again: a subject the server delivered may hold bytes
                the publish-side check refuses (not UTF-8), and the answer must
                still reach it.

        Raises:
            BadSubjectError: ``subject`` or ``reply`` is not valid (unless ``trusted``).
            BadHeaderError, MaxPayloadError, OutboundBufferLimitError,
                ConnectionClosedError, TimeoutError, NatsConnectionError:
                as :meth:`natsjs_sync.Client.publish_now`.
        """

    def publish_with_reply(self, subject: str, payload: bytes | bytearray | memoryview, reply: bytes,
                           headers: HeadersInput | None) -> None:
        """Publish with a library-made reply subject (already bytes; not validated again)."""

    def publish_trusted(self, subject: str, payload: bytes, reply: bytes | None = None,
                        headers: HeadersInput | None = None) -> None:
        """Publish to a subject the server gave (ack, flow control): no validation."""

    def publish_headed(self, subject: str, payload: bytes, block: bytes) -> None:
        """Publish ``payload`` with a header block the library encoded (a whole
        ``NATS/1.0`` block, checked when it was made), as :meth:`publish` otherwise.

        Raises:
            BadSubjectError, MaxPayloadError, OutboundBufferLimitError,
                ConnectionClosedError: as :meth:`natsjs_sync.Client.publish`.
        """

    @property
    def outlet(self) -> Callable[..., bool]:
        """A publish in one call when it is the common case: ``outlet(subject, payload[, block])``
        appends the frame (an ``HPUB`` with ``block``, a header block the library encoded)
        and returns True when connected, the subject was validated before and the sizes
        fit; otherwise it does nothing and returns False (then call :meth:`publish` or
        :meth:`publish_headed`). The same object for the client's life."""

    def publish_frames(self, frames: bytes, count: int) -> None:
        """Send ``count`` PUB/HPUB frames the library encoded and checked (one buffered write)."""

    def request(self, subject: str, payload: bytes | bytearray | memoryview = b"", timeout: Any = 1.0,
                headers: HeadersInput | None = None) -> Msg: ...

    def flush(self, timeout: Any = 10.0, vouch: bool = True) -> None: ...

    def on_close(self, fn: Callable[[], None]) -> Handle: ...

    def on_reconnect(self, fn: Callable[[], None]) -> Handle: ...

    def on_drain(self, fn: Callable[[Deadline], None]) -> Handle:
        """``fn(deadline)`` runs when a drain has flushed the last publishes, before the close:
        wait there for outstanding work (publish acks)."""

    def on_drain_start(self, fn: Callable[[Deadline], None]) -> Handle:
        """``fn(deadline)`` runs when a drain begins, while publishes still go out and before any
        subscription stops: stop asking for messages and let what was delivered be handled."""

    def on_reader_thread(self) -> bool: ...

    def after_read(self, fn: Callable[[], None]) -> None:
        """Reader thread only (from a route): run ``fn`` on the reader thread once
        every message of the current socket read is routed, before the next read.
        A route collects its messages and settles them in bulk there."""

    def lane(self, handler: Callable[[T], None], name: str) -> Lane[T]:
        """A lane of the client's dispatcher; exceptions go to the client's error_cb."""

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle: ...

    def call_every(self, interval: float, fn: Callable[[], None]) -> TimerHandle: ...

    def attachment(self, key: str, factory: Callable[[], T]) -> T:
        """The client's one instance of a per-client helper (made on first use)."""

    def report_error(self, exc: Exception) -> None: ...

    def release_later(self, fn: Callable[[], None]) -> None:
        """Finalizer-safe: ``fn()`` runs soon on the client's timer thread (nothing once closed).

        Takes no lock (a deque append): a garbage-collection finalizer may run
        on a thread that holds the connection's lock.
        """

    def release_on_collect(self, owner: object, fn: Callable[..., None], *args: Any) -> Release:
        """A :class:`Release` of ``fn(*args)``: call it to release now; if ``owner`` is
        garbage collected first, ``fn(*args)`` runs on the client's timer thread."""

    def releasing(self, fn: Callable[[], None]) -> Releasing:
        """A :class:`Releasing` of ``fn`` for a generator's body (see there)."""


#: client -> its core, both weakly: the core's callbacks (``error_cb=self.on_error``)
#: may hold what holds the client, and a strong value would keep its own key alive
#: for good. The client holds its core, so the core lives as long as the client.
_LINKS: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()


def register(client: Any, core: CoreLink) -> None:
    """Make ``core`` the :func:`link` of ``client``, which must hold ``core`` itself."""
    _LINKS[client] = weakref.ref(core)


def core_of(sub: Subscription) -> CoreLink:
    """The core ``sub`` belongs to (the layers above get a subscription, not its private fields)."""
    core: CoreLink = sub._conn
    return core


def link(client: Any) -> CoreLink:
    """The core of ``client`` (a :class:`~natsjs_sync.Client`).

    Raises:
        TypeError: ``client`` is not a natsjs_sync client.
    """
    try:
        core: CoreLink | None = _LINKS[client]()
    except (KeyError, TypeError):
        core = None
    if core is None:
        raise TypeError(f"expected a natsjs_sync Client, got {type(client).__name__}")
    return core
