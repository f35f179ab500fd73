"""Connection options: validated once, before anything is opened."""

from __future__ import annotations

import inspect
import os
import ssl
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .._redact import split_server_urls
from .._timeout import check_seconds
from ..auth import Credentials
from ..errors import InvalidCallbackTypeError
from .dial import DIRECT, Network, SocksProxy
from .dial import Dialer as Dialer
from .pool import PoolEntry, ServerAddress, parse_server_url

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]
ServerChooser = Callable[[list[PoolEntry], dict[str, Any]], tuple[PoolEntry | None, float]]

DEFAULT_SERVER = "nats://127.0.0.1:4222"
DEFAULT_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_PENDING_BYTES_LIMIT = 128 * 1024 * 1024
#: A pending limit meaning "no limit".
UNLIMITED = 1 << 62

_EVENT_CALLBACKS = ("error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "discovered_server_cb",
                    "lame_duck_mode_cb")


def check_callback(cb: object, what: str = "cb") -> None:
    """Refuse what cannot be a callback, before anything is sent.

    Args:
        cb: the callback, or ``None`` for none.
        what: the argument's name, for the message.

    Raises:
        InvalidCallbackTypeError: not callable, or an ``async def`` function (it would never
            run). nats-py's class for a bad callback; also a :class:`TypeError`, so code
            catching that still does.
    """
    if cb is None:
        return
    if not callable(cb):
        raise InvalidCallbackTypeError(f"{what} must be callable, not {type(cb).__name__}")
    call = type(cb).__call__ if not inspect.isroutine(cb) else cb  # an object with an async __call__ too
    if inspect.iscoroutinefunction(cb) or inspect.iscoroutinefunction(call):
        raise InvalidCallbackTypeError(f"{what} is an async function; natsjs_sync calls callbacks on a thread: "
                        "pass a plain function (drop 'async' and the 'await's)")


def pending_limit(value: int | None, default: int, what: str) -> int:
    """A slow-consumer limit: ``None`` takes the default, ``<= 0`` means no limit (as nats-py's -1)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return UNLIMITED if value <= 0 else value


def server_items(servers: str | Iterable[str] | None) -> list[str]:
    """The server URLs ``connect()`` takes, one per item, before each is parsed.

    ``None`` is the ``NATS_URL`` environment variable, else the default server; a
    str holds comma-separated URLs (empty items are skipped: ``"a,"`` is one URL);
    any other iterable (a list, a tuple, a set, a generator) is read once.

    Raises:
        TypeError: neither a str nor an iterable of them (bytes are none: decode them).
        ValueError: no URL at all.
    """
    if servers is None:
        servers = os.environ.get("NATS_URL") or DEFAULT_SERVER
    if isinstance(servers, str):
        items: list[str] = [s.strip() for s in split_server_urls(servers) if s.strip()]  # a password may hold a ','
    elif isinstance(servers, Iterable) and not isinstance(servers, (bytes, bytearray, memoryview)):
        # bytes iterate as ints: each would be refused alone, together spelling out the URL's password
        items = list(servers)
    else:
        raise TypeError(f"servers must be a URL, comma-separated URLs or a list of them, not {type(servers).__name__}")
    if not items:
        raise ValueError("no server URL given")
    return items


def server_list(servers: str | Iterable[str] | None) -> list[ServerAddress]:
    """The parsed server URLs of ``connect()``'s ``servers`` (see :func:`server_items`).

    Raises:
        InvalidServerUrlError: a URL that is no NATS URL.
        TypeError, ValueError: see :func:`server_items`.
    """
    return [parse_server_url(s) for s in server_items(servers)]


_CREDENTIAL_KEYS = ("user", "password", "token", "nkeys_seed", "user_credentials", "user_jwt_cb", "signature_cb",
                    "token_cb", "user_info_cb")
_CREDENTIAL_CALLBACKS = ("user_jwt_cb", "signature_cb", "token_cb", "user_info_cb")
#: Options that are text sent or used as it is (a number there fails later, on the wire or in the TLS handshake).
_TEXTS = ("name", "tls_hostname")
#: int options and their smallest value.
_COUNTS = {"pending_size": 0, "max_reconnect_attempts": None, "max_outstanding_pings": 1, "max_callback_threads": 1}
_FINITE_SECONDS = ("connect_timeout", "reconnect_time_wait", "reconnect_jitter", "reconnect_jitter_tls",
                   "ping_interval")
_SECONDS_OR_NONE = ("write_timeout", "drain_timeout")


def _check_counts(kwargs: dict[str, Any]) -> None:
    for key, least in _COUNTS.items():
        value = kwargs.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key} must be an int, not {type(value).__name__}")
        if least is not None and value < least:
            raise ValueError(f"{key} must be >= {least}, got {value}")


def finite_seconds(value: object, what: str) -> float:
    """A duration that must end: a number of seconds, 0 or more, neither ``None`` nor infinite.

    Raises:
        TypeError: not a number.
        ValueError: negative, NaN, infinite or ``None``.
    """
    seconds = check_seconds(value, what)
    if seconds is None:
        raise ValueError(f"{what} must be a finite number of seconds")
    return seconds


def _check_durations(kwargs: dict[str, Any]) -> None:
    for key in _FINITE_SECONDS:
        if key in kwargs:
            kwargs[key] = finite_seconds(kwargs[key], key)
    if kwargs.get("connect_timeout") == 0:  # no server could ever be reached
        raise ValueError("connect_timeout must be above 0 seconds (with 0 no connect can succeed)")
    for key in _SECONDS_OR_NONE:
        if key in kwargs:
            kwargs[key] = check_seconds(kwargs[key], key)


@dataclass
class ConnectOptions:
    """Everything :func:`natsjs_sync.connect` was given, checked."""

    servers: list[ServerAddress]
    name: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    tls: ssl.SSLContext | bool | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    #: Whether a ``tls://`` URL requires TLS (as in nats.go). Not a keyword of ``connect()``:
    #: nats-py's two-step ``NATS().connect()`` without ``tls=`` turns it off, where a ``tls://``
    #: URL asks for TLS no more than ``nats://`` does (when the server's INFO requires it).
    tls_url_requires_tls: bool = True
    connect_timeout: float = 2.0
    allow_reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_time_wait: float = 2.0
    reconnect_jitter: float = 0.1
    reconnect_jitter_tls: float = 1.0
    retry_on_failed_connect: bool = False
    no_randomize: bool = False
    pending_size: int = 2 * 1024 * 1024
    ping_interval: float = 120.0
    max_outstanding_pings: int = 2
    write_timeout: float | None = 60.0
    no_echo: bool = False
    #: A requester reads its own reply while nobody else reads (see :mod:`.reader`).
    requester_reads: bool = True
    verbose: bool = False
    pedantic: bool = False
    inbox_prefix: str = "_INBOX"
    drain_timeout: float | None = 30.0
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT
    max_callback_threads: int = 64
    error_cb: ErrorCallback | None = None
    disconnected_cb: EventCallback | None = None
    reconnected_cb: EventCallback | None = None
    closed_cb: EventCallback | None = None
    discovered_server_cb: EventCallback | None = None
    lame_duck_mode_cb: EventCallback | None = None
    #: nats-py's ``reconnect_to_server_handler`` (adapted by :mod:`natsjs_sync.aio.client`):
    #: given the pool's servers and the last INFO, the server to reconnect to (``None``: the
    #: first) and the seconds to wait first, instead of the pool's own order and back-off.
    choose_server: ServerChooser | None = None
    #: Extra headers of the WebSocket upgrade request (nats-py's ``ws_connection_headers``);
    #: left out of ``repr``: they may carry credentials (an ``Authorization`` header).
    ws_headers: dict[str, str] | None = field(default=None, repr=False)
    #: Returns a connected socket given (host, port, seconds left); instead of a TCP connect.
    custom_dialer: Dialer | None = None
    #: ``socks5://[user:password@]host:port``; left out of ``repr``: it may hold a password.
    socks_proxy: str | None = field(default=None, repr=False)
    #: The local address connections are made from: a host, or (host, port).
    source_address: str | tuple[str, int] | None = None
    #: Keep to the given servers: those a server announces are not added to the pool.
    ignore_discovered_servers: bool = False
    #: Offer permessage-deflate on ``ws://``/``wss://`` connections.
    ws_compression: bool = False
    #: The path of the WebSocket upgrade request (a proxy's), instead of the URL's.
    ws_proxy_path: str | None = None
    #: The JetStream domain and API prefix of a NATS context: the defaults of ``nc.jetstream()``.
    jetstream_domain: str | None = None
    jetstream_api_prefix: str | None = None

    @property
    def network(self) -> Network:
        """How sockets to the servers are made (see :mod:`natsjs_sync._core.dial`)."""
        if (self.custom_dialer is None and self.socks_proxy is None and self.source_address is None
                and not self.ws_compression and self.ws_proxy_path is None):
            return DIRECT
        return Network(
            dialer=self.custom_dialer,
            socks_proxy=SocksProxy.parse(self.socks_proxy) if self.socks_proxy is not None else None,
            source_address=_source_address(self.source_address),
            ws_compression=self.ws_compression,
            ws_proxy_path=_proxy_path(self.ws_proxy_path),
            client_name=self.name or "",
        )

    @property
    def uses_tls(self) -> bool:
        return self.tls not in (None, False) or any(s.tls for s in self.servers)

    @classmethod
    def build(cls, servers: str | Iterable[str] | None, **kwargs: Any) -> ConnectOptions:
        """Validate :func:`~natsjs_sync.connect`'s arguments.

        Raises:
            TypeError, ValueError: naming the argument.
            ContextError: the ``context`` argument names a context that cannot be
                used (naming the context and the field), before anything is opened.
        """
        unknown = sorted(set(kwargs) - _KEYWORDS)
        if unknown:
            raise TypeError(f"connect() got an unexpected keyword argument {unknown[0]!r}")
        context = kwargs.pop("context", None)
        if context is not None:
            servers = cls._apply_context(context, servers, kwargs)
        credentials = _credentials(kwargs)
        for key in _TEXTS:
            text = kwargs.get(key)
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{key} must be a str, not {type(text).__name__}")
        inbox_prefix = kwargs.get("inbox_prefix", "_INBOX")
        if not isinstance(inbox_prefix, str) or not inbox_prefix or " " in inbox_prefix:
            raise ValueError("inbox_prefix must be a non-empty str without spaces")
        tls = kwargs.get("tls")
        if tls is not None and not isinstance(tls, (bool, ssl.SSLContext)):
            raise TypeError(f"tls must be an ssl.SSLContext or a bool, not {type(tls).__name__}")
        _check_counts(kwargs)
        _check_durations(kwargs)
        for key in _EVENT_CALLBACKS:
            check_callback(kwargs.get(key), key)
        if kwargs.get("choose_server") is not None and not callable(kwargs["choose_server"]):
            raise TypeError("reconnect_to_server_handler must be callable")
        _check_network(kwargs)
        for key, default in (("pending_msgs_limit", DEFAULT_PENDING_MSGS_LIMIT),
                             ("pending_bytes_limit", DEFAULT_PENDING_BYTES_LIMIT)):
            if key in kwargs:
                kwargs[key] = pending_limit(kwargs[key], default, key)
        return cls(servers=server_list(servers), credentials=credentials, **kwargs)

    @classmethod
    def _apply_context(cls, name: str, servers: str | Iterable[str] | None, kwargs: dict[str, Any]) -> (
            str | Iterable[str] | None):
        """Fill ``kwargs`` from the NATS context ``name``; returns the servers to use.

        Explicit arguments win. An argument still at its default counts as not
        given (so ``inbox_prefix="_INBOX"`` does not override a context's prefix).
        Credentials go as a group: one explicit credential argument and none of
        the context's are used, so a context's token never joins an explicit user.
        """
        if not isinstance(name, str):
            raise TypeError(f"context must be a str, not {type(name).__name__}")
        from ..natscontext import load

        settings = load(name).connect_options()
        context_servers = settings.pop("servers", None)
        explicit_credentials = any(kwargs.get(key) is not None for key in _CREDENTIAL_KEYS)
        defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
        for key, value in settings.items():
            if key in _CREDENTIAL_KEYS:
                if not explicit_credentials:
                    kwargs[key] = value
            elif kwargs.get(key, defaults.get(key)) == defaults.get(key):
                kwargs[key] = value
        return servers if servers is not None else context_servers


def _source_address(value: object) -> tuple[str, int] | None:
    """``source_address`` as :func:`socket.create_connection` takes it: ``(host, port)``.

    Raises:
        TypeError, ValueError: naming the option.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = (value, 0)
    if (not isinstance(value, tuple) or len(value) != 2 or not isinstance(value[0], str)
            or isinstance(value[1], bool) or not isinstance(value[1], int)):
        raise TypeError(f"source_address must be a host (str) or a (host, port) tuple, not {value!r}")
    if not 0 <= value[1] < 65536:
        raise ValueError(f"source_address's port must be 0 to 65535, got {value[1]}")
    return (value[0], value[1])


def _proxy_path(value: object) -> str | None:
    """``ws_proxy_path`` with its leading ``/`` (added when missing, as nats.go does).

    Raises:
        TypeError, ValueError: naming the option.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"ws_proxy_path must be a str, not {type(value).__name__}")
    if not value or any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in value):
        raise ValueError("ws_proxy_path must be a non-empty path without spaces or control characters")
    return value if value.startswith("/") else "/" + value


def _check_network(kwargs: dict[str, Any]) -> None:
    """The proxy, dialer, local address and WebSocket options, before anything is opened.

    Raises:
        TypeError, ValueError, InvalidCallbackTypeError: naming the option.
    """
    for key in ("ignore_discovered_servers", "ws_compression"):
        if key in kwargs and not isinstance(kwargs[key], bool):
            raise TypeError(f"{key} must be a bool, not {type(kwargs[key]).__name__}")
    dialer = kwargs.get("custom_dialer")
    check_callback(dialer, "custom_dialer")
    if kwargs.get("socks_proxy") is not None:
        SocksProxy.parse(kwargs["socks_proxy"])
    _source_address(kwargs.get("source_address"))
    _proxy_path(kwargs.get("ws_proxy_path"))
    if dialer is not None and kwargs.get("socks_proxy") is not None:
        raise ValueError("give custom_dialer or socks_proxy, not both: the dialer makes the whole connection")
    if dialer is not None and kwargs.get("source_address") is not None:
        raise ValueError("give custom_dialer or source_address, not both: the dialer binds its own socket")


def _credentials(kwargs: dict[str, Any]) -> Credentials:
    """Take the credential keywords out of ``kwargs``, checked (files read, callbacks callable).

    Raises:
        TypeError: a credential of the wrong type (never its value).
        AuthorizationError: a seed or credentials file that cannot be used.
        InvalidCallbackTypeError: a credential callback that is not a plain callable.
    """
    token = kwargs.get("token")
    if callable(token):  # nats-py accepts a callable token
        kwargs["token"] = None
        kwargs["token_cb"] = kwargs.get("token_cb") or token
    for key in _CREDENTIAL_CALLBACKS:
        check_callback(kwargs.get(key), key)
    credentials = Credentials(**{k: kwargs.pop(k, None) for k in _CREDENTIAL_KEYS})
    credentials.validate()
    return credentials


#: Every keyword :meth:`ConnectOptions.build` takes: its fields, the credentials, ``context``.
_KEYWORDS = frozenset({f.name for f in fields(ConnectOptions)} - {"servers", "credentials", "tls_url_requires_tls"}
                      | set(_CREDENTIAL_KEYS) | {"context"})
