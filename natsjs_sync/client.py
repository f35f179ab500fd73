"""The core NATS client: connect, publish, subscribe, request, flush, drain, close.

Threads of a connected client (all daemon threads, named ``natsjs-<role>-<name>``):

- **reader**: one per connection; reads the socket, parses, hands messages to
  subscription queues. It never runs user code and never waits on a user.
- **flusher**: sends the write buffer when something is in it and sends the
  keep-alive PINGs. Publishes only append to the buffer, so a loop of small
  publishes becomes a few large ``sendall`` calls. Calls that wait for an answer
  (request, flush, respond) send the buffer from the caller's thread instead,
  so a lone request pays no thread hop.
- **events**: runs the user's connection callbacks (error, disconnected, ...).
- **reconnect**: exists while the connection is being re-established.
- one thread per subscription made with ``cb=``, running that callback in order.

Life cycle: CONNECTED -> (socket lost) RECONNECTING -> CONNECTED ... -> CLOSED.
While reconnecting, publishes go to the write buffer, bounded by
``pending_size``; on reconnect the subscriptions are restored first and the
buffer is sent after them. After ``os.fork()`` the child's copy of a client
drops everything it inherited and connects afresh on first use (see
docs/threads.rst).
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
import queue
import socket
import ssl
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._connection import ServerAddress, handshake, open_socket, parse_server_url, upgrade_tls
from ._reconnect import PoolEntry, ServerPool
from ._timeout import USE_DEFAULT, Deadline, TimeoutArg, resolve
from ._version import __version__
from .auth import Credentials
from .errors import (
    AuthorizationError,
    BadSubscriptionError,
    ConnectionClosedError,
    MaxPayloadError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    NoServersError,
    OutboundBufferLimitError,
    PermissionsError,
    SecureConnRequiredError,
    ServerError,
    StaleConnectionError,
    TimeoutError,
)
from .msg import Msg, bound_msg_class
from .protocol import commands
from .protocol.headers import STATUS_NO_RESPONDERS, HeadersInput, encode_headers
from .protocol.nuid import NUID
from .protocol.parser import OK, PING, PONG, Err, Info, Parser
from .protocol.subjects import publish_subject, validate_queue, validate_subscribe_subject
from .subscription import (
    _CLOSED,
    _DRAINED,
    _DRAINING,
    _UNSUBSCRIBED,
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    InternalSubscription,
    MsgHandler,
    Subscription,
)

if TYPE_CHECKING:
    from .jetstream import JetStream

log = logging.getLogger("natsjs_sync")

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]

DEFAULT_SERVER = "nats://127.0.0.1:4222"
# Past this many buffered bytes a publisher sends the buffer itself: that is the
# back-pressure that keeps a fast publisher from growing the buffer without end.
_FLUSH_THRESHOLD = 1024 * 1024
_RECV_SIZE = 256 * 1024

# States, ordered so that the publish hot path tests one integer: 0 is "go".
_CONNECTED = 0
_RECONNECTING = 1
_DRAINING_SUBS = 2
_FORKED = 3  # a copy in a forked child: connects afresh on first use
_DRAINING_PUBS = 4
_CLOSED_STATE = 5
_CONNECTING = 6
_STATE_NAMES = ("connected", "reconnecting", "draining", "forked", "draining", "closed", "connecting")

# Every client of this process, so a forked child can disown the parent's sockets.
_CLIENTS: weakref.WeakSet[Client] = weakref.WeakSet()


@dataclass
class Stats:
    """Counters of one client (read them as ``client.stats``)."""

    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    reconnects: int = 0
    errors_received: int = 0


@dataclass
class _Options:
    servers: list[ServerAddress]
    name: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    tls: ssl.SSLContext | bool | None = None
    tls_handshake_first: bool = False
    connect_timeout: float = 2.0
    allow_reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_time_wait: float = 2.0
    reconnect_jitter: float = 0.1
    reconnect_jitter_tls: float = 1.0
    no_randomize: bool = False
    pending_size: int = 2 * 1024 * 1024
    ping_interval: float = 120.0
    max_outstanding_pings: int = 2
    no_echo: bool = False
    verbose: bool = False
    pedantic: bool = False
    inbox_prefix: str = "_INBOX"
    drain_timeout: float = 30.0
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT
    error_cb: ErrorCallback | None = None
    disconnected_cb: EventCallback | None = None
    reconnected_cb: EventCallback | None = None
    closed_cb: EventCallback | None = None
    discovered_server_cb: EventCallback | None = None
    lame_duck_mode_cb: EventCallback | None = None


class _Waiter:
    """A one-shot slot the reader fills and a caller waits on (a bare lock is the cheapest)."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.value: Any = None

    def set(self, value: Any) -> None:
        if self.value is None:
            self.value = value
            try:
                self._lock.release()
            except RuntimeError:  # already woken
                pass

    def wait(self, timeout: float | None) -> bool:
        return self._lock.acquire(timeout=-1 if timeout is None else timeout)


class _ResponseMux(Subscription):
    """The one ``_INBOX.<nuid>.*`` subscription that answers every request."""

    def _deliver(self, msg: Msg) -> None:  # reader thread: no user code here
        token = msg.subject[self._client._resp_prefix_len :]
        waiter = self._client._resp_map.pop(token, None)
        if waiter is not None:
            waiter.set(msg)


class _EventRunner:
    """Runs the user's connection callbacks on one thread of their own, in order."""

    def __init__(self, name: str):
        self._q: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"natsjs-events-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._q.put((fn, args))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:  # a user's callback must not kill the runner
                log.exception("natsjs_sync: exception in a connection callback")

    def stop(self, timeout: float | None = 2.0) -> None:
        self._q.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)



def check_callback(cb: object) -> None:
    """Refuse what cannot be a message callback, before anything is sent."""
    if cb is None:
        return
    if not callable(cb):
        raise TypeError("cb must be callable")
    if inspect.iscoroutinefunction(cb):
        raise TypeError("cb is an async function; natsjs_sync calls callbacks on a thread: "
                        "pass a plain function (drop 'async' and the 'await's)")

class Client:
    """A connection to NATS (and its reconnects). Thread-safe: share one per process.

    Make one with :func:`natsjs_sync.connect`. Used as a context manager it
    closes at the end of the block.
    """

    def __init__(self, options: _Options):
        self._options = options
        self.name = options.name
        self._thread_tag = options.name or "client"
        self._lock = threading.Lock()
        self._flush_cond = threading.Condition(self._lock)
        self._send_lock = threading.Lock()
        self._revive_lock = threading.Lock()
        self._pending = bytearray()
        self._flush_requested = False
        self._pings_in_pending = 0  # PINGs appended to _pending and not yet sent
        self._state = _CONNECTING
        self._pid = os.getpid()
        self._sock: socket.socket | None = None
        self._addr: ServerAddress | None = None
        self._info: dict[str, Any] = {}
        self._max_payload = 1024 * 1024
        self._subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        self._nuid = NUID()
        self._resp_mux: _ResponseMux | None = None
        self._resp_prefix = ""
        self._resp_prefix_len = 0
        self._resp_map: dict[str, _Waiter] = {}
        self._resp_tokens = itertools.count(1)
        self._pongs: deque[_Waiter | None] = deque()
        self._pings_outstanding = 0
        self._next_ping = 0.0
        self._last_error: Exception | None = None
        self.stats = Stats()
        self._pool = self._new_pool()
        self._default_tls: ssl.SSLContext | None = None
        self._events = _EventRunner(self._thread_tag)
        self._msg_cls = bound_msg_class(self)
        self._reader: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._reconnector: threading.Thread | None = None
        self._stop_reconnect = threading.Event()
        self._connected_event = threading.Event()
        # Internal listeners (JetStream layers), run on the reconnect/closing
        # thread; they must be quick and never block.
        self._close_hooks: list[Callable[[], None]] = []
        self._reconnect_hooks: list[Callable[[], None]] = []
        _CLIENTS.add(self)

    def _new_pool(self) -> ServerPool:
        opts = self._options
        uses_tls = opts.tls not in (None, False) or any(s.tls for s in opts.servers)
        return ServerPool(
            opts.servers,
            randomize=not opts.no_randomize,
            max_reconnect_attempts=opts.max_reconnect_attempts,
            reconnect_time_wait=opts.reconnect_time_wait,
            jitter=opts.reconnect_jitter_tls if uses_tls else opts.reconnect_jitter,
        )

    # ------------------------------------------------------------------ connect

    def _connect(self) -> None:
        """The first connection: each server once, in pool order."""
        errors: list[str] = []
        last: Exception | None = None
        for entry in list(self._pool.entries):
            try:
                self._attach(self._open(entry), entry)
                self._start_flusher()
                return
            except (AuthorizationError, SecureConnRequiredError):
                # The user's settings are wrong: another server would say the same.
                self._events.stop()
                raise
            except NatsError as exc:
                errors.append(f"{entry.addr.url}: {exc}")
                last = exc
        self._events.stop()
        raise NoServersError("could not connect to any server: " + "; ".join(errors)) from last

    def _tls_for(self, addr: ServerAddress, info: dict[str, Any] | None) -> ssl.SSLContext | None:
        tls = self._options.tls
        wants = addr.tls or (info is not None and bool(info.get("tls_required")))
        if tls is False:
            if wants:
                raise SecureConnRequiredError(
                    f"{addr.url} requires TLS and this client was made with tls=False"
                )
            return None
        if isinstance(tls, ssl.SSLContext):
            return tls
        if tls is True or wants:
            if self._default_tls is None:
                self._default_tls = ssl.create_default_context()
            return self._default_tls
        return None

    def _connect_options(
        self, info: dict[str, Any], addr: ServerAddress
    ) -> tuple[dict[str, Any], ssl.SSLContext | None]:
        opts = self._options
        tls_ctx = self._tls_for(addr, info)
        connect = {
            "verbose": opts.verbose,
            "pedantic": opts.pedantic,
            "tls_required": tls_ctx is not None,
            "name": opts.name,
            "lang": "python-sync",
            "version": __version__,
            "protocol": 1,
            "echo": not opts.no_echo,
            "headers": True,
            "no_responders": True,
        }
        connect.update(opts.credentials.connect_fields(info, addr.user, addr.password))
        return connect, tls_ctx

    def _open(self, entry: PoolEntry) -> tuple[socket.socket, Parser, dict[str, Any], list[Any]]:
        """Open and handshake a connection to one server (nothing is shared yet)."""
        addr = entry.addr
        deadline = Deadline(self._options.connect_timeout)
        self._pool.attempted(entry, time.monotonic())
        sock = open_socket(addr, deadline)
        try:
            if self._options.tls_handshake_first:
                ctx = self._tls_for(addr, None) or self._tls_for(addr, {"tls_required": True})
                assert ctx is not None
                sock = upgrade_tls(sock, ctx, addr, deadline)
            parser = Parser(msg_factory=self._msg_cls)
            hs = handshake(sock, parser, addr, self._connect_options, deadline)
        except BaseException:
            sock.close()
            raise
        return hs.sock, parser, hs.info, hs.leftover

    def _attach(self, opened: tuple[socket.socket, Parser, dict[str, Any], list[Any]], entry: PoolEntry) -> None:
        """Make an opened connection the current one and start its reader."""
        sock, parser, info, leftover = opened
        sock.settimeout(None)
        self._pool.connected(entry, time.monotonic())
        self._addr = entry.addr
        self._info = info
        self._max_payload = int(info.get("max_payload", self._max_payload))
        self._add_discovered(info)
        self._pings_outstanding = 0
        self._next_ping = time.monotonic() + self._options.ping_interval
        with self._lock:
            self._sock = sock
            if self._state in (_CONNECTING, _RECONNECTING):
                self._state = _CONNECTED
        self._reader = threading.Thread(
            target=self._read_loop,
            args=(sock, parser, leftover),
            name=f"natsjs-reader-{self._thread_tag}",
            daemon=True,
        )
        self._reader.start()
        self._connected_event.set()

    def _start_flusher(self) -> None:
        self._flusher = threading.Thread(
            target=self._flush_loop, name=f"natsjs-flusher-{self._thread_tag}", daemon=True
        )
        self._flusher.start()

    def _add_discovered(self, info: dict[str, Any]) -> None:
        urls = info.get("connect_urls")
        if not urls:
            return
        added = self._pool.add_discovered(urls, tls=bool(self._addr and self._addr.tls))
        if added and self._options.discovered_server_cb is not None and self._state != _CONNECTING:
            self._events.submit(self._options.discovered_server_cb)

    # ------------------------------------------------------------------ properties

    @property
    def is_connected(self) -> bool:
        """True while connected (also while draining)."""
        return self._state in (_CONNECTED, _DRAINING_SUBS, _DRAINING_PUBS) and self._sock is not None

    @property
    def is_reconnecting(self) -> bool:
        return self._state == _RECONNECTING

    @property
    def is_closed(self) -> bool:
        return self._state == _CLOSED_STATE

    @property
    def is_draining(self) -> bool:
        return self._state in (_DRAINING_SUBS, _DRAINING_PUBS)

    @property
    def connected_url(self) -> str | None:
        """The URL (without credentials) of the server we are connected to."""
        return self._addr.url if self._addr is not None and self.is_connected else None

    @property
    def servers(self) -> list[str]:
        """The URLs of the server pool, discovered servers included."""
        return [a.url for a in self._pool.addresses]

    @property
    def discovered_servers(self) -> list[str]:
        return [a.url for a in self._pool.addresses if a.discovered]

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's INFO, as a dict."""
        return dict(self._info)

    @property
    def max_payload(self) -> int:
        """The largest message (headers plus data) the server accepts."""
        return self._max_payload

    @property
    def client_id(self) -> int | None:
        return self._info.get("client_id")

    @property
    def last_error(self) -> Exception | None:
        """The last asynchronous error (server -ERR, slow consumer, lost connection)."""
        return self._last_error

    @property
    def pending_data_size(self) -> int:
        """Bytes in the write buffer (held there while reconnecting)."""
        return len(self._pending)

    def new_inbox(self) -> str:
        """A new unique inbox subject under this client's inbox prefix."""
        return f"{self._options.inbox_prefix}.{self._nuid.next()}"

    # ------------------------------------------------------------------ writing

    def _ready(self, draining_ok: bool = False) -> None:
        """Slow path of every public call: revive after fork, refuse when closed."""
        state = self._state
        if state == _FORKED:
            self._revive_after_fork()
        elif state == _DRAINING_PUBS and draining_ok:
            return
        elif state >= _DRAINING_PUBS:
            what = "closed" if state == _CLOSED_STATE else "draining"
            raise ConnectionClosedError(f"the connection is {what}")

    def _check_buffer(self, extra: int) -> None:
        """Called under the lock when not connected: bound the reconnect buffer."""
        state = self._state
        if state >= _DRAINING_PUBS:
            raise ConnectionClosedError("the connection is closed")
        if state == _RECONNECTING and len(self._pending) + extra > self._options.pending_size:
            raise OutboundBufferLimitError(
                f"reconnect buffer full: {len(self._pending)} bytes held while reconnecting "
                f"(pending_size={self._options.pending_size}); nothing was sent for this message"
            )

    def publish(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Publish a message. Returns once it is in the write buffer.

        Small publishes are coalesced: a flusher thread sends the buffer, so a
        loop of publishes costs a few large writes. Use :meth:`flush` to know the
        server has them. While reconnecting, messages wait in the buffer (up to
        ``pending_size`` bytes) and are sent after the subscriptions are restored.

        Args:
            subject: where to publish (no wildcards).
            payload: the data, any bytes-like object.
            reply: an optional reply subject.
            headers: an optional mapping of header key to a value or list of values.

        Raises:
            BadSubjectError: invalid subject or reply subject.
            BadHeaderError: a header key or value that cannot be sent.
            MaxPayloadError: headers plus payload exceed the server's max_payload.
            TypeError: payload is not bytes-like.
            OutboundBufferLimitError: reconnecting and the buffer is full.
            ConnectionClosedError: the client is closed.
        """
        if self._state:
            self._ready()
        if headers is None and reply is None:
            # The hot path, kept inline: one format, one lock, one append.
            subj = publish_subject(subject)
            frame = b"PUB %b %d\r\n%b\r\n" % (subj, len(payload), payload)  # type: ignore[str-format]
            size = len(payload)
            if size > self._max_payload:
                raise self._too_big(size)
            with self._lock:
                if self._state:
                    self._check_buffer(len(frame))
                pending = self._pending
                pending += frame
                stats = self.stats
                stats.out_msgs += 1
                stats.out_bytes += size
                if len(pending) <= _FLUSH_THRESHOLD:
                    if not self._flush_requested:
                        self._flush_requested = True
                        self._flush_cond.notify()
                    return
            self._send_pending()
        else:
            self._append(*self._encode(subject, payload, reply, headers), now=False)

    def _publish_trusted(self, subject: str, payload: bytes, reply: bytes | None = None,
                         headers: HeadersInput | None = None) -> None:
        """Publish to a subject the library made or the server gave (an ack
        reply, a flow-control reply): no validation, nothing cached."""
        if headers is None:
            size = len(payload)
            frame = commands.pub(subject.encode(), payload, reply)
        else:
            hdr = encode_headers(headers)
            size = len(hdr) + len(payload)
            frame = commands.hpub(subject.encode(), hdr, payload, reply)
        if size > self._max_payload:
            raise self._too_big(size)
        self._append(frame, size, now=False)

    def _publish_with_reply(self, subject: str, payload: bytes | bytearray | memoryview, reply: bytes,
                            headers: HeadersInput | None) -> None:
        """Publish with a library-made reply subject (already bytes, not validated again)."""
        subj = publish_subject(subject)
        if headers is None:
            size = len(payload)
            frame = b"PUB %b %b %d\r\n%b\r\n" % (subj, reply, size, payload)  # type: ignore[str-format]
        else:
            hdr = encode_headers(headers)
            size = len(hdr) + len(payload)
            frame = commands.hpub(subj, hdr, payload, reply)
        if size > self._max_payload:
            raise self._too_big(size)
        self._append(frame, size, now=False)

    def _too_big(self, size: int) -> MaxPayloadError:
        return MaxPayloadError(f"message of {size} bytes exceeds the server's max_payload of {self._max_payload}")

    def _encode(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview,
        reply: str | None,
        headers: HeadersInput | None,
    ) -> tuple[bytes, int]:
        """Validate and encode a PUB/HPUB frame; returns ``(frame, message size)``."""
        subj = publish_subject(subject)
        rep = publish_subject(reply) if reply is not None else None
        if headers is None:
            frame = commands.pub(subj, payload, rep)
            size = len(payload)
        else:
            hdr = encode_headers(headers)
            frame = commands.hpub(subj, hdr, payload, rep)
            size = len(hdr) + len(payload)
        if size > self._max_payload:
            raise self._too_big(size)
        return frame, size

    def _append(self, frame: bytes, size: int, now: bool) -> None:
        """Buffer one encoded message; with ``now`` send it from this thread."""
        if self._state:
            self._ready()
        with self._lock:
            if self._state:
                self._check_buffer(len(frame))
            self._pending += frame
            self.stats.out_msgs += 1
            self.stats.out_bytes += size
            if not now and len(self._pending) <= _FLUSH_THRESHOLD:
                if not self._flush_requested:
                    self._flush_requested = True
                    self._flush_cond.notify()
                return
        self._send_pending()

    def publish_now(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Like :meth:`publish`, but send the buffer from this thread before returning.

        For latency-bound single messages (replies, requests): it skips the hop
        to the flusher thread. In a loop, prefer :meth:`publish`.
        """
        self._append(*self._encode(subject, payload, reply, headers), now=True)

    def _write_control(self, data: bytes) -> None:
        """Queue SUB/UNSUB/PONG bytes. While reconnecting they are dropped: the
        subscriptions are restored from ``_subs`` when the connection is back."""
        with self._lock:
            if self._state == _CLOSED_STATE:
                raise ConnectionClosedError("the connection is closed")
            if self._state == _RECONNECTING or self._sock is None:
                return
            self._pending += data
            if not self._flush_requested:
                self._flush_requested = True
                self._flush_cond.notify()

    def _send_pending(self) -> None:
        """Send the whole write buffer. The send lock keeps the wire in buffer order.

        Without a socket (reconnecting) the buffer stays where it is.
        """
        with self._send_lock:
            with self._lock:
                self._flush_requested = False
                sock = self._sock
                data = self._pending
                if sock is None or not data:
                    return
                self._pending = bytearray()
                self._pings_in_pending = 0
            try:
                sock.sendall(data)
            except OSError as exc:
                self._connection_lost(exc, sock)

    def _flush_loop(self) -> None:
        cond = self._flush_cond
        interval = self._options.ping_interval
        while True:
            with cond:
                while not self._flush_requested and self._state != _CLOSED_STATE:
                    wait = self._next_ping - time.monotonic() if interval > 0 and self._sock is not None else None
                    if wait is not None and wait <= 0:
                        break
                    cond.wait(wait)
                if self._state == _CLOSED_STATE or self._pid != os.getpid():
                    return
                ping_due = interval > 0 and self._sock is not None and time.monotonic() >= self._next_ping
            if ping_due:
                self._keepalive_ping()
            self._send_pending()

    def _keepalive_ping(self) -> None:
        self._next_ping = time.monotonic() + self._options.ping_interval
        sock = self._sock
        if self._pings_outstanding >= self._options.max_outstanding_pings:
            if sock is not None:
                self._connection_lost(StaleConnectionError("the server stopped answering PINGs"), sock)
            return
        self._pings_outstanding += 1
        with self._lock:
            if self._state != _CONNECTED and self._state != _DRAINING_SUBS:
                return
            self._pongs.append(None)
            self._pings_in_pending += 1
            self._pending += commands.PING

    # ------------------------------------------------------------------ reading

    def _read_loop(self, sock: socket.socket, parser: Parser, leftover: list[Any]) -> None:
        subs = self._subs
        stats = self.stats
        recv = sock.recv
        msg_cls = self._msg_cls
        events: Iterable[Any] = leftover
        try:
            while True:
                for ev in events:
                    if ev.__class__ is msg_cls:
                        sub = subs.get(ev.sid)
                        stats.in_msgs += 1
                        stats.in_bytes += len(ev.data)
                        if sub is not None:
                            sub._deliver(ev)
                    elif ev is PING:
                        self._write_control(commands.PONG)
                    elif ev is PONG:
                        self._pings_outstanding = 0
                        try:
                            waiter = self._pongs.popleft()
                        except IndexError:
                            waiter = None
                        if waiter is not None:
                            waiter.set(True)
                    elif ev is OK:
                        pass
                    elif isinstance(ev, Info):
                        self._on_info(ev.options, sock)
                    elif isinstance(ev, Err):
                        self._on_err(ev.text)
                data = recv(_RECV_SIZE)
                if not data:
                    raise NatsConnectionError(f"the server closed the connection{self._last_err_suffix()}")
                events = parser.feed(data)
        except Exception as exc:
            self._connection_lost(exc, sock)

    def _last_err_suffix(self) -> str:
        err = self._last_error
        return f" ({err})" if isinstance(err, ServerError) else ""

    def _on_info(self, options: dict[str, Any], sock: socket.socket) -> None:
        """An INFO after the handshake: cluster changes, lame duck mode."""
        self._info = {**self._info, **options}
        if "max_payload" in options:
            self._max_payload = int(options["max_payload"])
        self._add_discovered(options)
        if options.get("ldm"):
            if self._options.lame_duck_mode_cb is not None:
                self._events.submit(self._options.lame_duck_mode_cb)
            self._pool.mark_lame_duck()
            if self._options.allow_reconnect and any(not e.lame_duck for e in self._pool.entries):
                # Move to another server now rather than wait to be cut off.
                self._connection_lost(NatsConnectionError("the server entered lame duck mode"), sock)

    def _on_err(self, text: str) -> None:
        self.stats.errors_received += 1
        low = text.lower()
        err: ServerError
        if low.startswith("permissions violation"):
            err = PermissionsError(text)
        elif "authorization" in low or "authentication" in low or "expired" in low:
            err = AuthorizationError(text)  # type: ignore[assignment]
        else:
            err = ServerError(text)
        self._report_error(err)

    def _report_error(self, exc: Exception) -> None:
        """Remember an asynchronous error and hand it to ``error_cb`` on the events thread."""
        self._last_error = exc
        cb = self._options.error_cb
        if cb is not None:
            self._events.submit(cb, exc)
        elif not isinstance(exc, NatsError):
            log.error("natsjs_sync: unhandled exception in a subscription callback", exc_info=exc)
        else:
            log.warning("natsjs_sync: %s", exc)

    # ------------------------------------------------------------------ losing and regaining

    def _connection_lost(self, exc: BaseException, sock: socket.socket) -> None:
        """The socket ``sock`` failed (called from any thread; idempotent per socket)."""
        if isinstance(exc, NatsError):
            err: Exception = exc
        else:
            err = NatsConnectionError(f"connection lost: {exc}")
            err.__cause__ = exc
        lost = NatsConnectionError(f"connection lost while waiting: {err}")
        with self._lock:
            if self._sock is not sock or self._state in (_CLOSED_STATE, _FORKED):
                return
            self._sock = None
            self._connected_event.clear()
            reconnect = self._options.allow_reconnect and self._state in (_CONNECTED, _RECONNECTING)
            if reconnect:
                self._state = _RECONNECTING
            # PINGs already on the wire will never be answered; those still in
            # the buffer will be, after the reconnect.
            for _ in range(len(self._pongs) - self._pings_in_pending):
                w = self._pongs.popleft()
                if w is not None:
                    w.set(lost)
            # A reply to a request in flight may be lost with the connection.
            waiting = list(self._resp_map.values())
            self._resp_map.clear()
        for w in waiting:
            w.set(lost)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        self._report_error(err)
        if self._options.disconnected_cb is not None:
            self._events.submit(self._options.disconnected_cb)
        if not reconnect:
            self._close(flush=False)
            return
        self._pool.disconnected()
        self._reconnector = threading.Thread(
            target=self._reconnect_loop, name=f"natsjs-reconnect-{self._thread_tag}", daemon=True
        )
        self._reconnector.start()

    def _reconnect_loop(self) -> None:
        pool = self._pool
        while self._state == _RECONNECTING:
            choice = pool.next_attempt(time.monotonic())
            if choice is None:
                self._report_error(NoServersError("no server left to reconnect to"))
                self._close(flush=False)
                return
            entry, wait = choice
            if wait > 0 and self._stop_reconnect.wait(wait):
                return
            if self._state != _RECONNECTING:
                return
            try:
                opened = self._open(entry)
            except NatsError as exc:
                pool.failed(entry)
                self._report_error(exc)
                continue
            if self._resume(opened, entry):
                return

    def _resume(self, opened: tuple[socket.socket, Parser, dict[str, Any], list[Any]], entry: PoolEntry) -> bool:
        """Restore subscriptions, send the buffered bytes, go back to CONNECTED."""
        sock = opened[0]
        with self._send_lock:
            with self._lock:
                if self._state != _RECONNECTING:
                    sock.close()
                    return True
                restore = bytearray()
                for sub in list(self._subs.values()):
                    if sub._state >= _DRAINED:
                        continue
                    restore += commands.sub(sub.subject.encode(), sub.sid, sub.queue.encode() if sub.queue else None)
                    if sub._max is not None:
                        remaining = sub._max - sub._received
                        if remaining <= 0:
                            self._subs.pop(sub.sid, None)
                            sub._finish(_DRAINED)
                            continue
                        restore += commands.unsub(sub.sid, remaining)
                data = bytes(restore) + self._pending
                self._pending = bytearray()
                self._pings_in_pending = 0
                self._flush_requested = False
            self._attach(opened, entry)
            try:
                sock.sendall(data)
            except OSError as exc:
                self._connection_lost(exc, sock)
                return False
        self.stats.reconnects += 1
        for hook in list(self._reconnect_hooks):
            try:
                hook()
            except Exception:
                log.exception("natsjs_sync: internal reconnect hook failed")
        if self._options.reconnected_cb is not None:
            self._events.submit(self._options.reconnected_cb)
        return True

    # ------------------------------------------------------------------ fork

    def _disown_after_fork(self) -> None:
        """In a forked child: forget the parent's socket, threads and waiters.

        Runs in the child right after ``fork()``, while it has one thread. The
        locks may have been held by parent threads that do not exist here, so
        they are replaced, not acquired. The socket is closed without shutdown:
        shutting it down would cut the parent's connection too.
        """
        self._lock = threading.Lock()
        self._flush_cond = threading.Condition(self._lock)
        self._send_lock = threading.Lock()
        self._revive_lock = threading.Lock()
        self._stop_reconnect = threading.Event()
        self._connected_event = threading.Event()
        self._pid = os.getpid()
        self._nuid.reset()
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                # detach() first so the socket object never closes the fd number
                # again later, when it may belong to something else.
                os.close(sock.detach())
            except OSError:
                pass
        self._pending = bytearray()
        self._pings_in_pending = 0
        self._flush_requested = False
        self._pongs.clear()
        self._resp_map.clear()
        self._resp_mux = None
        for sub in list(self._subs.values()):
            sub._disown_after_fork()
        self._subs.clear()
        self._reader = self._flusher = self._reconnector = None
        if self._state != _CLOSED_STATE:
            self._state = _FORKED
        self._events = None  # type: ignore[assignment]

    def _revive_after_fork(self) -> None:
        """First use of a client in a forked child: a fresh connection of its own."""
        with self._revive_lock:
            if self._state != _FORKED:
                return
            self._events = _EventRunner(self._thread_tag)
            self._pool = self._new_pool()
            self._state = _CONNECTING
            try:
                self._connect()
            except BaseException:
                self._state = _FORKED
                raise

    # ------------------------------------------------------------------ subscribe

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: MsgHandler | None = None,
        *,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """Express interest in ``subject`` (wildcards allowed).

        Subscriptions survive reconnects: they are restored (with what remains
        of ``max_msgs``) before anything buffered is sent.

        Args:
            subject: the subject, e.g. ``"orders.*"`` or ``"orders.>"``.
            queue: join this queue group: each message goes to one member.
            cb: call ``cb(msg)`` for every message on a thread of this subscription;
                without it, read with :meth:`Subscription.next_msg` or iterate.
            max_msgs: unsubscribe automatically after this many messages.
            pending_msgs_limit: messages held before dropping (slow consumer).
            pending_bytes_limit: payload bytes held before dropping.

        Raises:
            BadSubjectError: invalid subject or queue.
            ConnectionClosedError: the client is closed or draining.
        """
        return self._subscribe(subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit)

    def _subscribe(
        self,
        subject: str,
        queue: str | None,
        cb: MsgHandler | None,
        max_msgs: int | None,
        pending_msgs_limit: int | None,
        pending_bytes_limit: int | None,
        cls: type[Subscription] = Subscription,
    ) -> Subscription:
        validate_subscribe_subject(subject)
        if queue is not None:
            validate_queue(queue)
        check_callback(cb)
        if self._state:
            self._ready()
        if self._state == _DRAINING_SUBS:
            raise ConnectionClosedError("the connection is draining")
        opts = self._options
        sid = next(self._sids)
        sub = cls(
            self,
            sid,
            subject,
            queue,
            cb,
            pending_msgs_limit if pending_msgs_limit is not None else opts.pending_msgs_limit,
            pending_bytes_limit if pending_bytes_limit is not None else opts.pending_bytes_limit,
        )
        frame = commands.sub(subject.encode(), sid, queue.encode() if queue else None)
        if max_msgs:
            sub._max = max_msgs
            frame += commands.unsub(sid, max_msgs)
        self._subs[sid] = sub
        try:
            self._write_control(frame)
        except ConnectionClosedError:
            self._subs.pop(sid, None)
            sub._finish(_CLOSED)
            raise
        return sub

    def _subscribe_internal(self, subject: str, cls: type[Subscription] = InternalSubscription) -> Subscription:
        """A library-owned subscription: no slow-consumer limits, restored on reconnect."""
        if self._state:
            self._ready()
        sid = next(self._sids)
        sub = cls(self, sid, subject, None, None, 1 << 62, 1 << 62)
        self._subs[sid] = sub
        self._write_control(commands.sub(subject.encode(), sid))
        return sub

    def _on_close(self, fn: Callable[[], None]) -> None:
        self._close_hooks.append(fn)

    def _on_reconnect(self, fn: Callable[[], None]) -> None:
        self._reconnect_hooks.append(fn)

    def jetstream(
        self,
        domain: str | None = None,
        api_prefix: str = "$JS.API",
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 5.0,
    ) -> JetStream:
        """A JetStream context on this connection (cheap; make as many as you like).

        Args:
            domain: the JetStream domain (changes the API prefix to ``$JS.<domain>.API``).
            api_prefix: a custom API prefix (for imported JetStream APIs).
            timeout: default seconds for every JetStream API call and sync publish.
            publish_async_max_pending: async publishes in flight before
                ``publish_async`` blocks.
            publish_async_stall_wait: how long ``publish_async`` blocks on a
                full window before it raises TimeoutError.
        """
        from .jetstream import JetStream

        return JetStream(self, domain=domain, api_prefix=api_prefix, timeout=timeout,
                         publish_async_max_pending=publish_async_max_pending,
                         publish_async_stall_wait=publish_async_stall_wait)

    def _remove_sub(self, sub: Subscription) -> None:
        self._subs.pop(sub.sid, None)

    def _unsubscribe(self, sub: Subscription, limit: int | None) -> None:
        if sub._state >= _DRAINED:
            raise BadSubscriptionError(f"subscription to {sub.subject!r} has already ended")
        if self._state == _CLOSED_STATE:
            raise ConnectionClosedError("the connection is closed")
        if limit:
            sub._max = limit
            if sub._received >= limit:
                self._remove_sub(sub)
                sub._finish(_DRAINED)
            self._write_control(commands.unsub(sub.sid, limit))
            return
        self._remove_sub(sub)
        sub._finish(_UNSUBSCRIBED)
        self._write_control(commands.unsub(sub.sid))

    def _drain_sub(self, sub: Subscription, timeout: float | None) -> None:
        deadline = Deadline(timeout)
        if sub._state < _DRAINED:
            sub._state = _DRAINING
            self._write_control(commands.unsub(sub.sid))
            # After the PONG nothing more can arrive for this sid.
            self.flush(timeout=deadline.remaining())
            self._remove_sub(sub)
            sub._finish(_DRAINED)
        if sub._cb is not None and not sub._wait_done(deadline.remaining()):
            raise TimeoutError(f"draining {sub.subject!r} did not finish in time")

    # ------------------------------------------------------------------ request

    def _ensure_resp_mux(self) -> None:
        if self._resp_mux is not None:
            return
        with self._lock:
            if self._resp_mux is not None:
                return
            prefix = f"{self._options.inbox_prefix}.{self._nuid.next()}."
            sid = next(self._sids)
            mux = _ResponseMux(self, sid, prefix + "*", None, None, 1 << 62, 1 << 62)
            self._resp_prefix = prefix
            self._resp_prefix_len = len(prefix)
            self._subs[sid] = mux
            if self._state != _RECONNECTING and self._sock is not None:
                self._pending += commands.sub((prefix + "*").encode(), sid)
            self._resp_mux = mux

    def request(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        timeout: TimeoutArg = 1.0,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """Publish a request and wait for the first reply.

        A request made while reconnecting waits in the buffer and goes out after
        the reconnect, within ``timeout``. A request already sent when the
        connection breaks fails at once: its reply may be lost.

        Raises:
            NoRespondersError: nobody is subscribed to ``subject``.
            TimeoutError: no reply within ``timeout`` seconds.
            NatsConnectionError: the connection broke while waiting.
            ConnectionClosedError: the client closed while waiting.
        """
        t = resolve(timeout, 1.0)
        if self._state:
            self._ready()
        self._ensure_resp_mux()
        token = str(next(self._resp_tokens))
        waiter = _Waiter()
        self._resp_map[token] = waiter
        try:
            self.publish_now(subject, payload, reply=self._resp_prefix + token, headers=headers)
            if not waiter.wait(t):
                raise TimeoutError(f"no reply on {subject!r} within {t} s")
        finally:
            self._resp_map.pop(token, None)
        msg = waiter.value
        if isinstance(msg, Exception):
            raise msg
        if msg._hdr is not None and msg.status == STATUS_NO_RESPONDERS and not msg.data:
            raise NoRespondersError(f"no responders on {subject!r}")
        return msg  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ flush, rtt

    def flush(self, timeout: TimeoutArg = 10.0) -> None:
        """Send everything buffered and wait until the server has processed it.

        While reconnecting, this waits (within ``timeout``) for the reconnect and
        for the server to confirm what was buffered.

        Raises:
            TimeoutError: no PONG within ``timeout`` seconds.
            NatsConnectionError: the connection broke after the PING was sent.
            ConnectionClosedError: the client is closed.
        """
        t = resolve(timeout, 10.0)
        if self._state:
            self._ready(draining_ok=True)
        waiter = _Waiter()
        with self._lock:
            if self._state == _CLOSED_STATE:
                raise ConnectionClosedError("the connection is closed")
            self._pongs.append(waiter)
            self._pings_in_pending += 1
            self._pending += commands.PING
        self._send_pending()
        if not waiter.wait(t):
            raise TimeoutError(f"flush: no PONG within {t} s")
        if isinstance(waiter.value, Exception):
            raise waiter.value

    def rtt(self, timeout: TimeoutArg = 10.0) -> float:
        """The round-trip time to the server, in seconds."""
        start = time.perf_counter()
        self.flush(timeout)
        return time.perf_counter() - start

    # ------------------------------------------------------------------ drain, close

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stop taking messages, let every subscription finish its queue, flush, close.

        Raises:
            TimeoutError: draining took longer than ``timeout`` (the client is closed anyway).
        """
        t = resolve(timeout, self._options.drain_timeout)
        deadline = Deadline(t)
        if self._state == _FORKED:
            self._close(flush=False)
            return
        if self._state >= _DRAINING_SUBS:
            if self._state == _CLOSED_STATE:
                raise ConnectionClosedError("the connection is closed")
            return
        self._state = _DRAINING_SUBS
        try:
            subs = [s for s in list(self._subs.values()) if s is not self._resp_mux]
            for sub in subs:
                sub._state = _DRAINING
                self._write_control(commands.unsub(sub.sid))
            self.flush(timeout=deadline.remaining())
            for sub in subs:
                self._remove_sub(sub)
                sub._finish(_DRAINED)
            for sub in subs:
                if sub._cb is not None and not sub._wait_done(deadline.remaining()):
                    raise TimeoutError(f"drain: subscription {sub.subject!r} did not finish in time")
            self._state = _DRAINING_PUBS
            self.flush(timeout=deadline.remaining())
        finally:
            self._close(flush=True)

    def close(self) -> None:
        """Flush what is buffered (best effort) and close. Wakes every waiter.

        Waiting calls (request, flush, next_msg) raise ConnectionClosedError.
        Safe to call more than once and from any thread, callbacks included.
        """
        self._close(flush=True)

    def _close(self, flush: bool) -> None:
        with self._lock:
            if self._state == _CLOSED_STATE:
                return
            forked = self._state == _FORKED
            self._state = _CLOSED_STATE
            self._flush_cond.notify_all()
            sock, self._sock = self._sock, None
        self._stop_reconnect.set()
        if forked:
            return
        if flush and sock is not None and self._pending:
            try:
                sock.settimeout(1.0)
                with self._send_lock:
                    sock.sendall(self._pending)
            except OSError:
                pass
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        closed = ConnectionClosedError("the connection is closed")
        for waiter in list(self._resp_map.values()):
            waiter.set(closed)
        self._resp_map.clear()
        while self._pongs:
            w = self._pongs.popleft()
            if w is not None:
                w.set(closed)
        for sub in list(self._subs.values()):
            sub._finish(_CLOSED)
        self._subs.clear()
        for hook in list(self._close_hooks):
            try:
                hook()
            except Exception:
                log.exception("natsjs_sync: internal close hook failed")
        current = threading.current_thread()
        for t in (self._reader, self._flusher, self._reconnector):
            if t is not None and t is not current and t.is_alive():
                t.join(2.0)
        if self._options.closed_cb is not None:
            self._events.submit(self._options.closed_cb)
        self._events.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        parts = ["<natsjs_sync.Client", self.name or "", _STATE_NAMES[self._state], self.connected_url or ""]
        return " ".join(p for p in parts if p) + ">"


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._disown_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _as_server_list(servers: str | Sequence[str] | None) -> list[ServerAddress]:
    if servers is None:
        servers = os.environ.get("NATS_URL") or DEFAULT_SERVER
    if isinstance(servers, str):
        items = [s for s in servers.split(",") if s.strip()]
    else:
        items = list(servers)
    if not items:
        raise ValueError("no server URL given")
    return [parse_server_url(s) for s in items]


def connect(
    servers: str | Sequence[str] | None = None,
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    nkeys_seed: str | None = None,
    user_credentials: str | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[str], bytes | str] | None = None,
    token_cb: Callable[[], str] | None = None,
    user_info_cb: Callable[[], tuple[str, str]] | None = None,
    tls: ssl.SSLContext | bool | None = None,
    tls_handshake_first: bool = False,
    connect_timeout: float = 2.0,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_time_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_jitter_tls: float = 1.0,
    no_randomize: bool = False,
    pending_size: int = 2 * 1024 * 1024,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    no_echo: bool = False,
    verbose: bool = False,
    pedantic: bool = False,
    inbox_prefix: str = "_INBOX",
    drain_timeout: float = 30.0,
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    error_cb: ErrorCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    closed_cb: EventCallback | None = None,
    discovered_server_cb: EventCallback | None = None,
    lame_duck_mode_cb: EventCallback | None = None,
) -> Client:
    """Connect to a NATS server and return a :class:`Client`.

    Args:
        servers: a URL, a comma-separated list or a sequence of URLs
            (``nats://[user:pass@]host:port``, ``tls://host:port``); default: the
            ``NATS_URL`` environment variable, else ``nats://127.0.0.1:4222``.
        name: a client name shown in the server's monitoring and thread names.
        user, password, token: credentials (URL credentials win).
        nkeys_seed: a user nkey seed (``SU...``) or the path of a file holding it.
        user_credentials: the path of a ``.creds`` file (user JWT plus seed).
        user_jwt_cb, signature_cb: dynamic JWT credentials: the JWT, and the
            signature of the server's nonce (bytes, or base64url text).
        token_cb, user_info_cb: dynamic token, or ``(user, password)``, asked
            for at every (re)connect.
        tls: ``True`` or an :class:`ssl.SSLContext` to use TLS; ``False`` to
            refuse it (SecureConnRequiredError when the server requires it);
            ``None`` uses TLS for ``tls://`` URLs and servers that require it.
        tls_handshake_first: start with the TLS handshake, before the server's INFO.
        connect_timeout: seconds for TCP connect plus handshake, per server.
        allow_reconnect: reconnect when the connection breaks (else close).
        max_reconnect_attempts: failed attempts in a row before a server is
            dropped from the pool (negative: never).
        reconnect_time_wait: seconds between attempts on the same server.
        reconnect_jitter, reconnect_jitter_tls: random extra wait, up to this.
        no_randomize: keep the server order instead of shuffling it.
        pending_size: bytes buffered while reconnecting; more raises
            OutboundBufferLimitError.
        ping_interval: seconds between keep-alive PINGs (``0`` turns them off).
        max_outstanding_pings: unanswered PINGs after which the connection is stale.
        no_echo: do not receive our own publishes.
        inbox_prefix: prefix of reply inboxes.
        drain_timeout: default seconds for :meth:`Client.drain`.
        pending_msgs_limit, pending_bytes_limit: default slow-consumer limits per subscription.
        error_cb: called with asynchronous errors (server -ERR, slow consumers,
            lost connections, exceptions from subscription callbacks).
        disconnected_cb, reconnected_cb, closed_cb: connection events.
        discovered_server_cb: called when the server announces new cluster members.
        lame_duck_mode_cb: called when the server enters lame duck mode.

        Every callback runs on the client's events thread, never on the reader.

    Raises:
        NoServersError: no server could be reached (the causes are in the message).
        AuthorizationError: the server refused the credentials.
        SecureConnRequiredError: the server requires TLS and ``tls=False``.
    """
    if not isinstance(inbox_prefix, str) or not inbox_prefix:
        raise ValueError("inbox_prefix must be a non-empty str")
    if tls is not None and not isinstance(tls, (bool, ssl.SSLContext)):
        raise TypeError(f"tls must be an ssl.SSLContext or a bool, not {type(tls).__name__}")
    if pending_size < 0:
        raise ValueError("pending_size must be >= 0")
    credentials = Credentials(
        user=user,
        password=password,
        token=token,
        nkeys_seed=nkeys_seed,
        user_credentials=user_credentials,
        user_jwt_cb=user_jwt_cb,
        signature_cb=signature_cb,
        token_cb=token_cb,
        user_info_cb=user_info_cb,
    )
    credentials.validate()
    options = _Options(
        servers=_as_server_list(servers),
        name=name,
        credentials=credentials,
        tls=tls,
        tls_handshake_first=tls_handshake_first,
        connect_timeout=connect_timeout,
        allow_reconnect=allow_reconnect,
        max_reconnect_attempts=max_reconnect_attempts,
        reconnect_time_wait=reconnect_time_wait,
        reconnect_jitter=reconnect_jitter,
        reconnect_jitter_tls=reconnect_jitter_tls,
        no_randomize=no_randomize,
        pending_size=pending_size,
        ping_interval=ping_interval,
        max_outstanding_pings=max_outstanding_pings,
        no_echo=no_echo,
        verbose=verbose,
        pedantic=pedantic,
        inbox_prefix=inbox_prefix,
        drain_timeout=drain_timeout,
        pending_msgs_limit=pending_msgs_limit,
        pending_bytes_limit=pending_bytes_limit,
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        closed_cb=closed_cb,
        discovered_server_cb=discovered_server_cb,
        lame_duck_mode_cb=lame_duck_mode_cb,
    )
    client = Client(options)
    client._connect()
    return client
