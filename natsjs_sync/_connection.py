"""Socket-level pieces of a connection: server URLs, opening, the handshake.

The client (``client.py``) owns the write buffer, the reader thread and the
state; this module only knows how to turn a URL into a connected, handshaken
socket and translates socket errors into natsjs_sync errors at that boundary.
"""

from __future__ import annotations

import builtins
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from ._timeout import Deadline
from .errors import (
    AuthorizationError,
    NatsConnectionError,
    ProtocolError,
    SecureConnRequiredError,
    ServerError,
    TimeoutError,
)
from .protocol import commands
from .protocol.parser import OK, PING, PONG, Err, Info, Parser

DEFAULT_PORT = 4222


@dataclass(frozen=True)
class ServerAddress:
    """One server of the pool. Credentials in the URL are kept out of ``repr``."""

    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    discovered: bool = False

    @property
    def tls(self) -> bool:
        return self.scheme in ("tls", "wss")

    @property
    def url(self) -> str:
        """The URL without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.url


def parse_server_url(url: str, discovered: bool = False) -> ServerAddress:
    """Parse ``nats://[user:pass@]host[:port]``, ``tls://...`` or ``host:port``.

    Raises:
        ValueError: not a NATS URL.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"server URL must be a non-empty str, got {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "nats://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("nats", "tls"):
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {_redact(url)!r}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise ValueError(f"bad port in server URL {_redact(url)!r}") from exc
    host = parts.hostname or "127.0.0.1"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return ServerAddress(scheme, host, port, user, password, discovered)


def _redact(url: str) -> str:
    if "@" in url:
        scheme, _, rest = url.rpartition("://")
        return (scheme + "://" if scheme else "") + "***@" + rest.rpartition("@")[2]
    return url


def open_socket(addr: ServerAddress, deadline: Deadline) -> socket.socket:
    """Open a TCP connection with Nagle off (we coalesce writes ourselves)."""
    try:
        sock = socket.create_connection((addr.host, addr.port), timeout=deadline.remaining())
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {addr.url} timed out") from exc
    except OSError as exc:
        raise NatsConnectionError(f"cannot connect to {addr.url}: {exc.strerror or exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_events(sock: socket.socket, parser: Parser, deadline: Deadline, what: str) -> list[Any]:
    """Block until the parser yields at least one event (handshake only)."""
    while True:
        remaining = deadline.remaining()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"timed out waiting for {what}")
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except builtins.TimeoutError as exc:
            raise TimeoutError(f"timed out waiting for {what}") from exc
        except ssl.SSLError as exc:
            raise NatsConnectionError(f"TLS error while waiting for {what}: {exc}") from exc
        except OSError as exc:
            raise NatsConnectionError(f"connection lost while waiting for {what}: {exc}") from exc
        if not data:
            raise NatsConnectionError(f"server closed the connection while we waited for {what}")
        events = parser.feed(data)
        if events:
            return events


def auth_error_for(text: str) -> ServerError | AuthorizationError:
    """Map a ``-ERR`` text seen during the handshake to an exception."""
    low = text.lower()
    if "authorization" in low or "authentication" in low or ("user" in low and "expired" in low):
        return AuthorizationError(f"server refused the connection: {text}")
    return ServerError(text)


@dataclass
class Handshake:
    """What a finished handshake left behind."""

    sock: socket.socket
    info: dict[str, Any]
    leftover: list[Any]


def handshake(
    sock: socket.socket,
    parser: Parser,
    addr: ServerAddress,
    connect_options: Any,
    deadline: Deadline,
) -> Handshake:
    """Run INFO -> [TLS] -> CONNECT + PING -> PONG.

    Args:
        connect_options: a callable ``(info, addr) -> (dict, ssl_context_or_None)``
            giving the CONNECT fields (it may sign the server's nonce) and the
            TLS context to upgrade with.

    Raises:
        AuthorizationError, SecureConnRequiredError, TimeoutError, NatsConnectionError.
    """
    pending: list[Any] = []
    while not pending:
        pending = read_events(sock, parser, deadline, "the server's INFO")
    first = pending.pop(0)
    if not isinstance(first, Info):
        raise ProtocolError(f"expected INFO from {addr.url}, got {first!r}")
    info = first.options
    options, tls_ctx = connect_options(info, addr)
    if tls_ctx is None and info.get("tls_required"):
        raise SecureConnRequiredError(f"{addr.url} requires TLS and TLS is turned off for this client")
    if tls_ctx is not None and not getattr(sock, "_natsjs_tls", False):
        sock = upgrade_tls(sock, tls_ctx, addr, deadline)
        try:
            return _finish_handshake(sock, parser, addr, options, info, pending, deadline)
        except BaseException:
            sock.close()  # the caller only knows the plain socket
            raise
    return _finish_handshake(sock, parser, addr, options, info, pending, deadline)


def _finish_handshake(
    sock: socket.socket,
    parser: Parser,
    addr: ServerAddress,
    options: dict[str, Any],
    info: dict[str, Any],
    pending: list[Any],
    deadline: Deadline,
) -> Handshake:
    try:
        sock.sendall(commands.connect(options) + commands.PING)
    except OSError as exc:
        raise NatsConnectionError(f"connection to {addr.url} lost during the handshake: {exc}") from exc
    while True:
        while not pending:
            pending = read_events(sock, parser, deadline, "the server's PONG")
        ev = pending.pop(0)
        if ev is PONG:
            return Handshake(sock, info, pending)
        if ev is OK:
            continue
        if ev is PING:
            sock.sendall(commands.PONG)
            continue
        if isinstance(ev, Info):
            info = {**info, **ev.options}
            continue
        if isinstance(ev, Err):
            raise auth_error_for(ev.text)
        raise ProtocolError(f"unexpected {ev!r} during the handshake")


def upgrade_tls(
    sock: socket.socket, ctx: ssl.SSLContext, addr: ServerAddress, deadline: Deadline
) -> socket.socket:
    """Wrap ``sock`` in TLS, checking the host name when the context asks for it."""
    sock.settimeout(deadline.remaining())
    try:
        tls = ctx.wrap_socket(sock, server_hostname=addr.host)
    except ssl.SSLCertVerificationError as exc:
        raise NatsConnectionError(f"TLS certificate of {addr.url} failed verification: {exc.verify_message}") from exc
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"TLS handshake with {addr.url} timed out") from exc
    except (ssl.SSLError, OSError) as exc:
        raise NatsConnectionError(f"TLS handshake with {addr.url} failed: {exc}") from exc
    tls._natsjs_tls = True  # type: ignore[attr-defined]
    return tls
