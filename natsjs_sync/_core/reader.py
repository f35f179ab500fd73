"""The reader thread of a connection: bytes -> parser -> routes.

It reads the transport, feeds the sans-IO parser and hands each event on:
messages to their subscription's route (its inlet, which enqueues, or a mux
that settles a waiter in place; a run of messages goes in one call, see
:mod:`.inlet`), PING/PONG to the ledger, INFO and ``-ERR`` to the
connection. It never runs user code and never waits on a user; when the
transport fails it reports the loss once and ends.

A route that does its work better in bulk (settling many publish acks under
one lock) only collects its messages and registers a function with
``conn.after_read`` (see :meth:`.Connection.after_read`); the reader runs those
once every event of a socket read is routed, before it reads again.

The read role (``requester_reads``, see :class:`ReadSession`): on a plain TCP
connection, with the compiled extension, a caller waiting for a request's
reply reads the socket itself while nobody else does, instead of waiting for
the reader thread to read and wake it (two thread hand-offs). Whoever holds
the role feeds the one parser of the connection and routes every event
exactly as the reader thread would. The reader thread takes the role and
waits on the socket in one compiled call; a caller that finds it waiting on
the quiet socket wakes it (an eventfd beside the socket in its poll) and
takes the role it hands over, a caller that finds it routing a read asks
for the next turn, and a caller that lets go with no other request waiting
keeps the reader thread out for a moment (2 ms), so a thread requesting in a
loop reads every reply itself and the reader thread is not woken for each.
Bytes that come while nobody holds the role wait at most that moment.
"""

from __future__ import annotations

import _socket
import _thread
import signal
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from .._timeout import Deadline
from ..errors import NatsConnectionError, NatsError, ProtocolError, UnexpectedEOF
from ..protocol._compiled import speedups
from ..protocol.parser import OK, PING, PONG, Err, Info, Parser
from . import fork
from .inlet import route_run
from .transport import RECV_SIZE

if TYPE_CHECKING:
    from .connection import Connection
    from .transport import Transport


#: The longest a reading caller waits on the socket before it looks again at
#: its reply, the connection and a Ctrl-C it deferred (a bound, not a poll:
#: bytes wake it at once).
_CALLER_SLICE = 0.05
_CALLER_SLICE_MS = 50
#: The longest a caller that met the connection's loss waits for the reader thread to report it.
_REPORT_WAIT = 2.0
_MAIN_THREAD = threading.main_thread().ident
try:
    # The handler as installed: signal.getsignal() converts it to an enum first, which
    # cost a main-thread request more than the rest of its wait for the reply.
    from _signal import getsignal as _getsignal  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - an interpreter without the C module
    _getsignal = signal.getsignal
_SIGINT = signal.SIGINT


def shared_role_fd(transport: Transport) -> int | None:
    """The descriptor callers may read, or ``None``: they may not (today's path).

    Only a plain TCP socket: TLS and WebSocket transports hold bytes of their
    own (decrypted records, frame remainders) that a wait on the descriptor
    does not see, so their reader thread reads alone. The compiled extension
    is needed for the reader's wait, role and read in one call. Only native
    threads and sockets: the role waits in C (a lock, poll), which under
    gevent's or eventlet's monkey-patching would block every green thread of
    the process, not just the waiting one.
    """
    from .transport import TcpTransport

    if speedups is None or type(transport) is not TcpTransport or transport.is_tls:
        return None
    sock = transport._sock
    if not (isinstance(sock, _socket.socket) and _threads_are_native()):
        return None
    try:
        return int(sock.fileno())
    except OSError:
        return None


def _threads_are_native() -> bool:
    """Whether threads are the operating system's (not gevent's or eventlet's
    green threads, which patch ``_thread`` in place)."""
    return getattr(_thread.start_new_thread, "__module__", "_thread") == "_thread"


class ReadSession:
    """The read side of one connection (one transport, its parser): a generation.

    A reconnect makes a new session, with its own role; a caller that holds
    the role of a session reads that session's socket with that session's
    parser only, and reads nothing once the connection moved on (the
    generation check in :meth:`read_for`). Thread-safe through the role: only
    its holder touches the parser.
    """

    __slots__ = ("caller_reads", "conn", "ended", "failure", "fd", "feed", "parser", "role", "routed", "started",
                 "thread", "transport")

    def __init__(self, conn: Connection, transport: Transport, parser: Parser, fd: int | None):
        self.conn = conn
        self.transport = transport
        self.parser = parser
        #: The parser's feed for a role holder (see Parser.reader_feed).
        self.feed = parser.reader_feed()
        self.fd = fd
        #: ``None``: callers never read this connection (the reader thread reads alone).
        self.role: Any = speedups.ReadRole() if fd is not None and speedups is not None else None
        #: Set under the role once the reader thread routed what the handshake read past its
        #: PONG: a caller reads only after it (the session is the connection's a moment earlier).
        self.started = False
        #: Set under the role once the reader thread closed the socket: nobody reads it again.
        self.ended = False
        #: What a reading caller hit (lost connection, bad bytes), or a write cut short
        #: (``Writer._cut_short``): the reader thread ends with it.
        self.failure: BaseException | None = None
        #: Socket reads done by waiting callers (not the reader thread).
        self.caller_reads = 0
        #: The holding caller's: the role's count of reads once each of its reads is routed
        #: (-1: no caller read yet). Written only under the role.
        self.routed = -1
        #: The reader thread of this session (set once it is started).
        self.thread: threading.Thread | None = None

    def held_here(self) -> bool:
        """Whether the calling thread holds this session's role."""
        role = self.role
        return role is not None and bool(role.mine())

    def route(self, events: list[Any], start: int = 0) -> None:
        """Role held: route one read's events (from ``events[start]``) as the reader
        thread does, then run what routes asked to run at the end of a read."""
        conn = self.conn
        routes = conn.registry.routes
        stats = conn.stats
        msg_cls = conn.msg_cls
        i, n = start, len(events)
        while i < n:
            i = route_run(events, i, routes, msg_cls, stats)
            if i == n:
                break
            ev = events[i]
            i += 1
            if ev is PING:
                conn.send_pong()
            elif ev is PONG:
                conn.on_pong()
            elif ev is OK:
                pass
            elif isinstance(ev, Info):
                conn.on_info(ev.options, self.transport)
            elif isinstance(ev, Err):
                conn.on_err(ev.text)
        pending = conn.read_end
        if pending:
            _run_read_end(pending)

    def consume(self, data: bytes) -> None:
        """Role held: feed one read and route what it completes.

        Raises:
            UnexpectedEOF: ``data`` is empty (the server closed the stream).
            ProtocolError: bad bytes (what the read held before them is routed first).
        """
        if not data:
            raise UnexpectedEOF(f"the server closed the connection{self.conn.last_server_error_suffix()}")
        try:
            events = self.feed(data)
        except ProtocolError:
            self.route(self.parser.parsed_before_error())
            raise
        self.route(events)

    def read_for(self, waiter: Any, deadline: Deadline) -> bool | None:
        """A caller waiting for ``waiter`` (a request's reply, a flush's PONG): read
        while the role is free.

        Returns True once the waiter is set, False when ``deadline`` passed, and
        ``None`` when this caller does not read (the role is taken, the connection
        moved on or ended, other requests wait): it then waits as usual, someone
        else reads.

        Only a lone requester reads: with other requests waiting, the reader
        thread reads for all of them. A caller holding the role would read and
        wake the others as the reader does, but it competes for the CPU and the
        GIL with every thread it wakes, and while it is preempted nobody reads
        (measured: 64 requesting threads made 0.65x the requests per second).

        On the main thread (the one Ctrl-C interrupts) it reads only under the
        :class:`SigintGate`, which defers a Ctrl-C until what was read is routed
        and the role is let go.
        """
        role = self.role
        conn = self.conn
        if len(conn.requests.waiting) > 1:
            return None
        gate: SigintGate | None = None
        if threading.get_ident() == _MAIN_THREAD:
            handler = _getsignal(_SIGINT)  # installed() in one step when the gate is in place already
            gate = handler if handler.__class__ is SigintGate else SigintGate.installed()
            if gate is None:
                return None  # a Ctrl-C could cut a read short here: the reader thread reads
        failure: BaseException | None = None
        if gate is not None:
            # Before the acquire: a Ctrl-C landing in it is raised right after it returns,
            # before a try could let go of the role.
            gate.holding = True
        # Every exit below lets go of the role if this thread holds it (release_mine()), not
        # if a flag says it took it: a signal handler's exception (a SIGALRM timeout, a
        # Celery soft time limit) may be raised as acquire() returns, before any flag is set.
        try:
            # Free, or handed over by a reader thread waiting on the quiet socket (woken for it).
            if not role.take():
                return None
            # The generation check: this session's socket and parser are still the connection's.
            # Not before the reader thread started on it (its thread is then there to join).
            if not self.started or self.ended or self.failure is not None or conn.transport is not self.transport:
                return None
            return self._read_until(waiter, deadline, gate)
        except NatsError as exc:
            # The read or its bytes failed: the reader thread ends the session with it;
            # this caller waits for its reply as usual (the loss fails it). Only ours: a
            # builtin TimeoutError (an OSError) is what an alarm's handler usually raises.
            self.failure = failure = exc
            return None
        except BaseException as exc:
            # Not the connection's failure: raised into this thread (a signal handler's
            # exception, a bug in a route). It is the caller's to hear, as it would be
            # from a wait for the reader thread. Only bytes this caller read and did not
            # route are lost with it (the parser's stream is broken, other threads' replies
            # gone): then the connection is lost too, as for bad bytes.
            # (self.routed is the holder's: left by an earlier holder, it equals role.reads.)
            if role.mine() and self.routed >= 0 and role.reads != self.routed:
                self.failure = failure = NatsConnectionError(
                    f"connection to {conn.addr} lost: a read was cut short by {type(exc).__name__}")
            raise
        finally:
            try:
                # With no other request or flush waiting, the reader thread stays out a moment:
                # this thread's next request finds the role free. Else it reads at once for them.
                # One call and no Python call before it (the ledger's entries, not its __len__):
                # a signal handler's exception cannot land between a check and the release.
                role.release_mine(failure is None and not (conn.requests.waiting or conn.ledger._entries))
            finally:
                if gate is not None:
                    gate.holding = False
                if failure is not None:
                    self._hand_over_loss()
                if gate is not None and gate.noted is not None:
                    gate.deliver()

    def _read_until(self, waiter: Any, deadline: Deadline, gate: SigintGate | None) -> bool | None:
        """Role held: read and route until ``waiter`` is set (True), ``deadline`` passes
        (False), or the connection moves on or a Ctrl-C is deferred (None).

        ``self.routed`` counts the role's reads once each one read here is routed: an
        exception raised between a read and its routing leaves it behind ``role.reads``
        (see :meth:`read_for`).

        The steps of :meth:`consume` and :meth:`route` are written out for a read that
        holds messages only (a reply, nearly always): it runs on every request's path.

        Raises:
            NatsConnectionError: the read failed. UnexpectedEOF, ProtocolError: see :meth:`consume`.
        """
        role = self.role
        conn = self.conn
        fd = self.fd
        transport = self.transport
        feed = self.feed
        caller_read = role.caller_read
        routes = conn.registry.routes
        stats = conn.stats
        msg_cls = conn.msg_cls
        pending = conn.read_end
        at = deadline.at  # deadline.remaining(), inline below
        self.routed = role.reads
        while waiter.value is None:
            if gate is not None and gate.noted is not None:
                return None
            if at is None:
                wait_ms = _CALLER_SLICE_MS
            else:
                left = at - time.monotonic()
                if left <= 0:
                    return False
                wait_ms = _CALLER_SLICE_MS if left >= _CALLER_SLICE else int(left * 1000) or 1
            try:
                data = caller_read(fd, RECV_SIZE, wait_ms)
            except OSError as exc:
                if exc.errno is None:
                    raise  # not the socket's: a signal handler's, raised as the read returned
                raise NatsConnectionError(f"connection to {conn.addr} lost: {exc.strerror or exc}") from exc
            if data is not None:
                self.caller_reads += 1
                if not data:
                    self.consume(data)  # raises UnexpectedEOF
                try:
                    events = feed(data)
                except ProtocolError:
                    self.route(self.parser.parsed_before_error())
                    raise
                i = route_run(events, 0, routes, msg_cls, stats)
                if i < len(events):
                    self.route(events, i)  # a PING, PONG, INFO or -ERR among them, and the rest
                elif pending:
                    _run_read_end(pending)
                self.routed += 1
            if conn.transport is not transport:
                return None  # lost meanwhile: the reader thread ends this session
        return True

    def _hand_over_loss(self) -> None:
        """A reading caller met the connection's loss: the reader thread reports it (it
        finds ``self.failure`` once the cut socket wakes it), so the many steps of a
        reconnect's start never run on a caller, where a signal handler's exception (main
        thread) could stop them halfway."""
        self.transport.abort()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            # Reported once this returns (the reader thread ends right after it): this
            # caller's next request waits for the reconnect, as it would if the reader
            # thread had met the loss itself.
            thread.join(_REPORT_WAIT)


class SigintGate:
    """The SIGINT handler while the main thread may read for the reader: Python's
    default one (KeyboardInterrupt), deferred while the main thread holds a read role.

    A Ctrl-C that interrupted a reading caller between its socket read and the
    routing of what it read would lose those bytes (other threads' replies,
    subscription messages). The gate notes it instead and raises it once the
    role is let go. It is installed (once, by the main thread's first read) only
    over Python's default handler; with any other handler the main thread
    leaves the reading to the reader thread.
    """

    _current: SigintGate | None = None

    def __init__(self, inner: Any):
        self.inner = inner
        self.holding = False
        self.noted: tuple[int, FrameType | None] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.holding:
            self.noted = (signum, frame)
            return
        self.inner(signum, frame)

    def deliver(self) -> None:
        """Run the handler for a Ctrl-C noted while the role was held (raises KeyboardInterrupt)."""
        noted, self.noted = self.noted, None
        if noted is not None:
            self.inner(*noted)

    @classmethod
    def after_fork_in_child(cls) -> None:
        """A forked child: its one thread is the main thread now (Ctrl-C goes to it), and the
        parent's reading thread, whose read the gate deferred a Ctrl-C for, is gone."""
        global _MAIN_THREAD
        _MAIN_THREAD = threading.get_ident()
        gate = cls._current
        if gate is not None:
            gate.holding = False
            gate.noted = None

    @classmethod
    def installed(cls) -> SigintGate | None:
        """Main thread: the gate in place (installed now over the default handler), or ``None``."""
        handler = _getsignal(signal.SIGINT)
        if handler.__class__ is cls:
            return handler
        if handler is not signal.default_int_handler:
            return None
        gate = cls(handler)
        signal.signal(signal.SIGINT, gate)
        cls._current = gate
        return gate


fork.track(SigintGate)


def start_reader(conn: Connection, transport: Transport, parser: Parser, leftover: list[Any],
                 session: ReadSession | None = None) -> threading.Thread:
    if session is not None and session.role is not None:
        target: Any = shared_read_loop
        args: tuple[Any, ...] = (session, leftover)
    else:
        target, args = read_loop, (conn, transport, parser, leftover, session)
    t = threading.Thread(target=target, args=args, name=f"natsjs-reader-{conn.tag}", daemon=True)
    if session is not None:
        session.thread = t
    t.start()
    return t


def shared_read_loop(session: ReadSession, leftover: list[Any]) -> None:
    """The reader thread of a connection whose callers may read too (see :class:`ReadSession`)."""
    conn = session.conn
    transport = session.transport
    role = session.role
    fd = session.fd
    wait_read = role.wait_read
    waiting = conn.requests.waiting
    ledger = conn.ledger
    held = False
    try:
        role.acquire()
        held = True
        session.route(leftover)
        session.started = True
        role.release()
        held = False
        while True:
            # Returns holding the role; stays out a moment first for a caller that asked
            # for it, unless other requests wait (nobody else would read for them).
            data = wait_read(fd, RECV_SIZE, not (waiting or ledger))
            held = True
            if session.failure is not None:
                raise session.failure
            session.consume(data)
            role.release()
            held = False
    except Exception as exc:
        lost: BaseException = exc
        if session.failure is not None:
            lost = session.failure  # what a caller met (a cut read or write): the socket's end follows from it
        elif isinstance(exc, OSError) and not isinstance(exc, NatsError):
            # A socket's own error; ours (UnexpectedEOF is an OSError too) is reported as it is.
            lost = NatsConnectionError(f"connection to {conn.addr} lost: {exc.strerror or exc}")
        try:
            # Wakes a caller that holds the role in a wait on the socket (abort), before
            # the role is waited for.
            conn.connection_lost(lost, transport)
        finally:
            if not held:
                role.acquire()
                held = True
    finally:
        # Closed under the role: no caller waits on the descriptor, nor reads it later.
        session.ended = True
        try:
            transport.close()
        finally:
            if held:
                role.release()


def read_loop(conn: Connection, transport: Transport, parser: Parser, leftover: list[Any],
              session: ReadSession | None = None) -> None:
    routes = conn.registry.routes
    stats = conn.stats
    msg_cls = conn.msg_cls
    read = transport.read
    feed = parser.reader_feed()
    events: list[Any] = leftover
    pending = conn.read_end  # functions routes asked to run once this read's events are routed
    failure: ProtocolError | None = None
    try:
        while True:
            i, n = 0, len(events)
            while i < n:
                # Every message up to the next other event, counted and routed in one call
                # (compiled where built).
                i = route_run(events, i, routes, msg_cls, stats)
                if i == n:
                    break
                ev = events[i]
                i += 1
                if ev is PING:
                    conn.send_pong()
                elif ev is PONG:
                    conn.on_pong()
                elif ev is OK:
                    pass
                elif isinstance(ev, Info):
                    conn.on_info(ev.options, transport)
                elif isinstance(ev, Err):
                    conn.on_err(ev.text)
            if pending:
                _run_read_end(pending)
            if failure is not None:
                raise failure
            data = read()
            if not data:
                # nats-py's class for it, still a NatsConnectionError (via StaleConnectionError)
                raise UnexpectedEOF(f"the server closed the connection{conn.last_server_error_suffix()}")
            try:
                events = feed(data)
            except ProtocolError as exc:
                # The connection is lost, but the messages the read held before the
                # bad bytes are not: they are routed first, like any other read's.
                failure = exc
                events = parser.parsed_before_error()
    except Exception as exc:
        lost: BaseException = exc
        if session is not None and session.failure is not None:
            lost = session.failure  # a write cut short (see Writer._cut_short): the socket's end follows from it
        try:
            if pending:  # what was routed before the failure is still settled
                _run_read_end(pending)
        finally:
            conn.connection_lost(lost, transport)  # even if a settling function failed
    finally:
        transport.close()  # the reader owns the descriptor: nobody else closes it under its poll


def _run_read_end(pending: list[Any]) -> None:
    # Deleting only what was taken keeps a function another reader added
    # meanwhile (an old reader still ending while the new one starts).
    fns = pending[:]
    del pending[:len(fns)]
    for fn in fns:
        fn()
