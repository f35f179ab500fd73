"""The I/O half of a client: one object that owns the state and wires the parts together.

Parts, one job each: :mod:`.transport` (bytes), :mod:`.opener` (handshake),
:mod:`.writer` (buffer and flusher), :mod:`.reader` (parser and routes),
:mod:`.reconnect` (loss and restore), :mod:`.registry` (subscriptions),
:mod:`.requests` (reply inbox), :mod:`.dispatch` (user code and timers),
:mod:`.fork` (children), :mod:`.stats` (counters). The protocol state
(:class:`ConnState`, the PING ledger) comes from the sans-IO
:mod:`natsjs_sync.protocol.connection`.

Threads of a connected client, all daemons named ``natsjs-<role>-<name>``:
``reader`` (one per connection), ``flusher``, ``timer`` (keep-alives, ack
expiry, heartbeat checks, releases handed over by finalizers; internal code
only), ``reconnect`` (while reconnecting) and ``dispatch-N`` workers (user
code; as many as are busy, up to ``max_callback_threads``).

Locks: ``lock`` guards the state, the write buffer, the PING ledger, the
registry's mutations and ``transport``; ``writer.send_lock`` keeps writes in
buffer order and is taken *before* ``lock`` (under ``lock`` it is only
ever tried without waiting). Nothing else is held while user
code runs or while a socket call blocks, except ``send_lock`` around a write
(bounded by the write timeout). ``send_lock`` knows its holder
(:class:`~natsjs_sync._core.writer.SendLock`): a signal handler's exception
raised into a thread between taking it and the code that lets go of it is
met by a handler that lets go of this thread's hold only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._timeout import Deadline, TimeoutArg
from ..errors import (
    AuthorizationError,
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    DrainTimeoutError,
    MaxPayloadError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    NotSentError,
    OutboundBufferLimitError,
    SecureConnRequiredError,
    ServerError,
    StaleConnectionError,
    TimeoutError,
    no_servers_error,
)
from ..msg import Msg, bound_msg_class
from ..protocol import commands
from ..protocol.connection import UP, ConnState, PingLedger, StateMachine, server_error
from ..protocol.headers import HeadersInput, encode_headers
from ..protocol.jetstream.status import is_no_responders
from ..protocol.nuid import NUID
from ..protocol.subjects import PUB_SUBJECTS as _PUB_SUBJECTS
from ..protocol.subjects import check_control_line, publish_subject, trusted_subject
from . import fork
from .dispatch import Dispatcher, Lane, Timer, TimerHandle, current_lane, on_dispatcher_thread
from .dispatch import log as dispatch_log
from .logs import ConnectionLog, ConnectionLogs
from .opener import Opened, TlsPolicy, TransportFactory, open_server, open_transport
from .options import UNLIMITED, ConnectOptions, pending_limit
from .pool import PoolEntry, ServerPool
from .reader import ReadSession, shared_role_fd, start_reader
from .reconnect import Reconnector
from .registry import Entry, Registry
from .requests import ResponseMux, Waiter
from .spi import Handle, Hooks, Release, Releasing
from .spi import log as spi_log
from .stats import Stats
from .writer import APPEND_WITHOUT_LOCK, Writer

if TYPE_CHECKING:
    from ..subscription import Subscription
    from .transport import Transport

log = logging.getLogger("natsjs_sync.connection")

T = TypeVar("T")

_CLOSED_OR_DRAINED = (ConnState.DRAINING_PUBS, ConnState.CLOSED)
# Subject and reply together below this never come near the control-line limit.
_LINE_ROOM = 3000
_CONNECTED = ConnState.CONNECTED  # read on every publish: a module global, not an enum lookup
#: The state in which append() appends without the lock (none on a free-threaded interpreter).
_APPEND_FREELY = _CONNECTED if APPEND_WITHOUT_LOCK else None
#: Seconds between the timer thread's runs of the releases finalizers handed over
#: (see :meth:`Connection.release_later`); started by the first owner that may need it.
RELEASE_INTERVAL = 0.2


def as_payload(payload: Any) -> tuple[bytes | bytearray | memoryview, int]:
    """A payload and its size in bytes (a memoryview or array counts bytes, not items).

    Raises:
        TypeError: not a bytes-like object.
    """
    cls = payload.__class__
    if cls is bytes or cls is bytearray:
        return payload, len(payload)
    try:
        view = memoryview(payload)
    except TypeError:
        raise TypeError(f"payload must be bytes-like, not {cls.__name__}") from None
    if view.ndim == 1 and view.itemsize == 1 and view.c_contiguous:
        return view, view.nbytes
    data = view.tobytes()
    return data, len(data)


class Connection:
    """The core of one :class:`~natsjs_sync.Client`. Thread-safe."""

    def __init__(self, options: ConnectOptions):
        self.options = options
        self.name = options.name
        self.tag = options.name or "client"
        #: The records of this connection carry its name and server (see :mod:`.logs`).
        self.logs = ConnectionLogs(self)
        self.log: ConnectionLog = self.logs.to(log)
        self.lock = threading.Lock()
        self.machine = StateMachine(ConnState.CONNECTING)
        self.registry = Registry()
        self.requests = ResponseMux()
        self.ledger: PingLedger[Waiter] = PingLedger(options.max_outstanding_pings)
        self.writer = Writer(self)
        self.stats = Stats(self.writer.outlet)
        self.machine.on_change = self._state_changed
        self.reconnector = Reconnector(self)
        self.dispatcher = Dispatcher(self.tag, options.max_callback_threads)
        self.dispatcher.log = self.logs.to(dispatch_log)
        self.events: Lane[Callable[[], None]] = self.dispatcher.lane(_call, f"events-{self.tag}")
        self.timer = Timer(self.tag)
        self.timer.log = self.logs.to(dispatch_log)
        self.tls = TlsPolicy(options)
        self.pool = self._new_pool()
        self.transport: Transport | None = None
        #: How a server is opened (the real sockets; tests plug in an in-memory transport).
        self.transport_factory: TransportFactory = open_transport
        self.addr: Any = None
        self.info: dict[str, Any] = {}
        self.msg_cls = bound_msg_class(self)
        self.nuid = NUID()
        self.last_error: Exception | None = None
        self.connected_event = threading.Event()
        self.close_hooks = Hooks("close", self.logs.to(spi_log))
        self.reconnect_hooks = Hooks("reconnect", self.logs.to(spi_log))
        self.drain_hooks = Hooks("drain", self.logs.to(spi_log))
        self.drain_start_hooks = Hooks("drain start", self.logs.to(spi_log))
        self.pid = os.getpid()
        self._reader: threading.Thread | None = None
        #: ``self._reader.ident``, kept beside it: a request compares it without a Python call.
        self._reader_ident: int | None = None
        self._readers: set[threading.Thread] = set()  # the current one and any still ending
        #: The current connection's read side; with ``requester_reads`` its role lets a
        #: requester read its own reply (see :class:`.reader.ReadSession`).
        self.read_session: ReadSession | None = None
        self._keepalive: TimerHandle | None = None
        self._revive_lock = threading.Lock()
        self._attachments: dict[str, Any] = {}
        #: Functions the reader runs once the events of the current socket read are routed.
        self.read_end: list[Callable[[], None]] = []
        #: Releases handed over by finalizers, run by the timer thread (see release_later).
        self._releases: deque[Callable[[], None]] = deque()
        self._release_tick: TimerHandle | None = None
        fork.track(self)

    def _new_pool(self) -> ServerPool:
        from .._backoff import Backoff

        opts = self.options
        jitter = opts.reconnect_jitter_tls if opts.uses_tls else opts.reconnect_jitter
        return ServerPool(opts.servers, randomize=not opts.no_randomize,
                          max_reconnect_attempts=opts.max_reconnect_attempts,
                          backoff=Backoff(opts.reconnect_time_wait, opts.reconnect_time_wait, 1.0, jitter))

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ConnState:
        return self.machine.state

    @property
    def is_connected(self) -> bool:
        return self.machine.state in UP and self.transport is not None

    @property
    def is_closed(self) -> bool:
        return self.machine.state is ConnState.CLOSED

    @property
    def owns_process(self) -> bool:
        return self.pid == os.getpid()

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self.info)

    def ready(self, draining_ok: bool = False) -> None:
        """The slow path of every public call: revive after fork, refuse when closed."""
        state = self.machine.state
        if state is ConnState.FORKED:
            self._revive_after_fork()
        elif state is ConnState.DRAINING_PUBS and draining_ok:
            return
        elif state is ConnState.CLOSED:
            raise ConnectionClosedError("the connection is closed")
        elif state in _CLOSED_OR_DRAINED:
            raise ConnectionDrainingError("the connection is draining")

    def check_writable(self, extra: int) -> None:
        """Lock held, state not CONNECTED: may ``extra`` more bytes be buffered?"""
        state = self.machine.state
        if state in _CLOSED_OR_DRAINED or state is ConnState.FORKED:
            raise ConnectionClosedError("the connection is closed")
        if state in (ConnState.RECONNECTING, ConnState.CONNECTING):
            held = len(self.writer.buffer)
            if held + extra > self.options.pending_size:
                raise OutboundBufferLimitError(
                    f"reconnect buffer full: {held} bytes held while reconnecting "
                    f"(pending_size={self.options.pending_size}); nothing was sent for this message")

    # ------------------------------------------------------------------ connecting

    def start(self, deadline: Deadline | None = None) -> None:
        """The first connection: each server once, in pool order.

        With ``retry_on_failed_connect`` a failure is not raised: the client
        keeps trying in the background, as after a disconnect.

        Args:
            deadline: a bound on the whole first connection: each server gets what
                is left of it (at most its ``connect_timeout``), and once it has
                passed no further server is tried. ``None``: each server gets its
                ``connect_timeout``.

        Raises:
            NoServersError, AuthorizationError, SecureConnRequiredError.
        """
        errors: list[str] = []
        failures: list[Exception] = []
        last: Exception | None = None
        for entry in list(self.pool.entries):
            if deadline is not None and deadline.expired():
                errors.append(f"{entry.addr.url}: not tried, the time to connect ran out")
                continue
            try:
                opened = self.open(entry, deadline)
            except (AuthorizationError, SecureConnRequiredError) as exc:
                if not self.options.retry_on_failed_connect:
                    self._abandon()
                    raise  # the settings are wrong: another server would say the same
                errors.append(f"{entry.addr.url}: {exc}")
                last = exc
                continue
            except NatsError as exc:
                self.pool.failed(entry)
                errors.append(f"{entry.addr.url}: {exc}")
                failures.append(exc)
                last = exc
                continue
            with self.lock:
                self.attach_locked(opened, entry)
            self.start_reader(opened)
            self.writer.start()
            self.after_attach(opened.info, initial=True)
            # The servers that failed before this one worked, each to error_cb (as nats-py
            # reports every failed attempt); a connect that fails raises them instead.
            for failure in failures:
                self.report_error(failure)
            self.log.info("connected to %s (server %s, version %s)", entry.addr, opened.info.get("server_name")
                          or opened.info.get("server_id"), opened.info.get("version"))
            return
        err = no_servers_error("could not connect to any server: " + "; ".join(errors), last)
        if self.options.retry_on_failed_connect and self.options.allow_reconnect:
            with self.lock:
                self.machine.to(ConnState.RECONNECTING)
            self.report_error(err)
            self.writer.start()
            self.reconnector.start()
            return
        self._abandon()
        raise err

    def _abandon(self) -> None:
        """A first connect that failed: end the threads made so far."""
        with self.lock:
            self.machine.to(ConnState.CLOSED)
        self.timer.close()
        self.dispatcher.close()

    @property
    def max_payload(self) -> int:
        """The server's max_payload (1 MiB until a server said): kept on the outlet,
        whose plain publish checks it."""
        return int(self.writer.outlet.max_payload)

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self.writer.outlet.max_payload = value

    @property
    def outlet(self) -> Callable[..., bool]:
        """The writer's outlet (see :mod:`.outlet`): the same object for the connection's life."""
        return self.writer.outlet

    def _state_changed(self, state: ConnState) -> None:
        # A plain publish appends without the lock in exactly the states the
        # general path does (connected, GIL on): the outlet reads this flag.
        self.writer.outlet.open = int(state is _APPEND_FREELY)

    def open(self, entry: PoolEntry, deadline: Deadline | None = None) -> Opened:
        """Open and handshake one server (nothing is shared yet), within ``connect_timeout``
        and what is left of ``deadline``."""
        self.pool.attempted(entry, time.monotonic())
        return open_server(entry.addr, self.options, self.tls, self.msg_cls, self.transport_factory, deadline)

    def attach_locked(self, opened: Opened, entry: PoolEntry) -> None:
        """Lock held: make ``opened`` the current connection and go CONNECTED."""
        opened.transport.set_write_timeout(self.options.write_timeout)
        self.transport = opened.transport
        self.addr = entry.addr
        self.info = opened.info
        # The handshake's servers join silently before the reader starts: only an INFO
        # that comes later announces new ones (nats-py, on the first connect and a reconnect).
        self._add_discovered(opened.info, announce=False)
        self.max_payload = int(opened.info.get("max_payload", self.max_payload))
        self.machine.to(ConnState.CONNECTED)
        self.pool.connected(entry, time.monotonic())
        self.connected_event.set()
        if self._keepalive is None and self.options.ping_interval > 0:
            self._keepalive = self.timer.call_every(self.options.ping_interval, self._keepalive_tick)

    def start_reader(self, opened: Opened) -> None:
        fd = shared_role_fd(opened.transport) if self.options.requester_reads else None
        session = ReadSession(self, opened.transport, opened.parser, fd)
        self.read_session = session
        self._reader = start_reader(self, opened.transport, opened.parser, opened.leftover, session)
        self._reader_ident = self._reader.ident
        self._readers = {t for t in self._readers if t.is_alive()}
        self._readers.add(self._reader)

    def after_attach(self, info: dict[str, Any], initial: bool = False) -> None:
        self._add_discovered(info, announce=not initial)

    def _add_discovered(self, info: dict[str, Any], announce: bool = True) -> None:
        urls = info.get("connect_urls")
        if not urls or self.options.ignore_discovered_servers:
            return
        scheme = self.addr.scheme if self.addr is not None else "nats"
        added = self.pool.add_discovered(urls, scheme)
        if added:
            self.log.info("discovered servers: %s", ", ".join(a.url for a in added))
            if announce:
                self.emit(self.options.discovered_server_cb)

    def connection_lost(self, exc: BaseException, transport: Transport) -> None:
        self.reconnector.lost(exc, transport)

    # ------------------------------------------------------------------ incoming

    def send_pong(self) -> None:
        with self.lock:
            if self.transport is not None:
                pong = commands.PONG
                self.writer.buffer += self.ledger.control_out(pong, self.writer.mark_locked() + len(pong))
                self.writer.wake()

    def on_pong(self) -> None:
        with self.lock:
            waiter, vouched = self.ledger.pong()
        if waiter is not None:
            waiter.set(True if vouched else NatsConnectionError(
                "the connection was lost before this flush: messages published before it may not have arrived"))

    def on_info(self, options: dict[str, Any], transport: Transport) -> None:
        """An INFO after the handshake: cluster changes, lame duck mode."""
        self.log.debug("INFO from %s: %s", self.addr, sorted(options))
        self.info = {**self.info, **options}
        if "max_payload" in options:
            self.max_payload = int(options["max_payload"])
        self._add_discovered(options)
        if options.get("ldm"):
            self.log.warning("server %s entered lame duck mode", self.addr)
            self.emit(self.options.lame_duck_mode_cb)
            if self.pool.mark_lame_duck() and self.options.allow_reconnect:
                # Move to another server now rather than wait to be cut off.
                self.connection_lost(NatsConnectionError("the server entered lame duck mode"), transport)

    def on_err(self, text: str) -> None:
        self.log.debug("-ERR from %s: %s", self.addr, text)
        self.stats.errors_received += 1
        self.report_error(server_error(text))

    def last_server_error_suffix(self) -> str:
        err = self.last_error
        return f" ({err})" if isinstance(err, ServerError) else ""

    def _keepalive_tick(self) -> None:
        """Timer thread: send a keep-alive PING, or declare the connection stale."""
        with self.lock:
            transport = self.transport
            if transport is None or self.machine.state not in (ConnState.CONNECTED, ConnState.DRAINING_SUBS):
                return
            ping = self.ledger.keepalive(self.writer.mark_locked() + len(commands.PING))
            if ping is not None:
                self.writer.buffer += ping
                self.writer.wake()
                return
        self.log.warning("connection to %s is stale: the server stopped answering PINGs", self.addr)
        self.connection_lost(StaleConnectionError("the server stopped answering PINGs"), transport)

    # ------------------------------------------------------------------ user code and errors

    def emit(self, cb: Callable[..., None] | None, *args: Any) -> None:
        """Run a connection callback on the events lane (in order, never on the reader)."""
        if cb is not None:
            self.events.put(lambda: cb(*args))

    def report_error(self, exc: Exception) -> None:
        """Remember an asynchronous error and hand it to ``error_cb``."""
        self.last_error = exc
        cb = self.options.error_cb
        if cb is not None:
            self.emit(cb, exc)
        elif not isinstance(exc, NatsError):
            self.log.error("unhandled exception in a callback", exc_info=exc)
        else:
            self.log.warning("%s", exc)

    def lane(self, handler: Callable[[T], None], name: str) -> Lane[T]:
        return self.dispatcher.lane(handler, name, on_error=self._lane_error)

    def _lane_error(self, exc: BaseException) -> None:
        self.report_error(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        return self.timer.call_later(delay, fn)

    def call_every(self, interval: float, fn: Callable[[], None]) -> TimerHandle:
        return self.timer.call_every(interval, fn)

    def on_reader_thread(self) -> bool:
        """The reader thread, or a caller holding the read role (reading for the reader)."""
        if threading.current_thread() is self._reader:
            return True
        session = self.read_session
        return session is not None and session.held_here()

    def may_wait_for_socket(self) -> bool:
        """False on the reader threads (the current one and any still ending), a
        caller holding the read role and the timer thread: they must never block
        on a peer that stops reading."""
        session = self.read_session
        if session is not None and session.role is not None and session.role.mine():
            return False  # held_here(), inline: a responder's every reply asks
        me = threading.current_thread()
        return not (me in self._readers or me is self.timer.thread)

    def _check_may_wait_for_reply(self, what: str, subject: str | None = None) -> None:
        """Raise at once where a wait for the server's answer would wait for this very thread.

        The reader thread and a caller holding the read role route what they read;
        an answer could only be read by them, so waiting would last the whole timeout.

        Raises:
            TimeoutError: on such a thread.
        """
        if self.on_reader_thread():
            if subject is not None:  # named only here: a request pays no formatting
                what = f"{what} on {subject!r}"
            raise TimeoutError(f"{what}: called while this thread reads the connection (a route);"
                               " the answer could only be read by this thread")

    def _wait_reply(self, waiter: Waiter, deadline: Deadline) -> bool:
        """Wait for a request's reply: read it from the socket here when the read role
        is free (``requester_reads``), else as the reader thread hands it over."""
        session = self.read_session
        if session is not None and session.role is not None and waiter.value is None:
            session.read_for(waiter, deadline)
        return waiter.wait(deadline.remaining())

    def after_read(self, fn: Callable[[], None]) -> None:
        self.read_end.append(fn)

    def attachment(self, key: str, factory: Callable[[], T]) -> T:
        with self.lock:
            obj = self._attachments.get(key)
            if obj is None:
                obj = self._attachments[key] = factory()
        return obj

    def on_close(self, fn: Callable[[], None]) -> Handle:
        return self.close_hooks.add(fn)

    def on_reconnect(self, fn: Callable[[], None]) -> Handle:
        return self.reconnect_hooks.add(fn)

    def on_drain(self, fn: Callable[[Deadline], None]) -> Handle:
        return self.drain_hooks.add(fn)

    def on_drain_start(self, fn: Callable[[Deadline], None]) -> Handle:
        return self.drain_start_hooks.add(fn)

    # ------------------------------------------------------------------ writing

    def new_inbox(self) -> str:
        return f"{self.options.inbox_prefix}.{self.nuid.next()}"

    def too_big(self, size: int) -> MaxPayloadError:
        return MaxPayloadError(f"message of {size} bytes exceeds the server's max_payload of {self.max_payload}")

    def encode(self, subject: str, payload: Any, reply: str | bytes | None,
               headers: HeadersInput | None, trusted: bool = False) -> tuple[bytes, int]:
        """A PUB/HPUB frame and the message's size; validates unless ``trusted``."""
        payload, size = as_payload(payload)
        subj = trusted_subject(subject) if trusted else publish_subject(subject)
        if not reply:  # None or "" (a received message's empty reply): no reply subject
            rep = None
        elif isinstance(reply, bytes):
            rep = reply
        else:
            rep = trusted_subject(reply) if trusted else publish_subject(reply)
        if rep is not None and not trusted and len(subj) + len(rep) > _LINE_ROOM:
            check_control_line(subj, rep)
        if headers is None:
            frame = commands.pub(subj, payload, rep)
        else:
            hdr = encode_headers(headers)
            size += len(hdr)
            frame = commands.hpub(subj, hdr, payload, rep)
        if size > self.writer.outlet.max_payload:
            raise self.too_big(size)
        return frame, size

    def append(self, frame: bytes, size: int, now: bool, deadline: Deadline | None = None,
               waiter: Waiter | None = None) -> None:
        """Buffer one encoded message; with ``now`` send it from this thread.

        Args:
            now: send from this thread. With a ``deadline`` (a request) the
                bytes are left to a thread sending at this moment, which takes
                them along (the request's reply waiter hears if that write
                fails); the own write sends what the socket takes before
                ``deadline`` and leaves the rest to the flusher. Without one
                (publish_now) this waits for the send lock and the socket as
                the flusher would, up to ``write_timeout``; on the reader or
                timer thread, which must not wait, the flusher sends it.
            waiter: a request's reply waiter (with ``now``): it learns where the
                frame ends in the stream (``waiter.end``), to be withdrawn at its
                deadline while unsent, and kept waiting across a reconnect.

        Raises:
            NatsError: ``now`` and the write that carried this message failed
                (its bytes are lost with the connection).
        """
        machine = self.machine
        writer = self.writer
        if now and deadline is None and not self.may_wait_for_socket():
            now = False  # publish_now on the reader or timer thread: the flusher sends it
        if machine.state is _APPEND_FREELY and not now:
            writer.append_connected(frame)
            outlet = writer.outlet  # the publish counters (see Stats)
            outlet.out_msgs += 1
            outlet.out_bytes += size
            return
        if machine.state is not _CONNECTED:
            self.ready()
        # This thread holds the send lock further up its stack when this is a signal handler's
        # publish that interrupted a write: the claim below fails, and the handler must not let
        # go of that write's hold (it would go on without it, and fail its own release).
        outer = writer.send_lock.mine()
        try:
            with self.lock:
                if machine.state is not _CONNECTED:
                    self.check_writable(len(frame))
                at = len(writer.buffer)  # this frame goes here, or after plain publishes appended meanwhile
                writer.buffer += frame
                outlet = writer.outlet
                outlet.out_msgs += 1
                outlet.out_bytes += size
                if now:
                    if waiter is None:
                        mine = writer.mark_locked()
                    else:
                        mine = waiter.end = writer.end_of_locked(frame, at)
                    claimed = writer.claim_locked()
                    # A request whose bytes another thread is sending: that thread
                    # sends them before it lets go of the send lock, so there is
                    # nothing to wait for here (a failed write fails the reply waiter).
                    if not claimed and deadline is not None:
                        return
                elif len(writer.buffer) <= outlet.threshold:
                    writer.wake()
                    return
            if not now:
                writer.back_pressure()
            elif claimed:
                writer.send_held(deadline, mine)
            else:
                writer.send_now(None, mine)  # publish_now: after the sending thread, to hear how it went
        except BaseException:
            # Raised into this thread (a signal handler's exception) after the claim, before
            # send_held's own handler took over: nobody else would ever let go. The release is
            # one call that lets go of this thread's hold only (see writer.SendLock).
            if outer:
                raise
            try:
                writer.send_lock.release()
            except RuntimeError:
                pass  # not claimed, or let go already
            else:
                writer.wake_unlocked()  # bytes others left to this thread go out with the flusher
            raise

    def publish(self, subject: str, payload: Any = b"", reply: str | None = None,
                headers: HeadersInput | None = None) -> None:
        self.append(*self.encode(subject, payload, reply, headers), now=False)

    def publish_now(self, subject: str, payload: Any = b"", reply: str | None = None,
                    headers: HeadersInput | None = None, trusted: bool = False) -> None:
        # trusted: a subject the server gave (a message's reply), sent as received.
        if trusted and reply is None and headers is None and payload.__class__ is bytes:
            # A responder's plain reply (Msg.respond): encode() inline, one format.
            subj = subject.encode("utf-8", "surrogateescape")  # trusted_subject()
            size = len(payload)
            if size > self.writer.outlet.max_payload:
                raise self.too_big(size)
            frame = b"PUB %b %d\r\n%b\r\n" % (subj, size, payload)
        else:
            frame, size = self.encode(subject, payload, reply, headers, trusted)
        if not self.writer.send_direct(frame, size, None, None):
            self.append(frame, size, now=True)

    def publish_with_reply(self, subject: str, payload: Any, reply: bytes, headers: HeadersInput | None) -> None:
        if headers is None and payload.__class__ is bytes:
            # Pipelined JetStream publishing without headers: encode() inline, one format.
            subj = publish_subject(subject)
            if len(subj) + len(reply) > _LINE_ROOM:
                check_control_line(subj, reply)
            size = len(payload)
            if size > self.max_payload:
                raise self.too_big(size)
            self.append(b"PUB %b %b %d\r\n%b\r\n" % (subj, reply, size, payload), size, now=False)
            return
        self.append(*self.encode(subject, payload, reply, headers), now=False)

    def publish_trusted(self, subject: str, payload: bytes, reply: bytes | None = None,
                        headers: HeadersInput | None = None) -> None:
        if reply is None and headers is None and payload.__class__ is bytes:
            # The JetStream ack path (a library-made subject, a small body): no checks, one format.
            size = len(payload)
            if size > self.max_payload:
                raise self.too_big(size)
            self.append(b"PUB %b %d\r\n%b\r\n" % (trusted_subject(subject), size, payload), size,
                        now=False)
            return
        self.append(*self.encode(subject, payload, reply, headers, trusted=True), now=False)

    def publish_headed(self, subject: str, payload: bytes, block: bytes) -> None:
        if self.writer.outlet(subject, payload, block):
            return  # connected, a validated subject: laid out by the outlet
        size = len(block) + len(payload)
        if size > self.max_payload:
            raise self.too_big(size)
        self.append(commands.hpub(publish_subject(subject), block, payload), size, now=False)

    def publish_frames(self, frames: bytes, count: int) -> None:
        self.append(frames, len(frames), now=False)
        self.writer.outlet.out_msgs += count - 1  # append() counted one

    def control_locked(self, data: bytes) -> None:
        """Lock held: queue SUB/UNSUB bytes. Without a connection they are not
        needed: a reconnect restores the subscriptions from the registry."""
        if self.transport is not None and self.machine.state in UP:
            self.writer.buffer += self.ledger.control_out(data, self.writer.mark_locked() + len(data))
            self.writer.wake()

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, subject: str, queue: str | None = None, cb: Callable[[Msg], None] | None = None, *,
                  max_msgs: int | None = None, pending_msgs_limit: int | None = None,
                  pending_bytes_limit: int | None = None, status_filter: Any = None,
                  cls: type[Subscription] | None = None, internal: bool = False) -> Subscription:
        """Make and register a subscription (the subject and queue are already validated).

        Pending limits: ``None`` takes the client's defaults, ``<= 0`` means none.
        """
        from ..subscription import Subscription

        if self.machine.state is not ConnState.CONNECTED:
            self.ready()
        opts = self.options
        sub = (cls or Subscription)(
            self, self.registry.next_sid(), subject, queue, cb,
            pending_limit(pending_msgs_limit, opts.pending_msgs_limit, "pending_msgs_limit"),
            pending_limit(pending_bytes_limit, opts.pending_bytes_limit, "pending_bytes_limit"),
            status_filter)
        if max_msgs:
            sub.set_max(max_msgs)
        self.add_subscription(sub, max_msgs, internal)
        return sub

    def subscribe_internal(self, subject: str, cb: Callable[[Msg], None] | None = None) -> Subscription:
        """A library-owned subscription: no slow-consumer limits, restored on reconnect."""
        return self.subscribe(subject, cb=cb, pending_msgs_limit=UNLIMITED, pending_bytes_limit=UNLIMITED,
                              internal=True)

    def add_subscription(self, sub: Subscription, max_msgs: int | None = None, internal: bool = False) -> None:
        """Register ``sub`` and send its SUB in one step (see :mod:`.reconnect`).

        Args:
            sub: the subscription; its sid is already drawn.
            max_msgs: send an UNSUB with this limit right after the SUB.
            internal: a subscription of the client itself (a drain's own machinery),
                allowed while draining.

        Raises:
            ConnectionClosedError: the connection is closed.
            ConnectionDrainingError: the connection is draining (nats-py's class; also a
                ConnectionClosedError).
        """
        frame = commands.sub(sub.subject.encode(), sub.sid, sub.queue.encode() if sub.queue else None)
        if max_msgs:
            frame += commands.unsub(sub.sid, max_msgs)
        with self.lock:
            state = self.machine.state
            if state is ConnState.CLOSED:
                raise ConnectionClosedError("the connection is closed")
            if not internal and state in (ConnState.DRAINING_SUBS, ConnState.DRAINING_PUBS):
                raise ConnectionDrainingError("the connection is draining")
            self.registry.add(Entry(sub.sid, sub.subject, sub.queue, sub.route, sub.remaining, sub))
            self.control_locked(frame)

    def route_internal(self, subject: str, route: Callable[[Msg], None]) -> Handle:
        if self.machine.state is not ConnState.CONNECTED:
            self.ready()
        sid = self.registry.next_sid()
        with self.lock:
            if self.machine.state is ConnState.CLOSED:
                raise ConnectionClosedError("the connection is closed")
            self.registry.add(Entry(sid, subject, None, route))
            self.control_locked(commands.sub(subject.encode(), sid))

        def cancel() -> None:
            with self.lock:
                if self.registry.remove(sid) is not None:
                    self.control_locked(commands.unsub(sid))

        return Handle(cancel)

    def remove_subscription(self, sid: int) -> None:
        """Forget ``sid`` (the server already knows: max reached, or drained)."""
        with self.lock:
            self.registry.remove(sid)

    def unsubscribe(self, sub: Subscription, limit: int | None) -> None:
        """End ``sub`` now (``limit`` falsy) or after ``limit`` messages in all.

        Raises:
            BadSubscriptionError: it was unsubscribed, drained or closed already.
            ConnectionClosedError: the connection is closed.
        """
        if self.machine.state is ConnState.CLOSED:
            raise ConnectionClosedError("the connection is closed")
        if not sub.is_valid:
            if sub.ended_at_limit:
                # The server dropped it at the limit already: nothing to send. Expected
                # end, not a mistake (nats-py accepts it); a plain unsubscribe drops the queue.
                if not limit:
                    sub.finish_unsubscribed()
                return
            raise BadSubscriptionError(f"subscription to {sub.subject!r} has already ended")
        ended = False
        with self.lock:
            if limit:
                sub.set_max(limit)
                if sub.delivered >= limit:
                    self.registry.remove(sub.sid)
                    ended = True
                self.control_locked(commands.unsub(sub.sid, limit))
            else:
                self.registry.remove(sub.sid)
                self.control_locked(commands.unsub(sub.sid))
        if limit:
            if ended:
                sub.finish_drained()
        else:
            sub.finish_unsubscribed()

    def drain_subscription(self, sub: Subscription, deadline: Deadline) -> None:
        """Stop interest, let the queue be handled, then end the subscription.

        The subscription ends even when the server does not confirm the
        UNSUB in time (as in nats.go): it leaves the registry, so a reconnect
        does not restore it, and what is queued is still handed out; the
        flush's error is raised. A retry then waits again for a callback to
        handle the queue (an iterator has nothing left to wait for).
        """
        if sub.is_valid and not sub.is_draining:
            sub.mark_draining()
            with self.lock:
                self.control_locked(commands.unsub(sub.sid))
            try:
                self.flush(deadline, vouch=False)  # after the PONG nothing more can arrive for this sid
            finally:
                # Left registered on a failed flush, it stayed "draining" for good:
                # a retry skipped the flush and a reconnect subscribed it again.
                self.remove_subscription(sub.sid)
                sub.finish_drained()
        if sub.has_callback:
            if current_lane() is sub.lane:
                return  # its own callback: the queue is handled once this callback returns
            if not sub.wait_done(deadline.remaining()):
                raise TimeoutError(f"draining {sub.subject!r} did not finish in time")

    # ------------------------------------------------------------------ releases from finalizers

    def release_later(self, fn: Callable[[], None]) -> None:
        """Finalizer-safe: ``fn()`` runs soon on the timer thread (dropped once closed).

        A garbage-collection finalizer runs on whatever thread's allocation
        crossed the collector's threshold, possibly one that holds :attr:`lock`
        (every subscribe takes it), so it must take no lock: a deque append
        takes none. The timer thread, which holds nothing, performs it.
        """
        self._releases.append(fn)
        if self.machine.state is ConnState.CLOSED:
            self._releases.clear()  # the close released everything: keep nothing alive

    def _start_releasing(self) -> None:
        """Normal context (never a finalizer): make sure the timer runs handed-over releases."""
        if self._release_tick is None:
            with self.lock:
                if self._release_tick is None:
                    self._release_tick = self.timer.call_every(RELEASE_INTERVAL, self.run_releases)

    def run_releases(self) -> None:
        """Timer thread: perform the releases finalizers handed over."""
        releases = self._releases
        while releases:
            try:
                fn = releases.popleft()
            except IndexError:
                return
            try:
                fn()
            except NatsError:
                pass  # already ended, or the client closed: its owner is gone, nobody to tell
            except Exception:
                self.log.exception("releasing a collected owner's subscription failed")

    def release_on_collect(self, owner: object, fn: Callable[..., None], *args: Any) -> Release:
        self._start_releasing()
        return Release(owner, self.release_later, fn, *args)

    def releasing(self, fn: Callable[[], None]) -> Releasing:
        self._start_releasing()
        return Releasing(self.release_later, fn)

    # ------------------------------------------------------------------ requests and flush

    def ensure_response_inbox(self) -> None:
        """Subscribe the request inbox ``<prefix>.<nuid>.*`` (once; restored on reconnect)."""
        if self.requests.sid is not None:
            return
        with self.lock:
            if self.requests.sid is not None:
                return
            prefix = f"{self.options.inbox_prefix}.{self.nuid.next()}."
            sid = self.registry.next_sid()
            self.registry.add(Entry(sid, prefix + "*", None, self.requests.reply_route))
            self.control_locked(commands.sub((prefix + "*").encode(), sid))
            self.requests.start(prefix, sid)

    def request(self, subject: str, payload: Any = b"", timeout: TimeoutArg = 1.0,
                headers: HeadersInput | None = None) -> Msg:
        """Publish a request and wait for the first reply (see :meth:`Client.request`).

        Every request takes this path, most of them in a loop: the steps of
        :meth:`_check_may_wait_for_reply` and :meth:`_wait_reply` are written out
        here for the common case, and :meth:`_request_frame` encodes a bytes
        payload without headers inline, each Python call saved being a good part
        of the request's own CPU time.

        Raises:
            NotSentError: the deadline passed while the request was still buffered:
                it was withdrawn, nothing was sent.
            TimeoutError: the request was sent, no reply came in time.
        """
        deadline = Deadline.of(timeout, 1.0)
        if self.machine.state is not _CONNECTED:
            self.ready()
        session = self.read_session
        role = None if session is None else session.role
        # Only the reader thread (its ident) and a holder of the read role can be refused:
        # the full check runs for them alone.
        if (role is not None and role.mine()) or threading.get_ident() == self._reader_ident:
            self._check_may_wait_for_reply("request", subject)
        requests = self.requests
        if requests.sid is None:
            self.ensure_response_inbox()
        token, waiter, reply = requests.prepare_one()
        # Entered here, not in the call above: no check point (a call's return) lies between this
        # and the try that forgets it, where a signal handler's exception would leave it behind.
        requests.waiting[token] = waiter
        try:
            frame, size = self._request_frame(subject, payload, reply, headers)
            if not self.writer.send_direct(frame, size, waiter, deadline):
                self.append(frame, size, True, deadline, waiter)  # now=True (positional: a cheaper call)
            # _wait_reply(), with no second wait once this thread read the reply itself.
            session = self.read_session
            if (session is None or session.role is None or waiter.value is not None
                    or not session.read_for(waiter, deadline)) and not waiter.wait(deadline.remaining()):
                self._no_reply(subject, frame, waiter)
        finally:
            requests.waiting.pop(token, None)  # forget(token)
        msg = waiter.value
        if isinstance(msg, Exception):
            raise msg
        if msg.raw_headers is not None and is_no_responders(msg.raw_headers, msg.data):
            raise NoRespondersError(f"no responders on {subject!r}")
        return msg  # type: ignore[no-any-return]

    def _request_frame(self, subject: str, payload: Any, reply: bytes,
                       headers: HeadersInput | None) -> tuple[bytes, int]:
        """A request's frame and payload size: :meth:`encode`, with its steps written out for
        the common case (a bytes payload, no headers): the same checks, in the same order."""
        if headers is not None or payload.__class__ is not bytes:
            return self.encode(subject, payload, reply, headers)
        subj = _PUB_SUBJECTS.get(subject) if subject.__class__ is str else None
        if subj is None:
            subj = publish_subject(subject)
        if len(subj) + len(reply) > _LINE_ROOM:
            check_control_line(subj, reply)
        size = len(payload)
        if size > self.writer.outlet.max_payload:
            raise self.too_big(size)
        return b"PUB %b %b %d\r\n%b\r\n" % (subj, reply, size, payload), size

    def _no_reply(self, subject: str, frame: bytes, waiter: Waiter) -> None:
        """A request's deadline passed without a reply: withdraw it if none of it was
        sent, and say which it was (returns only when the reply came meanwhile).

        Raises:
            NotSentError: withdrawn; the server never saw it.
            TimeoutError: sent (or being sent): it may have been acted on.
        """
        with self.lock:
            withdrawn = waiter.end > 0 and self.writer.withdraw_locked(frame, waiter.end)
            if withdrawn:  # its offsets stay in the stream: a later loss must not count it as a message
                self.ledger.not_sent(waiter.end, len(frame))
        if withdrawn:
            where = ("the connection was down" if self.machine.state is not ConnState.CONNECTED
                     else "behind writes the server had not taken")
            raise NotSentError(f"no reply on {subject!r} in time: the request was still waiting to be sent"
                               f" ({where}) and was withdrawn; nothing was sent, a retry is safe")
        if waiter.wait(0) or waiter.value is not None:
            # The reply came as the wait ran out: woken, or stored by the reader and
            # about to be (ResponseMux.route stores it first, then wakes the waiter).
            return
        raise TimeoutError(f"no reply on {subject!r} in time; the request was sent and may have been acted on")

    def flush(self, deadline: Deadline | TimeoutArg = 10.0, vouch: bool = True) -> None:
        """Send everything buffered and wait for the server's PONG (within ``deadline``).

        ``vouch=False``: a barrier only (an UNSUB took effect, what the server sent before
        the PONG arrived): it does not raise, nor use up, the word that an earlier loss may
        have swallowed messages (see :class:`~natsjs_sync.protocol.connection.PingLedger`);
        that is for the user's next flush."""
        if not isinstance(deadline, Deadline):
            deadline = Deadline.of(deadline, 10.0)
        if self.machine.state is not ConnState.CONNECTED:
            self.ready(draining_ok=True)
        self._check_may_wait_for_reply("flush")
        waiter = Waiter()
        writer = self.writer
        outer = writer.send_lock.mine()  # held by a write this flush interrupted (see append())
        try:
            with self.lock:
                if self.machine.state is ConnState.CLOSED:
                    raise ConnectionClosedError("the connection is closed")
                self.ledger.ping(waiter, writer.mark_locked() + len(commands.PING), vouch, writer.buffer)
                mine = writer.claim_locked()
            if mine:
                # What the socket takes before the deadline; a failed write fails the PONG waiter.
                writer.send_held(deadline)
        except BaseException:
            if outer:
                raise
            try:
                writer.send_lock.release()  # as in append(): claimed, and send_held never took over
            except RuntimeError:
                pass
            else:
                writer.wake_unlocked()
            raise
        t = deadline.remaining()
        # Reads the PONG here when the read role is free. A PONG stored as the wait ran out
        # counts (the reader stores it, then wakes the waiter).
        if not self._wait_reply(waiter, deadline) and waiter.value is None:
            raise TimeoutError(f"flush: no PONG within {t} s")
        if isinstance(waiter.value, Exception):
            raise waiter.value

    # ------------------------------------------------------------------ drain and close

    def drain(self, deadline: Deadline) -> None:
        """Stop taking messages, let every subscription finish its queue, flush, close.

        Called on a dispatcher thread (a callback), the drain runs on a thread
        of its own and this returns at once: waiting here would wait for this
        very callback. A failure then goes to ``error_cb``.
        """
        state = self.machine.state
        if state is ConnState.FORKED:
            self.close(flush=False)
            return
        if state is ConnState.CLOSED:
            raise ConnectionClosedError("the connection is closed")
        if state in (ConnState.DRAINING_SUBS, ConnState.DRAINING_PUBS):
            return
        if on_dispatcher_thread(self.dispatcher):
            threading.Thread(target=self._drain_reporting, args=(deadline,), name=f"natsjs-drain-{self.tag}",
                             daemon=True).start()
            return
        self._drain(deadline)

    def _drain_reporting(self, deadline: Deadline) -> None:
        try:
            self._drain(deadline)
        except DrainTimeoutError:
            pass  # reported already
        except NatsError as exc:
            self.report_error(exc)

    def _drain(self, deadline: Deadline) -> None:
        try:
            if self.machine.state is ConnState.RECONNECTING and not self.connected_event.wait(deadline.remaining()):
                raise TimeoutError("drain: the connection did not come back in time")
            with self.lock:
                if not self.machine.move((ConnState.CONNECTED,), ConnState.DRAINING_SUBS):
                    return
            # Continuous pulls stop asking and their handlers finish (and ack)
            # what was delivered while publishes still go out.
            self.drain_start_hooks.run(deadline)
            with self.lock:
                subs = [e.owner for e in self.registry.entries.values() if e.owner is not None]
                for sub in subs:
                    sub.mark_draining()
                    self.control_locked(commands.unsub(sub.sid))
            self.flush(deadline, vouch=False)  # the UNSUBs took effect; the last flush vouches
            for sub in subs:
                self.remove_subscription(sub.sid)
                sub.finish_drained()
            me = current_lane()
            for sub in subs:
                if sub.has_callback and sub.lane is not me and not sub.wait_done(deadline.remaining()):
                    raise TimeoutError(f"drain: subscription {sub.subject!r} did not finish in time")
            with self.lock:
                self.machine.move((ConnState.DRAINING_SUBS,), ConnState.DRAINING_PUBS)
            try:
                self.flush(deadline)
            except NatsConnectionError as exc:
                if self.machine.state is not ConnState.DRAINING_PUBS:
                    raise  # the connection broke (and closed): nothing more to drain
                # An earlier outage may have swallowed publishes: error_cb hears it, and the
                # drain still waits for what its hooks wait for (publish acks) before the close.
                self.report_error(exc)
            self.drain_hooks.run(deadline)
        except TimeoutError as exc:
            # As nats-py: a drain timeout goes to error_cb (before the close); the caller hears it too.
            err = DrainTimeoutError(str(exc))
            self.report_error(err)
            raise err from exc
        finally:
            self.close(flush=True)

    def close(self, flush: bool = True) -> None:
        """Close now (idempotent, any thread, callbacks included). Wakes every waiter."""
        with self.lock:
            state = self.machine.state
            if state is ConnState.CLOSED:
                return
            self.machine.to(ConnState.CLOSED)
            transport, self.transport = self.transport, None
            self.writer.cond.notify_all()
            waiters = self.ledger.clear()
            self.connected_event.clear()
        self.reconnector.stop.set()
        if state is ConnState.FORKED:
            return  # the parent owns the socket; this copy never started threads
        if flush and transport is not None:
            self.writer.final_flush(transport, 1.0)
        if transport is not None:
            transport.abort()
        closed = ConnectionClosedError("the connection is closed")
        self.requests.fail_all(closed)
        for w in waiters:
            w.set(closed)
        with self.lock:
            entries = self.registry.clear()
        self._releases.clear()  # what they would release is gone with the registry
        for e in entries:
            if e.owner is not None:
                e.owner.finish_closed()
        self.close_hooks.run()
        self.timer.close()
        me = threading.current_thread()
        session = self.read_session
        # A caller closing while it reads (routing a lame duck INFO): the reader thread
        # waits for its role, so waiting for the reader here would only stall.
        readers = () if session is not None and session.held_here() else self._readers
        for t in (*readers, self.writer.thread, self.reconnector.thread):
            if t is not None and t is not me and t.is_alive():
                t.join(2.0)
        self.log.info("connection to %s closed", self.addr)
        if transport is not None or state is ConnState.RECONNECTING:
            # A close ends a live connection, or the attempts to get one back:
            # disconnected, then closed (nats-py calls both in either case).
            self.emit(self.options.disconnected_cb)
        self.emit(self.options.closed_cb)
        self.dispatcher.close(timeout=2.0)

    # ------------------------------------------------------------------ fork

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's socket, threads and waiters (see :mod:`.fork`)."""
        self.lock = threading.Lock()
        self.logs.reset_after_fork()
        self.writer.reset_after_fork(self.lock)
        self._revive_lock = threading.Lock()
        self.connected_event = threading.Event()
        self.pid = os.getpid()
        self.nuid.reset()
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.detach_for_fork()
        self.ledger.clear()
        self.requests.reset()
        for e in self.registry.clear():
            if e.owner is not None:
                e.owner.disown_after_fork()
        self._reader = None
        self._reader_ident = None
        self._readers = set()
        self.read_session = None  # the parent's role (maybe held by a parent thread) is not ours
        self.read_end.clear()
        self.reconnector.reset_after_fork()
        self.dispatcher.reset_after_fork()
        self.events = self.dispatcher.lane(_call, f"events-{self.tag}")
        self.timer.reset_after_fork()
        self._keepalive = None
        self._release_tick = None
        self._releases.clear()  # the parent's: its subscriptions are not ours
        for hooks in (self.close_hooks, self.reconnect_hooks, self.drain_hooks, self.drain_start_hooks):
            hooks.reset()
        for obj in list(self._attachments.values()):
            reset = getattr(obj, "after_fork_in_child", None)
            if reset is not None:
                reset()
        if self.machine.state is not ConnState.CLOSED:
            self.machine.to(ConnState.FORKED)

    def _revive_after_fork(self) -> None:
        """First use of a client in a forked child: a fresh connection of its own."""
        with self._revive_lock:
            if self.machine.state is not ConnState.FORKED:
                return
            self.pool = self._new_pool()
            self.machine.to(ConnState.CONNECTING)
            # The same dispatcher and timer objects (lanes made before stay valid), started afresh.
            self.dispatcher.reset_after_fork()
            self.timer.reset_after_fork()
            try:
                self.start()
            except BaseException:
                self.machine.to(ConnState.FORKED)  # the next use tries again
                raise


def _call(fn: Callable[[], None]) -> None:
    fn()


__all__ = ["UNLIMITED", "Connection"]
