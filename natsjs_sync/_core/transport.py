"""Byte transports: the one place where socket and TLS errors become natsjs_sync errors.

A :class:`Transport` moves bytes and nothing else. Reads block until data
arrives (the reader thread is the only reader); writes have a deadline: a
peer that stops reading makes :meth:`Transport.write` raise
:class:`~natsjs_sync.TimeoutError` instead of blocking the writer for ever.
:meth:`Transport.abort` may be called from any thread at any time and wakes a
blocked read or write at once. Every ``OSError`` and ``ssl.SSLError`` is
translated here, with ``raise ... from exc``.
"""

from __future__ import annotations

import builtins
import socket
import ssl
from typing import Protocol

from .._timeout import Deadline
from ..errors import NatsConnectionError, TimeoutError
from .pool import ServerAddress

_RECV_SIZE = 256 * 1024


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

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of ``data`` within the write timeout.

        Raises:
            TimeoutError: the peer did not take the bytes in time (a stall).
            NatsConnectionError: the stream broke.
        """

    def set_write_timeout(self, seconds: float | None) -> None: ...

    def abort(self) -> None:
        """Cut the stream now (any thread); blocked reads and writes return."""

    def close(self) -> None:
        """Release the stream without shutting it down (a forked child's copy)."""

    def detach_for_fork(self) -> None:
        """In a forked child: drop the descriptor without touching the parent's connection."""


class TcpTransport:
    """A TCP socket, optionally upgraded to TLS. Thread-safe for one reader and one writer."""

    __slots__ = ("_sock", "addr", "is_tls")

    def __init__(self, sock: socket.socket, addr: ServerAddress):
        self._sock = sock
        self.addr = addr
        self.is_tls = isinstance(sock, ssl.SSLSocket)

    @classmethod
    def open(cls, addr: ServerAddress, deadline: Deadline) -> TcpTransport:
        """Connect with Nagle off (we coalesce writes ourselves).

        Raises:
            TimeoutError, NatsConnectionError.
        """
        try:
            sock = socket.create_connection((addr.host, addr.port), timeout=deadline.remaining())
        except builtins.TimeoutError as exc:
            raise TimeoutError(f"connecting to {addr.url} timed out") from exc
        except OSError as exc:
            raise NatsConnectionError(f"cannot connect to {addr.url}: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, addr)

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

    def read_with_deadline(self, deadline: Deadline, what: str) -> bytes:
        """One read bounded by ``deadline`` (the handshake's reads)."""
        remaining = deadline.remaining()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"timed out waiting for {what} from {self.addr.url}")
        self._sock.settimeout(remaining)
        try:
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
        self._sock.settimeout(deadline.remaining())
        self.write(data)

    def set_write_timeout(self, seconds: float | None) -> None:
        # One timeout serves both directions of a socket; a read that times out
        # is simply retried (see read), so this only bounds writes in effect.
        self._sock.settimeout(seconds)

    def read(self) -> bytes:
        recv = self._sock.recv
        while True:
            try:
                return recv(_RECV_SIZE)
            except builtins.TimeoutError:
                continue  # only writes have a deadline; a quiet server is fine
            except ssl.SSLError as exc:
                raise NatsConnectionError(f"TLS error on the connection to {self.addr.url}: {exc}") from exc
            except OSError as exc:
                raise NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}") from exc

    def write(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._sock.sendall(data)
        except builtins.TimeoutError as exc:
            raise TimeoutError(
                f"write to {self.addr.url} stalled: the server did not take our bytes within the write timeout"
            ) from exc
        except ssl.SSLError as exc:
            raise NatsConnectionError(f"TLS error writing to {self.addr.url}: {exc}") from exc
        except OSError as exc:
            raise NatsConnectionError(f"connection to {self.addr.url} lost: {exc.strerror or exc}") from exc

    def abort(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self) -> None:
        self.abort()

    def detach_for_fork(self) -> None:
        import os

        try:
            # detach() first so the socket object never closes the descriptor
            # number again later, when it may belong to something else.
            os.close(self._sock.detach())
        except OSError:
            pass
