"""``connect()``: the one way to make a :class:`~natsjs_sync.Client`."""

from __future__ import annotations

import inspect
import os
import ssl
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._core.options import (
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    ConnectOptions,
    Dialer,
    ErrorCallback,
    EventCallback,
)
from ._timeout import Deadline
from .client import Client


def connect(
    servers: str | Sequence[str] | None = None,
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | Callable[[], str] | None = None,
    nkeys_seed: str | os.PathLike[str] | None = None,
    user_credentials: str | os.PathLike[str] | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[str], bytes | str] | None = None,
    token_cb: Callable[[], str] | None = None,
    user_info_cb: Callable[[], tuple[str, str]] | None = None,
    tls: ssl.SSLContext | bool | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    connect_timeout: float = 2.0,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_time_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_jitter_tls: float = 1.0,
    retry_on_failed_connect: bool = False,
    no_randomize: bool = False,
    pending_size: int = 2 * 1024 * 1024,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    write_timeout: float | None = 60.0,
    no_echo: bool = False,
    requester_reads: bool = True,
    verbose: bool = False,
    pedantic: bool = False,
    inbox_prefix: str = "_INBOX",
    drain_timeout: float | None = 30.0,
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    max_callback_threads: int = 64,
    error_cb: ErrorCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    closed_cb: EventCallback | None = None,
    discovered_server_cb: EventCallback | None = None,
    lame_duck_mode_cb: EventCallback | None = None,
    socks_proxy: str | None = None,
    custom_dialer: Dialer | None = None,
    source_address: str | tuple[str, int] | None = None,
    ignore_discovered_servers: bool = False,
    ws_compression: bool = False,
    ws_proxy_path: str | None = None,
    context: str | None = None,
    **nats_py_options: Any,
) -> Client:
    """Connect to a NATS server and return a :class:`Client`.

    The call returns once the first server accepted the connection (or, with
    ``retry_on_failed_connect``, at once). Use the client as a context manager,
    or call :meth:`Client.close` (or :meth:`Client.drain`) when done. Every
    callback runs on the client's dispatcher, never on the reader thread;
    connection callbacks run in order.

    Args:
        servers: a URL, a comma-separated list or a sequence of URLs
            (``nats://[user:pass@]host:port``, ``tls://host:port``); default: the
            ``NATS_URL`` environment variable, else ``nats://127.0.0.1:4222``.
        name: a client name shown in the server's monitoring and thread names.
        user: the user name (credentials in the URL win).
        password: the user's password.
        token: an authentication token, or a callable asked for one at every (re)connect.
        nkeys_seed: a user nkey seed (``SU...``) or the path of a file holding it
            (a str, or an :class:`os.PathLike` such as :class:`pathlib.Path`, always a file).
        user_credentials: the path of a ``.creds`` file (user JWT plus seed), a str or an
            :class:`os.PathLike`; read at every (re)connect.
        user_jwt_cb: dynamic JWT credentials: returns the user JWT at every (re)connect.
        signature_cb: with ``user_jwt_cb``: signs the server's nonce (bytes, or base64url text).
        token_cb: returns the token at every (re)connect.
        user_info_cb: returns ``(user, password)`` at every (re)connect.
        tls: ``True`` or an :class:`ssl.SSLContext` to use TLS; ``False`` to
            refuse it (SecureConnRequiredError when the server requires it);
            ``None`` uses TLS for ``tls://`` URLs and servers that require it.
        tls_hostname: the name the server's certificate is checked against
            (default: the host of its URL).
        tls_handshake_first: start with the TLS handshake, before the server's INFO.
        connect_timeout: seconds for TCP connect plus handshake, per server.
        allow_reconnect: reconnect when the connection breaks (else close).
        max_reconnect_attempts: failed attempts in a row before a server is
            dropped from the pool (negative: never). When every server is
            dropped the client closes: long-running services that must outlive
            any outage pass ``-1`` (see :doc:`web`).
        reconnect_time_wait: seconds between attempts on the same server.
        reconnect_jitter: up to this many seconds added at random to each wait.
        reconnect_jitter_tls: the same for TLS connections.
        retry_on_failed_connect: when no server answers the first time, return
            a client that keeps trying in the background under the reconnect
            settings (publishes wait in the buffer; requests and flush wait
            within their timeouts), instead of raising NoServersError.
        no_randomize: keep the server order instead of shuffling it.
        pending_size: bytes buffered while reconnecting; more raises
            OutboundBufferLimitError. While connected, a publish that takes the
            buffer past it (or past 1 MiB, whichever is less) sends the buffer
            before it returns, as nats-py's does.
        ping_interval: seconds between keep-alive PINGs (``0`` turns them off).
        max_outstanding_pings: unanswered PINGs after which the connection is stale.
        write_timeout: seconds a write may wait for a server that does not read
            (``None``: for ever); then the connection is lost and reconnects.
        no_echo: do not receive our own publishes.
        requester_reads: a thread waiting for a request's reply reads the socket
            itself while no other thread reads it, instead of being woken by the
            reader thread (plain TCP connections with the compiled extension and
            native threads; see :doc:`threads`, which says why it is on by default).
        verbose: ask the server to acknowledge every command with ``+OK``
            (the protocol's ``verbose`` option; for debugging with a protocol
            trace, it costs a reply per command; the client ignores the
            acknowledgements).
        pedantic: ask the server for strict checking of every command (the
            protocol's ``pedantic`` option; for debugging).
        inbox_prefix: prefix of reply inboxes.
        drain_timeout: default seconds for :meth:`Client.drain`.
        pending_msgs_limit: default slow-consumer limit of each subscription,
            in messages (``0`` or negative: no limit).
        pending_bytes_limit: the same in bytes.
        max_callback_threads: the most threads running callbacks at once.
        error_cb: called with asynchronous errors (server -ERR, slow consumers,
            lost connections, exceptions from subscription callbacks).
        disconnected_cb: called when the connection is lost.
        reconnected_cb: called when a connection is back.
        closed_cb: called once when the client is closed for good.
        discovered_server_cb: called when the server announces new cluster members.
        lame_duck_mode_cb: called when the server enters lame duck mode.
        socks_proxy: reach every server through this SOCKS5 proxy,
            ``socks5://[user:password@]host[:port]`` (port 1080 by default; the user
            name and password of RFC 1929, percent-encoded). The proxy resolves the
            servers' host names. ``connect_timeout`` covers the proxy's handshake.
        custom_dialer: makes the connections instead of a TCP connect: called as
            ``custom_dialer(host, port, timeout)`` (``timeout``: the seconds left of
            ``connect_timeout``, or ``None``), it returns a connected, blocking
            :class:`socket.socket`; what it raises fails that attempt (the next
            server is tried). TLS and the WebSocket upgrade still follow as the URL says.
            ``connect_timeout`` bounds the wait for it even when it ignores ``timeout``:
            it runs on a thread of its own (``natsjs-dialer-<name>``), and a call that
            has not returned in time fails the attempt with :class:`TimeoutError` and
            is left to finish (a warning is logged; a socket it returns later is
            closed). The next attempt to that server waits for that call rather than
            calling the dialer again.
        source_address: the local address connections are made from: a host
            (``"10.0.0.5"``), or ``(host, port)`` as :func:`socket.create_connection` takes it.
        ignore_discovered_servers: use only the servers given here: the cluster members
            a server announces are not added to the pool (nor is ``discovered_server_cb`` called).
        ws_compression: offer permessage-deflate on ``ws://``/``wss://`` connections;
            used when the server has WebSocket ``compression`` turned on.
        ws_proxy_path: the path of the WebSocket upgrade request instead of the URL's
            (a proxy in front of the server routing on it; ``/`` is added in front when missing).
        context: the name of a NATS context (the ``nats`` CLI's saved settings,
            see :doc:`contexts`), an absolute path of a context file, or ``""``
            for the one ``$NATS_CONTEXT`` names, else the one the nats CLI
            selected. It gives the servers, credentials, TLS files, TLS first,
            the inbox prefix and the JetStream domain and API prefix of
            ``nc.jetstream()``; arguments given here win over it (credentials as
            a group).

    Every callback runs on the client's dispatcher, never on the reader thread;
    connection callbacks run in order. nats-py's other keywords
    (``dont_randomize=``, ``flush_timeout=``, ``nkeys_seed_str=`` ...) are
    accepted too (see ``natsjs_sync.aio.client``).

    Returns:
        The connected client.

    Raises:
        NoServersError: no server could be reached (the causes are in the message).
        AuthorizationError: the server refused the credentials.
        ContextError: the context is unknown, names a missing file or has a
            setting this client cannot honour (before any connection is tried).
        SecureConnRequiredError: the server requires TLS and ``tls=False``.
        TypeError: an argument of the wrong type (named in the message).
        ValueError: an argument out of range (named in the message).
    """
    args = dict(locals())
    servers = args.pop("servers")
    options = args.pop("nats_py_options")
    # Only what the caller gave: nats-py's keywords then meet the native ones as given
    # (flush_timeout= stands in for write_timeout= only when that was not given).
    options.update((key, value) for key, value in args.items() if value is not _DEFAULTS[key])
    return open_client(connect_options(servers, **options))


#: The defaults of connect()'s keywords (those of ConnectOptions: a test holds them equal).
_DEFAULTS = {name: p.default for name, p in inspect.signature(connect).parameters.items()
             if p.kind is inspect.Parameter.KEYWORD_ONLY}


def connect_options(servers: str | Iterable[str] | None = None, **kwargs: Any) -> ConnectOptions:
    """What :func:`connect` makes of its arguments before it opens anything: the one place
    they are checked, so a web integration checking its settings at start-up applies
    exactly the rules ``connect()`` applies.

    Files named (``user_credentials``, ``nkeys_seed``, a ``context``) are read, as a
    connect reads them. What only a server can tell is left to the connect: whether a
    server answers, accepts the credentials, requires TLS, and passes the TLS handshake.

    Args:
        servers: as :func:`connect`'s.
        kwargs: :func:`connect`'s keywords (nats-py's too), those given only.

    Raises:
        TypeError, ValueError, ContextError, AuthorizationError, InvalidServerUrlError:
            as :func:`connect` raises them, with nothing opened.
    """
    from .aio.client import translate_options

    return ConnectOptions.build(servers, **translate_options(kwargs))


def open_client(options: ConnectOptions, deadline: Deadline | None = None) -> Client:
    """A client connected with checked ``options`` (see :func:`connect_options`).

    Args:
        options: what :func:`connect_options` made.
        deadline: a bound on the whole first connect: each server is tried within what is
            left of it (and its own ``connect_timeout``), and servers not reached by then
            are not tried (``None``: each server gets its ``connect_timeout``).

    Raises:
        NoServersError, AuthorizationError, SecureConnRequiredError: as :func:`connect`.
    """
    from .aio.client import Client as NatsPyClient

    client = NatsPyClient(options)
    client._start(deadline)
    return client
