"""A TCP fault proxy: put it between a client and a server, then break the network on demand.

The proxy listens on a free port of 127.0.0.1 and forwards every connection to
one upstream ``host:port``. A test points its client at :attr:`FaultProxy.url`
and, at any moment, makes the network misbehave for every current and future
connection: hold all traffic (a blackhole), stop reading from the client (a peer
whose writes stall), cut connections abruptly, refuse or drop new ones, trickle
bytes, add latency, or close a connection in the middle of the next frame the
server sends. :meth:`FaultProxy.heal` puts everything back to normal.

Each connection has two forwarding threads (one per direction), named
``natsjs-faultproxy-<port>-<n>-up`` and ``...-down``; the proxy's own thread
accepts connections. :meth:`FaultProxy.close` ends and joins all of them.
Nothing is polled in a loop: each thread waits in a selector on its sockets and
on a wake-up socket the proxy writes to when a fault changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import selectors
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from typing import Literal
from urllib.parse import urlsplit

from .server import LOOPBACK, free_port

Direction = Literal["to_server", "to_client", "both"]
_DIRECTIONS = ("to_server", "to_client", "both")
_RECV_SIZE = 64 * 1024
#: A send to a socket that was reset fails with an error, never SIGPIPE: the proxy runs inside
#: programs that restored the signal's default action too.
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
# A control line longer than this is not NATS: the frame scanner gives up on
# the connection (bytes still flow, frames are no longer counted or cut).
_MAX_LINE = 64 * 1024
# Waits are cut into slices this long at most, so a lost wake-up costs a
# moment, never a hang.
_MAX_WAIT = 0.5
_PAYLOAD_OPS = (b"MSG", b"HMSG", b"PUB", b"HPUB")


@dataclasses.dataclass(frozen=True)
class _Way:
    """The faults of one direction (immutable: the proxy swaps in a new one)."""

    hold: bool = False  # blackhole: read (up to the buffer bound), deliver nothing
    stall: bool = False  # do not read at all: the sender's writes stall
    latency: float = 0.0  # seconds each byte is held before it is delivered
    trickle: tuple[int, float] | None = None  # (bytes per send, pause after each send)


@dataclasses.dataclass(frozen=True)
class _Faults:
    to_server: _Way = _Way()
    to_client: _Way = _Way()
    new: str = "accept"  # what happens to new connections: accept, refuse, drop

    def way(self, direction: str) -> _Way:
        return self.to_server if direction == "to_server" else self.to_client


def _reset_close(sock: socket.socket) -> None:
    """Close so that the peer gets a TCP RST, not an orderly FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _parse_upstream(upstream: str | tuple[str, int]) -> tuple[str, int, str]:
    """``(host, port, url scheme)`` of ``nats://host:port``, ``host:port`` or ``(host, port)``."""
    if isinstance(upstream, tuple):
        host, port = upstream
        if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
            raise TypeError(f"upstream must be (host: str, port: int), got {upstream!r}")
        return host, port, "nats"
    if not isinstance(upstream, str):
        raise TypeError(f"upstream must be a URL, 'host:port' or (host, port), got {upstream!r}")
    text = upstream.strip()
    if not text:
        raise ValueError("upstream is empty")
    if "," in text:
        raise ValueError(f"a fault proxy forwards to one server, got {upstream!r}")
    parts = urlsplit(text if "://" in text else "nats://" + text)
    try:
        url_port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in {upstream!r}") from exc
    if not parts.hostname or url_port is None:
        raise ValueError(f"upstream needs a host and a port, got {upstream!r}")
    scheme = parts.scheme.lower() if parts.scheme.lower() in ("nats", "tls") else "nats"
    return parts.hostname, url_port, scheme


class _FrameScanner:
    """Finds where NATS frames start in one direction of a byte stream.

    Control lines end with ``\\n``; ``MSG``/``HMSG``/``PUB``/``HPUB`` lines are
    followed by a payload of the size their last field gives, plus ``\\r\\n``.
    """

    def __init__(self) -> None:
        self._skip = 0  # payload bytes (and CRLF) still to pass over
        self._partial = bytearray()  # the start of a control line cut by a read
        self.broken = False

    def feed(self, data: bytes) -> tuple[list[tuple[int, int | None]], list[str]]:
        """Scan one read: ``([(frame start, frame length or None), ...], [op, ...])``.

        Starts are offsets in ``data`` of the frames that begin in it; the
        length is None when the frame's control line is not complete yet.
        The ops are those of every control line completed in ``data``.
        """
        starts: list[tuple[int, int | None]] = []
        ops: list[str] = []
        pos, end = 0, len(data)
        while pos < end and not self.broken:
            if self._skip:
                step = min(self._skip, end - pos)
                self._skip -= step
                pos += step
                continue
            new = not self._partial
            nl = data.find(b"\n", pos)
            if nl < 0:
                if new:
                    starts.append((pos, None))
                self._partial += data[pos:]
                if len(self._partial) > _MAX_LINE:
                    self.broken = True
                return starts, ops
            line = bytes(self._partial) + data[pos : nl + 1] if self._partial else data[pos : nl + 1]
            self._partial.clear()
            fields = line.split()
            op = fields[0].upper() if fields else b""
            size = 0
            if op in _PAYLOAD_OPS:
                try:
                    size = int(fields[-1]) + 2
                except ValueError:
                    self.broken = True
                    return starts, ops
            if new:
                starts.append((pos, len(line) + size))
            ops.append(op.decode("ascii", "replace"))
            self._skip = size
            pos = nl + 1
        return starts, ops


class _Pump(threading.Thread):
    """Moves bytes one way (client to server, or back), applying the faults."""

    def __init__(self, link: _Link, src: socket.socket, dst: socket.socket, direction: str, name: str):
        super().__init__(name=name, daemon=True)
        self._link = link
        self._proxy = link.proxy
        self._src = src
        self._dst = dst
        self._direction = direction
        self._queue: deque[tuple[float, bytes]] = deque()  # (deliver at, bytes)
        self._queued = 0
        self._out = memoryview(b"")  # being sent now
        self._next_send = 0.0  # trickle: not before this time
        self._eof = False
        self._src_reset = False
        self._cut_after = False  # a mid-frame cut: close once this is sent
        self._scanner = _FrameScanner()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # full (already woken) or closed (ended)
            self._wake_w.send(b"\0", _NOSIGNAL)

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            self._loop(sel)
        except OSError:
            self._link.abort(reset=True)  # a reset on one side is passed on as a reset
        finally:
            sel.close()
            self._wake_r.close()
            self._wake_w.close()
            self._link.pump_done()

    def _loop(self, sel: selectors.BaseSelector) -> None:
        interest: dict[socket.socket, int] = {}
        max_buffer = self._proxy.max_buffer
        while not self._link.closing:
            way = self._proxy._faults.way(self._direction)
            now = time.monotonic()
            if not self._out and self._queue and self._queue[0][0] <= now and not way.hold:
                self._out = memoryview(self._queue.popleft()[1])
                self._queued -= len(self._out)
            can_send = bool(self._out) and not way.hold and now >= self._next_send
            if can_send and self._send(way, now):
                continue
            if not self._out and not self._queue and not way.hold and self._ended():
                return
            reading = not self._eof and not way.stall and not self._cut_after and self._queued < max_buffer
            want = {self._src: selectors.EVENT_READ} if reading else {}
            if can_send:  # the receiver's buffer is full: wait until it reads
                want[self._dst] = want.get(self._dst, 0) | selectors.EVENT_WRITE
            self._reregister(sel, interest, want)
            self._serve(sel.select(self._timeout(way, now, can_send)), reading)

    def _ended(self) -> bool:
        """Everything is delivered: pass a cut or the end of the stream on (True: the pump is done)."""
        if self._cut_after:
            self._link.abort(reset=self._proxy._cut_reset)
            return True
        if self._eof:
            if self._src_reset:
                self._link.abort(reset=True)
            else:
                with contextlib.suppress(OSError):
                    self._dst.shutdown(socket.SHUT_WR)
            return True
        return False

    def _serve(self, ready: list[tuple[selectors.SelectorKey, int]], reading: bool) -> None:
        """What the selector found ready: a wake-up to swallow, data to take in."""
        for key, _ in ready:
            if key.fileobj is self._wake_r:
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            elif key.fileobj is self._src and reading:
                # The faults as they are now: one may have changed while
                # this thread waited (its wake-up can come with the data).
                now_way = self._proxy._faults.way(self._direction)
                if not now_way.stall:
                    self._receive(now_way)

    def _timeout(self, way: _Way, now: float, waiting_writable: bool) -> float | None:
        """How long the selector may wait: until the next delivery or trickle
        step; a writable socket or a wake-up ends the wait sooner."""
        wait = _MAX_WAIT
        if not way.hold and not waiting_writable:
            if self._out:
                wait = min(wait, max(0.0, self._next_send - now))
            elif self._queue:
                wait = min(wait, max(0.0, self._queue[0][0] - now))
        return wait

    @staticmethod
    def _reregister(sel: selectors.BaseSelector, interest: dict[socket.socket, int],
                    want: dict[socket.socket, int]) -> None:
        for sock in list(interest):
            if sock not in want:
                sel.unregister(sock)
                del interest[sock]
        for sock, events in want.items():
            if sock not in interest:
                sel.register(sock, events)
            elif interest[sock] != events:
                sel.modify(sock, events)
            interest[sock] = events

    def _send(self, way: _Way, now: float) -> bool:
        """Send what is due; False when the receiver's buffer is full."""
        size = len(self._out) if way.trickle is None else max(1, way.trickle[0])
        try:
            sent = self._dst.send(self._out[:size], _NOSIGNAL)
        except BlockingIOError:
            return False
        self._out = self._out[sent:]
        if way.trickle is not None:
            self._next_send = now + way.trickle[1]
        return sent > 0

    def _receive(self, way: _Way) -> None:
        try:
            data = self._src.recv(_RECV_SIZE)
        except BlockingIOError:
            return
        except ConnectionResetError:
            # Passed on as a reset once what came before it is delivered (a
            # blackhole holds it like the rest).
            self._eof = self._src_reset = True
            return
        if not data:
            self._eof = True
            return
        if not self._scanner.broken:
            starts, ops = self._scanner.feed(data)
            if ops:
                self._proxy._count(self._direction, ops)
            if starts and self._direction == "to_client" and self._proxy._take_mid_frame_cut():
                data = data[: self._cut_point(data, starts[0])]
                self._cut_after = True
        self._queue.append((time.monotonic() + way.latency, data))
        self._queued += len(data)

    @staticmethod
    def _cut_point(data: bytes, start: tuple[int, int | None]) -> int:
        """An offset inside the frame starting at ``start``: at least one byte of
        it is delivered, never all of it."""
        offset, length = start
        available = len(data) - offset
        span = available if length is None else min(length, available)
        return offset + max(1, span // 2)


class _Link:
    """One proxied connection: the client's socket, the server's, two pumps."""

    def __init__(self, proxy: FaultProxy, number: int, client: socket.socket, server: socket.socket):
        self.proxy = proxy
        self.number = number
        self._client = client
        self._server = server
        self._lock = threading.Lock()
        self.closing = False
        self._reset = False
        self._running = 2
        self.closed = threading.Event()
        for s in (client, server):
            s.setblocking(False)
            with contextlib.suppress(OSError):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        base = f"natsjs-faultproxy-{proxy.port}-{number}"
        self.pumps = (
            _Pump(self, client, server, "to_server", base + "-up"),
            _Pump(self, server, client, "to_client", base + "-down"),
        )

    def start(self) -> None:
        for p in self.pumps:
            p.start()

    def wake(self) -> None:
        for p in self.pumps:
            p.wake()

    def close_window(self, direction: str) -> None:
        """Shrink the receive buffer of the side(s) not read to the minimum."""
        socks = {"to_server": (self._client,), "to_client": (self._server,)}.get(direction,
                                                                                  (self._client, self._server))
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)

    def abort(self, reset: bool) -> None:
        """End both directions now (the last pump to stop closes the sockets)."""
        with self._lock:
            if self.closing:
                return
            self.closing = True
            self._reset = reset
        self.wake()

    def pump_done(self) -> None:
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if not last:
            return
        for s in (self._client, self._server):
            if self._reset:
                _reset_close(s)
            else:
                with contextlib.suppress(OSError):
                    s.close()
        self.proxy._forget(self)
        self.closed.set()


class FaultProxy:
    """A TCP proxy between clients and one server that breaks the network on demand.

    Thread-safe: every method may be called from any thread at any moment, and
    each fault applies at once to every open connection and to the ones made
    later, until :meth:`heal`. Faults combine (latency and trickle, say).

    The proxy understands just enough of the NATS protocol to find where
    frames begin, for :meth:`cut_mid_frame`, :meth:`server_frames` and
    :meth:`client_frames`. Bytes are never altered or lost: a held byte is
    delivered on :meth:`heal` unless its connection is cut first.

    Args:
        upstream: the server: ``nats://host:port`` (the URL of a
            :class:`NatsServer`), ``host:port`` or ``(host, port)``.
        port: where to listen on 127.0.0.1; a free port by default.
        max_buffer: bytes the proxy holds per direction of a connection (for
            latency, a blackhole or a slow receiver) before it stops reading
            from the sender.
        connect_timeout: seconds to reach the upstream server for each new
            connection; a client whose upstream cannot be reached is reset.

    Raises:
        TypeError, ValueError: ``upstream`` is not an address.

    Use it as a context manager, or call :meth:`start` and :meth:`close`::

        with FaultProxy(server.url) as proxy:
            nc = natsjs_sync.connect(proxy.url)
            proxy.blackhole()
            ...
            proxy.heal()
    """

    def __init__(self, upstream: str | tuple[str, int], *, port: int | None = None,
                 max_buffer: int = 1024 * 1024, connect_timeout: float = 2.0):
        self._upstream_host, self._upstream_port, self._scheme = _parse_upstream(upstream)
        if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536):
            raise ValueError(f"port must be an int between 1 and 65535, got {port!r}")
        if not isinstance(max_buffer, int) or isinstance(max_buffer, bool) or max_buffer < 1:
            raise ValueError(f"max_buffer must be a positive int, got {max_buffer!r}")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be > 0, got {connect_timeout!r}")
        self.port = port or free_port()
        self.max_buffer = max_buffer
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._faults = _Faults()
        self._links: dict[int, _Link] = {}
        self._threads: list[threading.Thread] = []
        self._numbers = 0
        self._frames: dict[str, Counter[str]] = {"to_client": Counter(), "to_server": Counter()}
        self._mid_frame_armed = False
        self._cut_reset = False
        self._listener: socket.socket | None = None
        self._accepter: threading.Thread | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._closed = False

    # ------------------------------------------------------------------ life cycle

    @property
    def url(self) -> str:
        """Where clients connect: ``nats://127.0.0.1:<port>`` (``tls://`` for a TLS upstream)."""
        return f"{self._scheme}://{LOOPBACK}:{self.port}"

    @property
    def upstream(self) -> tuple[str, int]:
        """The server every connection is forwarded to, ``(host, port)``."""
        return self._upstream_host, self._upstream_port

    @property
    def connections(self) -> int:
        """Connections open through the proxy now."""
        with self._lock:
            return len(self._links)

    @property
    def accepted(self) -> int:
        """Connections accepted since the proxy started (forwarded or not)."""
        with self._lock:
            return self._numbers

    def start(self) -> FaultProxy:
        """Listen and forward (idempotent).

        Raises:
            RuntimeError: the proxy was closed.
            OSError: the port cannot be bound.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the fault proxy is closed")
            if self._accepter is not None:
                return self
            self._listen()
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._accepter = threading.Thread(target=self._accept_loop, name=f"natsjs-faultproxy-{self.port}-accept",
                                              daemon=True)
            self._accepter.start()
        return self

    def _listen(self) -> None:
        """Open the listening socket (lock held)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((LOOPBACK, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._listener = sock

    def close(self) -> None:
        """Stop listening, reset every connection and join every thread (idempotent)."""
        with self._lock:
            self._closed = True
        self._wake_accepter()
        if self._accepter is not None and self._accepter is not threading.current_thread():
            self._accepter.join(10)
        # Only now: the accept thread can no longer add a connection.
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.abort(reset=True)
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
        for t in threads:
            if t is not threading.current_thread():
                t.join(10)
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            wake = (self._wake_r, self._wake_w)
            self._wake_r = self._wake_w = None
        for s in wake:
            if s is not None:
                s.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.connections} connections"
        return f"<FaultProxy {self.url} -> {self._upstream_host}:{self._upstream_port} {state}>"

    # ------------------------------------------------------------------ accepting

    def _wake_accepter(self) -> None:
        wake = self._wake_w
        if wake is not None:
            with contextlib.suppress(OSError):
                wake.send(b"\0", _NOSIGNAL)

    def _accept_loop(self) -> None:
        wake = self._wake_r
        assert wake is not None
        with selectors.DefaultSelector() as sel:
            sel.register(wake, selectors.EVENT_READ)
            registered: socket.socket | None = None
            while True:
                with self._lock:
                    if self._closed:
                        return
                    listener = self._listener
                if listener is not registered:
                    if registered is not None:
                        sel.unregister(registered)
                    if listener is not None:
                        sel.register(listener, selectors.EVENT_READ)
                    registered = listener
                for key, _ in sel.select(_MAX_WAIT):
                    if key.fileobj is wake:
                        with contextlib.suppress(OSError):
                            while wake.recv(4096):
                                pass
                    elif key.fileobj is listener and listener is not None:
                        self._accept(listener)

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, _ = listener.accept()
        except (BlockingIOError, OSError):
            return
        with self._lock:
            self._numbers += 1
            number = self._numbers
            mode = self._faults.new
            closed = self._closed
        if closed or mode != "accept":
            _reset_close(client)
            return
        try:
            server = socket.create_connection((self._upstream_host, self._upstream_port), self.connect_timeout)
        except OSError:
            _reset_close(client)  # the server is down: the client sees its connection reset
            return
        link = _Link(self, number, client, server)
        with self._lock:
            if self._closed:
                _reset_close(client)
                _reset_close(server)
                return
            self._links[number] = link
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.extend(link.pumps)
        link.start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.pop(link.number, None)

    # ------------------------------------------------------------------ faults

    def _set(self, **changes: object) -> None:
        with self._lock:
            self._faults = dataclasses.replace(self._faults, **changes)  # type: ignore[arg-type]
            links = list(self._links.values())
        for link in links:
            link.wake()

    def _set_way(self, direction: Direction, **changes: object) -> None:
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be one of {_DIRECTIONS}, got {direction!r}")
        with self._lock:
            f = self._faults
            if direction in ("to_server", "both"):
                f = dataclasses.replace(f, to_server=dataclasses.replace(f.to_server, **changes))  # type: ignore[arg-type]
            if direction in ("to_client", "both"):
                f = dataclasses.replace(f, to_client=dataclasses.replace(f.to_client, **changes))  # type: ignore[arg-type]
            self._faults = f
            links = list(self._links.values())
        for link in links:
            link.wake()

    def blackhole(self, direction: Direction = "both") -> None:
        """Deliver nothing in ``direction``; the connections stay open.

        Like a network that drops every packet: the sender's bytes are taken
        (up to ``max_buffer``, then its writes stall) and held, and neither a
        close nor a reset gets through. On :meth:`heal` the held bytes are
        delivered, as TCP would once the network is back.

        Args:
            direction: ``"to_server"``, ``"to_client"`` or ``"both"``.

        Raises:
            ValueError: an unknown direction.
        """
        self._set_way(direction, hold=True)

    def stop_reading(self, direction: Direction = "to_server", *, close_window: bool = False) -> None:
        """Stop reading from the sender: a peer that stops reading.

        By default the client's side: its writes stall once the kernel's
        socket buffers fill, while what the server sends still arrives.

        Args:
            direction: whose bytes are no longer read: ``"to_server"`` (the
                client's), ``"to_client"`` (the server's) or ``"both"``.
            close_window: also shrink the proxy's receive buffer on the
                connections open now, so their senders stall at once and for
                good. Without it the kernel keeps taking a few more MB in
                bursts for some seconds (it grows the sender's buffer). The
                window stays small after :meth:`heal`: such a connection still
                works, but slowly; :meth:`cut` it to get a fast one again.

        Raises:
            ValueError: an unknown direction.
        """
        self._set_way(direction, stall=True)
        if close_window:
            with self._lock:
                links = list(self._links.values())
            for link in links:
                link.close_window(direction)

    def latency(self, seconds: float, direction: Direction = "both") -> None:
        """Deliver every byte ``seconds`` after it was sent (``0`` removes the delay).

        Args:
            seconds: the one-way delay.
            direction: ``"to_server"``, ``"to_client"`` or ``"both"``.

        Raises:
            ValueError: a negative or non-finite delay, or an unknown direction.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        self._set_way(direction, latency=float(seconds))

    def trickle(self, chunk_size: int = 1, pause: float = 0.001, direction: Direction = "to_client") -> None:
        """Deliver ``chunk_size`` bytes at a time with ``pause`` seconds between sends.

        Frames arrive split at every byte boundary the receiver could see.

        Args:
            chunk_size: bytes per send (>= 1).
            pause: seconds between sends (>= 0).
            direction: ``"to_client"`` (default), ``"to_server"`` or ``"both"``.

        Raises:
            ValueError: a bad size, pause or direction.
        """
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        if isinstance(pause, bool) or not isinstance(pause, (int, float)) or not 0 <= pause < float("inf"):
            raise ValueError(f"pause must be a finite number >= 0, got {pause!r}")
        self._set_way(direction, trickle=(chunk_size, float(pause)))

    def cut(self, reset: bool = True, timeout: float = 10.0) -> int:
        """Close every open connection now, both sides; new ones are still accepted.

        Args:
            reset: send a TCP RST (an abrupt failure); ``False`` closes with FIN.
            timeout: seconds to wait for the sockets to be closed.

        Returns:
            How many connections were cut.

        Raises:
            TimeoutError: a connection was not closed within ``timeout``.
        """
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.abort(reset=reset)
        deadline = time.monotonic() + timeout
        for link in links:
            if not link.closed.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"connection {link.number} through the fault proxy did not close")
        return len(links)

    def refuse_new(self) -> None:
        """Refuse new connections (the port stops listening: connect fails at once).

        Open connections are not touched.
        """
        with self._lock:
            self._faults = dataclasses.replace(self._faults, new="refuse")
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self._wake_accepter()

    def drop_new(self) -> None:
        """Accept new connections and reset them at once, before the server is reached.

        Open connections are not touched.
        """
        self._set(new="drop")

    def cut_mid_frame(self, reset: bool = False) -> None:
        """Close the connection in the middle of the next frame the server sends.

        The client gets part of the frame (at least one byte, never all of it)
        and then the close. One shot: the first connection to see a new frame
        from the server is cut, the others are left alone.

        Args:
            reset: close with a TCP RST instead of a FIN.
        """
        with self._lock:
            self._mid_frame_armed = True
            self._cut_reset = reset

    def _take_mid_frame_cut(self) -> bool:
        if not self._mid_frame_armed:
            return False
        with self._lock:
            armed, self._mid_frame_armed = self._mid_frame_armed, False
        return armed

    def heal(self) -> None:
        """Back to a normal network: every fault is lifted, held bytes are delivered
        and new connections are accepted again. Cut connections stay cut.

        Raises:
            OSError: the port was taken by someone else while new connections were refused.
        """
        with self._lock:
            self._faults = _Faults()
            self._mid_frame_armed = False
            if self._listener is None and self._accepter is not None and not self._closed:
                self._listen()
            links = list(self._links.values())
        self._wake_accepter()
        for link in links:
            link.wake()

    # ------------------------------------------------------------------ observing

    def _count(self, direction: str, ops: Iterable[str]) -> None:
        with self._lock:
            self._frames[direction].update(ops)

    def _frames_of(self, direction: str, op: str | None) -> int:
        with self._lock:
            counts = self._frames[direction]
            return sum(counts.values()) if op is None else counts[op.upper()]

    def server_frames(self, op: str | None = None) -> int:
        """Frames the proxy has read from the server, over every connection so far.

        Args:
            op: count only this protocol operation (``"INFO"``, ``"MSG"``,
                ``"HMSG"``, ``"PING"``, ``"PONG"``, ``"+OK"``, ``"-ERR"``);
                ``None`` counts them all.

        Returns:
            The number of frames, whether or not they were delivered yet.
        """
        return self._frames_of("to_client", op)

    def client_frames(self, op: str | None = None) -> int:
        """Frames the proxy has read from clients, over every connection so far.

        Args:
            op: count only this protocol operation (``"CONNECT"``, ``"PUB"``,
                ``"HPUB"``, ``"SUB"``, ``"UNSUB"``, ``"PING"``, ``"PONG"``);
                ``None`` counts them all.

        Returns:
            The number of frames, whether or not they were delivered yet (a
            blackhole reads and holds them; :meth:`stop_reading` does not read).
        """
        return self._frames_of("to_server", op)
