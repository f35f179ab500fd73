"""Opening one server: transport, TLS policy, and the handshake driven to its end.

Nothing is shared until :func:`open_server` returns: the caller attaches the
result to the connection in one step.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._timeout import Deadline
from .._version import __version__
from ..errors import NatsError, SecureConnRequiredError, connect_error
from ..protocol.connection import Established, Handshake
from ..protocol.parser import Parser
from .logs import handshake_fields
from .options import ConnectOptions
from .pool import ServerAddress
from .transport import TcpTransport, Transport, WebSocketTransport

log = logging.getLogger("natsjs_sync.connection")
#: CONNECT fields never logged.
_SECRET_FIELDS = frozenset({"pass", "auth_token", "sig", "jwt", "nkey"})


@dataclass
class Opened:
    """A handshaken connection to one server, not yet attached."""

    transport: Transport
    parser: Parser
    info: dict[str, Any]
    leftover: list[Any]


class TlsPolicy:
    """Which TLS context (if any) a server gets, from the options and the server's INFO."""

    def __init__(self, options: ConnectOptions):
        self._options = options
        self._default: ssl.SSLContext | None = None

    def context(self, addr: ServerAddress, info: dict[str, Any] | None) -> ssl.SSLContext | None:
        """Raises SecureConnRequiredError when TLS is wanted but turned off."""
        tls = self._options.tls
        # wss:// is TLS under the WebSocket in every case; tls:// unless the options say
        # it asks for no more than nats:// (nats-py's two-step connect).
        by_url = addr.tls and (self._options.tls_url_requires_tls or addr.websocket)
        wants = by_url or (info is not None and bool(info.get("tls_required")))
        if tls is False:
            if wants:
                raise SecureConnRequiredError(f"{addr.url} requires TLS and this client was made with tls=False")
            return None
        if isinstance(tls, ssl.SSLContext):
            return tls
        if tls is True or wants:
            if self._default is None:
                self._default = ssl.create_default_context()
            return self._default
        return None


def connect_fields(options: ConnectOptions, info: dict[str, Any], addr: ServerAddress,
                   tls: bool) -> dict[str, Any]:
    """The CONNECT message's fields (credentials included, the server's nonce signed)."""
    fields: dict[str, Any] = {
        "verbose": options.verbose,
        "pedantic": options.pedantic,
        "tls_required": tls,
        "name": options.name,
        "lang": "python-sync",
        "version": __version__,
        "protocol": 1,
        "echo": not options.no_echo,
        "headers": True,
        "no_responders": True,
    }
    fields.update(options.credentials.connect_fields(info, addr.user, addr.password))
    return fields


#: Opens a transport to one server within a deadline, doing TLS first when
#: given a context (tests plug in an in-memory one). Arguments: the address, the
#: deadline, the TLS context or None, the TLS host name or None, and for a
#: WebSocket with extra upgrade headers, those headers.
TransportFactory = Callable[..., Any]


def open_transport(addr: ServerAddress, deadline: Deadline, tls_first: ssl.SSLContext | None,
                   hostname: str | None, ws_headers: dict[str, str] | None = None) -> TcpTransport:
    """The transport for ``addr``'s scheme: TCP, or a WebSocket for ``ws://``/``wss://``
    (with ``ws_headers`` added to its upgrade request)."""
    if addr.websocket:
        return WebSocketTransport.open_ws(addr, deadline, tls_first, hostname, ws_headers)
    transport = TcpTransport.open(addr, deadline)
    if tls_first is not None:
        try:
            transport.upgrade_tls(tls_first, hostname, deadline)
        except BaseException:
            transport.close()
            raise
    return transport


def open_server(addr: ServerAddress, options: ConnectOptions, tls: TlsPolicy,
                msg_factory: Callable[..., Any], factory: TransportFactory = open_transport,
                budget: Deadline | None = None) -> Opened:
    """Transport (+ TLS) + INFO -> CONNECT/PING -> PONG, all within ``connect_timeout``
    (and within ``budget``, the deadline of a whole first connect, when given).

    Every connect, first or reconnect, goes through here: a refused TCP connect
    or a failed TLS handshake leaves as the class that is also the builtin/ssl
    error nats-py lets through (:func:`~natsjs_sync.errors.connect_error`).

    Raises:
        TimeoutError, ConnectRefusedError, TlsHandshakeError, TlsCertificateError,
        NatsConnectionError, AuthorizationError, SecureConnRequiredError, ProtocolError.
    """
    try:
        return _open_server(addr, options, tls, msg_factory, factory, budget)
    except NatsError as exc:
        err = connect_error(exc)
        if err is exc:
            raise
        raise err from exc.__cause__


def _open_server(addr: ServerAddress, options: ConnectOptions, tls: TlsPolicy,
                 msg_factory: Callable[..., Any], factory: TransportFactory, budget: Deadline | None) -> Opened:
    deadline = Deadline(options.connect_timeout if budget is None else budget.min(options.connect_timeout))
    if options.tls_handshake_first:
        first = tls.context(addr, {"tls_required": True})
    elif addr.websocket:
        first = tls.context(addr, None)  # a WebSocket does TLS before its upgrade, or never
    else:
        first = None
    if addr.websocket and options.ws_headers:
        transport = factory(addr, deadline, first, options.tls_hostname, options.ws_headers)
    else:
        transport = factory(addr, deadline, first, options.tls_hostname)
    try:
        parser = Parser(msg_factory=msg_factory)
        hs = Handshake()
        info = None
        while info is None:
            got = hs.receive(parser.feed(transport.read_with_deadline(deadline, "the server's INFO")))
            info = got if isinstance(got, dict) else None
        ctx = tls.context(addr, info)
        if ctx is not None and not transport.is_tls:
            transport.upgrade_tls(ctx, options.tls_hostname, deadline)
        fields = connect_fields(options, info, addr, ctx is not None)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("CONNECT to %s with %s", addr, sorted(k for k in fields if k not in _SECRET_FIELDS),
                      extra=handshake_fields(options.name, addr, info))
        transport.write_with_deadline(hs.connect(fields), deadline)
        done = hs.resume()
        while not isinstance(done, Established):
            owed = hs.data_to_send()
            if owed:
                transport.write_with_deadline(owed, deadline)
            done = hs.receive(parser.feed(transport.read_with_deadline(deadline, "the server's PONG")))
        owed = hs.data_to_send()
        if owed:
            transport.write_with_deadline(owed, deadline)
    except BaseException:
        transport.close()
        raise
    return Opened(transport, parser, done.info, done.leftover)
