"""Byte transports: the one place where socket and TLS errors become natsjs_sync errors.

A :class:`Transport` moves bytes and nothing else. Reads block until data
arrives (the reader thread is the only reader); writes have a deadline: a
peer that stops reading makes :meth:`Transport.write` raise
:class:`~natsjs_sync.TimeoutError` instead of blocking the writer for ever.
A write may also carry the deadline of the call that makes it (a request, a
flush): it then sends what the socket takes before that deadline and keeps the
rest, in order, for the next write, so no caller waits longer than it asked
to, and no frame is ever cut on the wire.
:meth:`Transport.abort` may be called from any thread at any time and wakes a
blocked read or write at once. Every ``OSError`` and ``ssl.SSLError`` is
translated here, with ``raise ... from exc``.
"""

from __future__ import annotations

import _socket
import builtins
import select
import socket
import ssl
import threading
from collections.abc import Callable
from time import monotonic
from typing import Protocol, TypeVar

from .._timeout import Deadline
from ..errors import NatsConnectionError, ProtocolError, TimeoutError
from ..protocol import websocket as ws
from ..protocol._compiled import speedups
from .dial import DIRECT, Network, dial
from .pool import ServerAddress

#: The most one read takes (the reader's, and a requester's reading its reply). Under
#: glibc's mmap threshold (128 KiB): a 256 KiB buffer was mapped and unmapped (three
#: system calls and a page fault) on every read, however few bytes came.
RECV_SIZE = 64 * 1024
#: The shortest socket wait of a deadline-bounded write: a socket timeout of 0
#: would make the descriptor non-blocking, and the reader's recv would fail.
_MIN_WAIT = 0.001
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # Linux (elsewhere 0)

#: A deadline already passed: one short attempt, the rest kept for the next write.
_AT_ONCE = Deadline(0.0)
#: What a call into a non-blocking TLS socket gives when OpenSSL needs the socket first.
_WANT_READ, _WANT_WRITE = -1, -2
_R = TypeVar("_R")
_A = TypeVar("_A")


#: The methods a write goes past when it sends on the descriptor itself.
_SENDS = ("send", "sendall", "fileno")


def _is_os_socket(sock: object) -> bool:
    """Whether ``sock`` is the operating system's socket itself (not a green library's stand-in,
    which must see every wait, nor a custom dialer's subclass with a send of its own: a meter,
    a shaper, a tunnel, which must see every byte, called as it always was)."""
    cls = type(sock)
    return isinstance(sock, _socket.socket) and all(
        getattr(cls, name) is getattr(_socket.socket, name) for name in _SENDS)


class Transport(Protocol):
    """What the connection needs from a byte stream to a server."""

    @property
    def is_tls(self) -> bool: ...

    def upgrade_tls(self, ctx: ssl.SSLContext, hostname: str | None, deadline: Deadline) -> None:
        """Wrap the stream in TLS (the handshake's optional step)."""

    def read_with_deadline(self, deadline: Deadline, what: str) -> bytes:
        """One read bounded by ``deadline`` (handshake)."""

    def write_with_deadline(self, data: bytes, deadline: Deadline) -> None:
        """One write bounded by ``deadline`` (handshake)."""

    def read(self) -> bytes:
        """The next bytes from the server; ``b""`` once it closed the stream.

        Raises:
            NatsConnectionError: the stream broke.
        """

    def write(self, data: bytes | bytearray | memoryview, deadline: Deadline | None = None) -> bool:
        """Send ``data`` after what an earlier write left unsent.

        Without ``deadline``: all of it within the write timeout. With one: what
        the socket takes before it (one attempt at least); the rest is kept for
        the next write. The write timeout bounds both.

        Returns:
            True when everything (what was kept before included) is written;
            False when bytes were kept because ``deadline`` passed.

        Raises:
            TimeoutError: the peer did not take the bytes within the write timeout (a stall).
            NatsConnectionError: the stream broke.
        """

    def set_write_timeout(self, seconds: float | None) -> None: ...

    def abort(self) -> None:
        """Cut the stream now (any thread); blocked reads and writes return."""

    def close(self) -> None:
        """Cut the stream and release its descriptor (its reader's job, or the opener's)."""

    def detach_for_fork(self) -> None:
        """In a forked child: drop the descriptor without touching the parent's connection."""


class TcpTransport:
    """A TCP socket, optionally upgraded to TLS. Thread-safe for one reader and one writer.

    A TLS socket is one OpenSSL connection object, which two threads may not use
    at once: a read that ran beside a write could take OpenSSL's state for an end
    of stream (``recv`` gave ``b""`` with the server still there) and drop the
    connection. After the handshake it is therefore non-blocking, every call into
    it is made under ``_tls`` (held only for that call, never while waiting), and
    the waits for the socket happen outside the lock (``_tls_wait``).
    """

    __slots__ = ("_backlog", "_closing", "_send_flags", "_send_nowait", "_sock", "_tls", "_write_timeout", "addr",
                 "direct", "is_tls", "written")

    def __init__(self, sock: socket.socket, addr: ServerAddress):
        self._sock = sock
        self.addr = addr
        self.is_tls = isinstance(sock, ssl.SSLSocket)
        plain = not self.is_tls and _is_os_socket(sock)
        #: A write's first try, one system call that never waits (None: the socket's own send):
        #: plain sockets only, not TLS (OpenSSL owns those bytes) nor a green library's socket.
        self._send_nowait: Callable[..., int] | None = (
            speedups.send_nowait if speedups is not None and plain else None)
        #: The socket a waiting caller's frame may be sent on straight from its thread, the buffer
        #: skipped (the compiled ``Sender`` of :meth:`Writer.send_direct
        #: <natsjs_sync._core.writer.Writer.send_direct>`, which also reads ``_closing`` and
        #: ``_backlog`` and sets the backlog): a plain socket under this class's own ``write``
        #: only. None for TLS, WebSocket frames, green libraries' sockets and a subclass with a
        #: write of its own (a meter, a tunnel: it must see every byte), which take the buffer.
        self.direct: socket.socket | None = (
            sock if self._send_nowait is not None and type(self).write is _TCP_WRITE else None)
        #: The data of the last write handed over whole: set as the bytes leave (by the compiled
        #: send itself on its fast path), so that a writer whose write an exception cut short as
        #: it returned (a signal handler's) can tell it was done (see Writer.send_held).
        self.written: object = None
        #: A write to a connection the server reset fails with an error, never SIGPIPE: a program
        #: that restored SIGPIPE's default (a command line piped into ``head``) is not killed by it.
        #: 0: the socket's send and sendall are called with the data alone, as they always were.
        self._send_flags = _NOSIGNAL if plain else 0
        #: Held around a non-blocking send (it never waits) and around the close: the reader closes
        #: the socket as a connection ends, while a writer may be writing, and the number is reused
        #: at once (a reconnect's socket takes the lowest free one). A send that read the number,
        #: then let the closing thread run, put its bytes on that other connection.
        self._closing = threading.Lock()
        #: Wire bytes a deadline-bounded write left unsent; the next write sends them first.
        self._backlog: bytes = b""
        self._write_timeout: float | None = None
        #: Held around every call into the TLS connection (None: plain TCP).
        self._tls: threading.Lock | None = None
        if self.is_tls:
            self._serialise_tls()  # a custom dialer's socket may be TLS already

    @classmethod
    def open(cls, addr: ServerAddress, deadline: Deadline, network: Network = DIRECT) -> TcpTransport:
        """Connect with Nagle off (we coalesce writes ourselves), as ``network`` says
        (directly, through a SOCKS5 proxy, or with a custom dialer).

        Raises:
            TimeoutError, NatsConnectionError.
        """
        return cls(dial(addr.host, addr.port, addr.url, deadline, network), addr)

    def upgrade_tls(self, ctx: ssl.SSLContext, hostname: str | None, deadline: Deadline) -> None:
        """Wrap the socket in TLS, verifying ``hostname`` when the context asks for it.

        Raises:
            TimeoutError, NatsConnectionError (certificate verification included).
        """
        self._sock.settimeout(deadline.remaining())
        try:
            self._sock = ctx.wrap_socket(self._sock, server_hostname=hostname or self.addr.host)
        except ssl.SSLCertVerificationError as exc:
            raise NatsConnectionError(
                f"TLS certificate of {self.addr.url} failed verification: {exc.verify_message}"
            ) from exc
        except builtins.TimeoutError as exc:
            raise TimeoutError(f"TLS handshake with {self.addr.url} timed out") from exc
        except (ssl.SSLError, OSError) as exc:
            raise NatsConnectionError(f"TLS handshake with {self.addr.url} failed: {exc}") from exc
        self.is_tls = True
        self._serialise_tls()

    def _serialise_tls(self) -> None:
        """From here on one call at a time into the TLS connection, the socket non-blocking,
        and no write past OpenSSL (the bytes on the socket are its records now)."""
        self._send_nowait = None
        self.direct = None
        self._send_flags = 0
        self._sock.setblocking(False)
        self._tls = threading.Lock()

    # ------------------------------------------------------------------ TLS: one call at a time

    def _tls_call(self, call: Callable[[_A], _R], arg: _A) -> _R | int:
        """``call(arg)`` on the TLS socket under the lock; the poll event to wait for when OpenSSL
        wants the socket first (it may want to write to read, and the other way round)."""
        assert self._tls is not None
        with self._tls:
            try:
                return call(arg)
            except ssl.SSLWantReadError:
                return _WANT_READ
            except ssl.SSLWantWriteError:
                return _WANT_WRITE

    def _tls_wait(self, want: int, timeout: float | None) -> bool:
        """Wait (no lock held) until the socket is ready for ``want``; False when ``timeout`` passed."""
        fd = self._sock.fileno()
        if fd < 0:
            return True  # closed under us: the next call reports it
        # Looked up at each wait, not at import: eventlet's monkey_patch() deletes select.poll,
        # also when it runs after this module was imported (select() is what remains then).
        poll = getattr(select, "poll", None)
        if poll is not None:
            poller = poll()
            poller.register(fd, (select.POLLIN if want == _WANT_READ else select.POLLOUT) | select.POLLERR
                            | select.POLLHUP)
            return bool(poller.poll(None if timeout is None else max(timeout, 0.0) * 1000.0))
        ready = select.select([fd] if want == _WANT_READ else [], [fd] if want == _WANT_WRITE else [], [fd],
                              None if timeout is None else max(timeout, 0.0))
        return any(ready)

    def _tls_recv(self, deadline: Deadline | None) -> bytes:
        """The next bytes (``b""``: the server closed); TimeoutError when ``deadline`` passed first."""
        recv = self._sock.recv
        while True:
            got = self._tls_call(recv, RECV_SIZE)
            if not isinstance(got, int):
                return got
            remaining = None if deadline is None else deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise builtins.TimeoutError
            if not self._tls_wait(got, remaining) and deadline is not None:
                raise builtins.TimeoutError

    def read_with_deadline(self, deadline: Deadline, what: str) -> bytes:
        """One read bounded by ``deadline`` (the handshake's reads)."""
        remaining = deadline.remaining()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"timed out waiting for {what} from {self.addr.url}")
        try:
            if self._tls is not None:
                data = self._tls_recv(deadline)
            else:
                self._sock.settimeout(remaining)
                data = self._sock.recv(65536)
        except builtins.TimeoutError as exc:
            raise TimeoutError(f"timed out waiting for {what} from {self.addr.url}") from exc
        except ssl.SSLError as exc:
            raise NatsConnectionError(f"TLS error while waiting for {what}: {exc}") from exc
        except OSError as exc:
            raise NatsConnectionError(f"connection lost while waiting for {what}: {exc}") from exc
        if not data:
            raise NatsConnectionError(f"{self.addr.url} closed the connection while we waited for {what}")
        return data

    def write_with_deadline(self, data: bytes, deadline: Deadline) -> None:
        """One write bounded by ``deadline`` (the handshake's writes)."""
        if self._tls is None:
            self._sock.settimeout(deadline.remaining())
            self.write(data)
        elif not self.write(data, deadline):
            raise TimeoutError(f"write to {self.addr.url} timed out")

    def set_write_timeout(self, seconds: float | None) -> None:
        # One timeout serves both directions of a socket; a read that times out
        # is simply retried (see read), so this only bounds writes in effect.
        self._write_timeout = seconds
        if self._tls is not None:
            return  # non-blocking: the waits are bounded by the write timeout (_send_until)
        try:
            self._sock.settimeout(seconds)
        except OSError as exc:  # closed under us (the reader closes it when the connection ends)
            raise NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}") from exc

    def read(self) -> bytes:
        if self._tls is not None:
            try:
                return self._tls_recv(None)
            except ssl.SSLError as exc:
                raise NatsConnectionError(f"TLS error on the connection to {self.addr.url}: {exc}") from exc
            except OSError as exc:
                raise NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}") from exc
        recv = self._sock.recv
        while True:
            try:
                return recv(RECV_SIZE)
            except builtins.TimeoutError:
                continue  # only writes have a deadline; a quiet server is fine
            except ssl.SSLError as exc:
                raise NatsConnectionError(f"TLS error on the connection to {self.addr.url}: {exc}") from exc
            except OSError as exc:
                raise NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}") from exc

    def write(self, data: bytes | bytearray | memoryview, deadline: Deadline | None = None) -> bool:
        """See :meth:`Transport.write`. One writer at a time (the connection's send lock)."""
        if deadline is None and not self._backlog and self._tls is None:
            self._send_all(data)  # the flusher's common case: one C call, bounded by the write timeout
            return True
        return self._send_until(data, deadline)

    def _send_all(self, data: bytes | bytearray | memoryview) -> None:
        whole = data
        try:
            if self._send_nowait is not None:
                # The socket's own sendall polls before it sends (a socket with a timeout does).
                sent = self._nowait(data, whole)
                if sent == len(data):
                    return
                data = memoryview(data).cast("B")[sent:]
            if self._send_flags:
                self._sock.sendall(data, self._send_flags)
            else:
                self._sock.sendall(data)
            self.written = whole
        except builtins.TimeoutError as exc:
            raise self._stalled() from exc
        except OSError as exc:
            raise self._write_failed(exc) from exc

    def _nowait(self, data: bytes | bytearray | memoryview, whole: object) -> int:
        """One send that never waits (plain sockets with the compiled extension): the bytes
        the socket took. The descriptor's number is read and used under ``_closing``. When the
        socket takes all of ``data``, the send itself sets ``written`` to ``whole``."""
        assert self._send_nowait is not None
        with self._closing:
            return self._send_nowait(self._sock.fileno(), data, self, whole)

    def _stalled(self) -> TimeoutError:
        return TimeoutError(
            f"write to {self.addr.url} stalled: the server did not take our bytes within the write timeout")

    def _write_failed(self, exc: OSError) -> NatsConnectionError:
        """The error of a write the socket refused (TLS named apart), for ``raise ... from exc``."""
        if isinstance(exc, ssl.SSLError):
            return NatsConnectionError(f"TLS error writing to {self.addr.url}: {exc}")
        return NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}")

    def _send_until(self, data: bytes | bytearray | memoryview, deadline: Deadline | None) -> bool:
        """The backlog, then ``data``, in partial sends, each waiting no longer than
        the nearer of ``deadline`` (the rest is kept) and the write timeout (a stall)."""
        whole = data
        if self._backlog:
            data = self._backlog + data
            self._backlog = b""
        view = memoryview(data).cast("B")
        total = len(view)
        sent = 0
        tried = False
        if self._send_nowait is not None:
            # Most writes are taken whole at once, and then the socket's timeout is never touched
            # (setting it is a system call each way, and a socket with one polls before it sends).
            # This is the write's one try: past the deadline the rest is kept at once.
            try:
                sent = self._nowait(view, whole)
            except OSError as exc:
                raise self._write_failed(exc) from exc
            if sent == total:
                return True
            tried = True
        return self._send_rounds(view, sent, tried, whole, deadline)

    def _send_rounds(self, view: memoryview, sent: int, tried: bool, whole: object,
                     deadline: Deadline | None) -> bool:
        """The rest of a write from ``view[sent:]``, in partial sends (``tried``: one was
        made already), each waiting no longer than the nearer of ``deadline`` (the rest is
        kept as the backlog) and the write timeout (a stall)."""
        total = len(view)
        # Both bounds as points in monotonic time (None: none), each round read
        # against one clock reading.
        stall_at = Deadline(self._write_timeout).at
        own_at = None if deadline is None else deadline.at
        sock = self._sock
        tls = self._tls is not None
        flags = self._send_flags
        retimed = False
        try:
            while sent < total:
                now = monotonic()
                left = None if stall_at is None else max(0.0, stall_at - now)
                mine = None if own_at is None else max(0.0, own_at - now)
                if mine is not None and (left is None or mine < left):
                    if mine <= 0 and tried:
                        # Kept as wire bytes: a frame cut here is finished by the next write. A TLS
                        # record too: OpenSSL is handed the same bytes again (and maybe more after them).
                        self._backlog = bytes(view[sent:])
                        return False
                    left = mine
                elif left is not None and left <= 0 and tried:
                    raise self._stalled()
                if tls:
                    # Unsent bytes after a "want" are handed to OpenSSL again, as it requires.
                    tried = True
                    got = self._tls_call(sock.send, view[sent:])
                    if got >= 0:
                        sent += got
                    else:
                        self._tls_wait(got, left)  # the loop decides on a timeout
                    continue
                # One timeout serves the reader's recv too, which retries when it times out.
                sock.settimeout(None if left is None else max(left, _MIN_WAIT))
                tried = retimed = True
                try:
                    sent += sock.send(view[sent:], flags) if flags else sock.send(view[sent:])
                except builtins.TimeoutError:
                    continue  # the loop decides: keep the rest, or a stall
            self.written = whole
            return True
        except TimeoutError:
            raise  # our stall (also an OSError): not a lost connection
        except OSError as exc:
            raise self._write_failed(exc) from exc
        finally:
            if retimed:
                try:
                    sock.settimeout(self._write_timeout)
                except OSError:
                    pass  # closed under us: the next call reports it

    def abort(self) -> None:
        # Shut down only: a blocked recv or sendall returns at once. The
        # descriptor is closed by the reader when it ends (close()): closing it
        # under another thread's poll could let the number be reused while
        # that poll still waits on it.
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.abort()
        with self._closing:  # never under a send that read the number (see _closing)
            try:
                self._sock.close()
            except OSError:
                pass

    def detach_for_fork(self) -> None:
        import os

        self._closing = threading.Lock()  # maybe held by a parent's thread, which is not here
        try:
            # detach() first so the socket object never closes the descriptor
            # number again later, when it may belong to something else.
            os.close(self._sock.detach())
        except OSError:
            pass


#: TcpTransport's own write, as defined: a write put on the class later (a spy, an
#: instrumentation's wrapper) is another write, which a direct write would go past.
_TCP_WRITE = TcpTransport.write


class WebSocketTransport(TcpTransport):
    """NATS over a WebSocket (``ws://``, ``wss://``): TCP, TLS for ``wss``, the HTTP
    upgrade, then binary frames (see :mod:`natsjs_sync.protocol.websocket`)."""

    __slots__ = ("_compress", "_early", "_frames", "_olock", "_owed", "_upgraded", "_wlock")

    def __init__(self, sock: socket.socket, addr: ServerAddress):
        super().__init__(sock, addr)
        self._frames = ws.FrameReader()
        self._wlock = threading.Lock()  # frames from the writer and PONGs from the reader never interleave
        #: PONG frames the reader could not send (the write lock was busy): whoever holds it next sends
        #: them. ``_olock`` guards the list only (never held around I/O).
        self._owed: list[bytes] = []
        self._olock = threading.Lock()
        self._early = b""  # frame bytes that came with the upgrade answer
        self._upgraded = False
        self._compress = False  # permessage-deflate, when the server agreed to it

    @classmethod
    def open_ws(cls, addr: ServerAddress, deadline: Deadline, tls_ctx: ssl.SSLContext | None,
                hostname: str | None, headers: dict[str, str] | None = None,
                network: Network = DIRECT) -> WebSocketTransport:
        """Connect, do TLS when given a context, and upgrade to WebSocket (asking for
        compression and using the proxy path when ``network`` says so).

        Raises:
            TimeoutError, NatsConnectionError, ProtocolError (the server refused the upgrade).
        """
        tcp = TcpTransport.open(addr, deadline, network)
        t = cls(tcp._sock, addr)
        try:
            if tls_ctx is not None:
                t.upgrade_tls(tls_ctx, hostname, deadline)
            key = ws.new_key()
            if t._tls is None:
                t._sock.settimeout(deadline.remaining())
            path = network.ws_proxy_path if network.ws_proxy_path is not None else addr.path
            request = ws.upgrade_request(addr.host, addr.port, path, key, tls_ctx is not None, headers,
                                         compression=network.ws_compression)
            if not TcpTransport.write(t, request, deadline if t._tls is not None else None):
                raise TimeoutError(f"WebSocket upgrade with {addr.url} timed out")
            head = bytearray()
            while b"\r\n\r\n" not in head:
                head += TcpTransport.read_with_deadline(t, deadline, "the WebSocket upgrade")
                if len(head) > 65536:
                    raise ProtocolError("the WebSocket upgrade answer is too long")
            end = head.index(b"\r\n\r\n")
            t._compress = ws.check_upgrade_response(bytes(head[:end]), key, network.ws_compression)
            t._frames = ws.FrameReader(compression=t._compress)
            t._early = bytes(head[end + 4 :])
            t._upgraded = True
        except BaseException:
            t.close()
            raise
        return t

    def upgrade_tls(self, ctx: ssl.SSLContext, hostname: str | None, deadline: Deadline) -> None:
        if self._upgraded:
            # TLS cannot start inside a WebSocket: it comes first, with wss://.
            raise NatsConnectionError(f"{self.addr.url} requires TLS: connect with wss://")
        super().upgrade_tls(ctx, hostname, deadline)

    def _decode(self, data: bytes) -> bytes:
        out = self._frames.feed(data)
        if self._frames.pongs:
            pongs, self._frames.pongs = self._frames.pongs, []
            with self._olock:
                self._owed += [ws.frame(ws.OP_PONG, payload) for payload in pongs]
            # The reader never waits for the socket (nor for a writer stalled on it): a
            # PONG goes now if the write lock is free, else right after the write that holds it.
            self._pay_owed(_AT_ONCE)
        return out

    def read_with_deadline(self, deadline: Deadline, what: str) -> bytes:
        if self._early:
            data, self._early = self._early, b""
            out = self._decode(data)
            if out:
                return out
        while True:
            if self._frames.closed:
                raise NatsConnectionError(f"{self.addr.url} closed the WebSocket while we waited for {what}")
            out = self._decode(super().read_with_deadline(deadline, what))
            if out:
                return out  # what came with a CLOSE (an -ERR) is read before the close

    def read(self) -> bytes:
        if self._early:
            data, self._early = self._early, b""
            out = self._decode(data)
            if out:
                return out
        while True:
            if self._frames.closed:
                return b""  # the server closed the WebSocket
            data = super().read()
            if not data:
                return b""
            out = self._decode(data)
            if out:
                return out

    def _pay_owed(self, deadline: Deadline | None) -> None:
        """Send the owed PONGs unless another thread holds the write lock (it does
        then, after its write). What the socket does not take before ``deadline``
        stays in the backlog, for the next write."""
        while self._owed and self._wlock.acquire(blocking=False):
            try:
                with self._olock:
                    owed, self._owed = b"".join(self._owed), []
                super().write(owed, deadline)
            finally:
                self._wlock.release()

    def write_frame(self, data: bytes, deadline: Deadline | None = None) -> bool:
        with self._wlock:
            done = super().write(data, deadline)
        # PONGs the reader owed while this write held the lock (looked at after the
        # release: a reader that found the lock taken had queued them before).
        self._pay_owed(deadline)
        return done

    def write(self, data: bytes | bytearray | memoryview, deadline: Deadline | None = None) -> bool:
        # The frame is made whole before the send: what a deadline leaves unsent
        # is wire bytes, and the next frame (a PONG too) goes after them.
        if self._compress:
            return self.write_frame(ws.frame(ws.OP_BINARY, ws.deflate(data), compressed=True), deadline)
        return self.write_frame(ws.frame(ws.OP_BINARY, data), deadline)
