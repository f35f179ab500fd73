"""nats-py's ``nats.aio.client``: :class:`Client` (imported as ``NATS``) with the two-step
``nc = NATS()`` then ``nc.connect(...)``.

:func:`natsjs_sync.connect` returns one of these too, so a program written
either way gets the same object: the native :class:`natsjs_sync.Client` plus
nats-py's names (``jsm()``, ``connected_server_version``, ``client_ip``,
``force_reconnect()``, the status constants, URLs that answer ``.hostname`` and
``.port``). Thread-safe, as the native client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import threading
from collections import UserString
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import ParseResult, urlparse

from .._core import spi
from .._core.connection import Connection
from .._core.options import ConnectOptions
from .._core.pool import PoolEntry, ServerAddress, check_one_transport
from .._timeout import Deadline, TimeoutArg
from .._version import __version__
from ..auth import jwt_and_seed_files, parse_creds
from ..client import Client as _NativeClient
from ..errors import NatsConnectionError, NatsError, NoRespondersError
from ..msg import Msg
from ..protocol.connection import ConnState
from ..protocol.headers import HeadersInput
from ..protocol.jetstream.status import is_no_responders
from ..subscription import MsgHandler, Subscription
from .subscription import DEFAULT_SUB_PENDING_BYTES_LIMIT, DEFAULT_SUB_PENDING_MSGS_LIMIT

if TYPE_CHECKING:
    from ..jetstream import JetStream

__all__ = ["DEFAULT_SUB_PENDING_BYTES_LIMIT", "DEFAULT_SUB_PENDING_MSGS_LIMIT", "NATS", "URL", "Client",
           "Credentials", "RawCredentials", "ReconnectToServerHandler", "Server", "ServerVersion", "__version__",
           "translate_options"]

DEFAULT_PENDING_SIZE = 2 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = 2
DEFAULT_RECONNECT_TIME_WAIT = 2
DEFAULT_MAX_RECONNECT_ATTEMPTS = 60
DEFAULT_PING_INTERVAL = 120
DEFAULT_MAX_OUTSTANDING_PINGS = 2
DEFAULT_MAX_PAYLOAD_SIZE = 1048576
DEFAULT_DRAIN_TIMEOUT = 30
DEFAULT_INBOX_PREFIX = b"_INBOX"
DEFAULT_FLUSH_TIMEOUT = 10
DEFAULT_MAX_FLUSHER_QUEUE_SIZE = 1024


class URL(str):
    """A server URL: a ``str`` that also answers :class:`urllib.parse.ParseResult`'s
    attributes (``scheme``, ``netloc``, ``hostname``, ``port``, ``username``, ``path``),
    as nats-py's ``connected_url`` and ``servers`` do."""

    @property
    def _parsed(self) -> ParseResult:
        return urlparse(str(self))

    @property
    def scheme(self) -> str:
        return self._parsed.scheme

    @property
    def netloc(self) -> str:
        return self._parsed.netloc

    @property
    def hostname(self) -> str | None:
        return self._parsed.hostname

    @property
    def port(self) -> int | None:
        return self._parsed.port

    @property
    def username(self) -> str | None:
        return self._parsed.username

    @property
    def password(self) -> str | None:
        return self._parsed.password

    @property
    def path(self) -> str:
        return self._parsed.path

    def geturl(self) -> str:
        return str(self)


class RawCredentials(UserString):
    """The content of a ``.creds`` file, given as ``user_credentials=`` instead of its path
    (nats-py's class: a :class:`collections.UserString`)."""


#: What nats-py's ``user_credentials=`` takes: a ``.creds`` file's path, its content as
#: :class:`RawCredentials`, or a ``(jwt_file, nkey_seed_file)`` pair of paths.
Credentials = str | tuple[str, str] | RawCredentials | os.PathLike[str]


@dataclass
class Server:
    """A server of the pool as nats-py's ``reconnect_to_server_handler`` sees it."""

    uri: ParseResult
    reconnects: int = 0


#: nats-py's type of the handler: the pool's servers and the last INFO in, the
#: server to reconnect to (``None``: the first) and the seconds to wait first out.
ReconnectToServerHandler = Callable[[list[Server], dict[str, Any]], tuple[Server | None, float]]


#: Semantic versioning 2.0.0's own expression (semver.org), as nats-py parses a version.
_SEMVER = re.compile(
    r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<prerelease>(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+(?P<build>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


class ServerVersion:
    """The connected server's version (``nc.connected_server_version``), as nats-py gives it.

    The string is parsed when a part is first read: one that is no semantic version
    raises ValueError then (``'<version> is not a valid Semantic Version'``).
    ``dev`` is the pre-release, with the build metadata after a ``+`` when there is some.
    """

    def __init__(self, server_version: str):
        self._version = server_version
        self._parsed: tuple[int, int, int, str, str] | None = None

    def _parts(self) -> tuple[int, int, int, str, str]:
        if self._parsed is None:
            m = _SEMVER.match(self._version)
            if m is None:
                raise ValueError(f"{self._version} is not a valid Semantic Version")
            self._parsed = (int(m["major"]), int(m["minor"]), int(m["patch"]), m["prerelease"] or "", m["build"] or "")
        return self._parsed

    @property
    def major(self) -> int:
        return self._parts()[0]

    @property
    def minor(self) -> int:
        return self._parts()[1]

    @property
    def patch(self) -> int:
        return self._parts()[2]

    @property
    def prerelease(self) -> str:
        return self._parts()[3]

    @property
    def build(self) -> str:
        return self._parts()[4]

    @property
    def dev(self) -> str:
        _, _, _, pre, build = self._parts()
        return f"{pre}+{build}" if build else pre

    def __repr__(self) -> str:  # also its str(), as in nats-py
        return f"<nats server v{self._version}>"


#: What a handler's choice outside the pool maps to: the reconnect loop reports
#: ServerNotInPoolError and takes the pool's first server, as nats-py does.
_NOT_IN_POOL = PoolEntry(ServerAddress("nats", "not-in-pool", 0))


def _credential_cb(user: Any, password: Any) -> Callable[[], tuple[str, str]]:
    def user_info() -> tuple[str, str]:
        return (user() if callable(user) else user or "", password() if callable(password) else password or "")

    return user_info


def translate_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """nats-py's ``connect()`` keywords -> the native ones (in place; returns ``kwargs``).

    Raises:
        TypeError: a keyword neither client knows.
        ValueError: an option this client cannot honour (named in the message).
    """
    if "dont_randomize" in kwargs:
        kwargs["no_randomize"] = bool(kwargs.pop("dont_randomize"))
    # The flusher queue and the forced-flush wait bound nats-py's asyncio writer;
    # here the write buffer is bounded by pending_size and writes by write_timeout.
    kwargs.pop("flusher_queue_size", None)
    flush_timeout = kwargs.pop("flush_timeout", None)
    if flush_timeout is not None and "write_timeout" not in kwargs:
        kwargs["write_timeout"] = flush_timeout
    creds = kwargs.get("user_credentials")
    if isinstance(creds, UserString):  # RawCredentials: the file's content, never a path
        parse_creds(creds.data)  # content without a JWT and seed: InvalidUserCredentialsError, not "no such file"
        kwargs["user_credentials"] = creds.data
    elif isinstance(creds, tuple):
        if len(creds) != 2:
            raise TypeError("user_credentials as a tuple is (jwt_file, nkey_seed_file)")
        del kwargs["user_credentials"]
        kwargs["user_jwt_cb"], kwargs["signature_cb"] = jwt_and_seed_files(*creds)
    seed = kwargs.pop("nkeys_seed_str", None)
    if seed is not None:
        kwargs["nkeys_seed"] = seed
    prefix = kwargs.get("inbox_prefix")
    if isinstance(prefix, (bytes, bytearray)):
        kwargs["inbox_prefix"] = bytes(prefix).decode()
    if callable(kwargs.get("user")) or callable(kwargs.get("password")):
        kwargs["user_info_cb"] = _credential_cb(kwargs.pop("user", None), kwargs.pop("password", None))
    ws_headers = kwargs.pop("ws_connection_headers", None)
    if ws_headers:
        kwargs["ws_headers"] = _ws_headers(ws_headers)
    if kwargs.pop("skip_subject_validation", False):
        raise ValueError("skip_subject_validation is not supported: natsjs_sync always checks subjects")
    handler = kwargs.pop("reconnect_to_server_handler", None)
    if handler is not None:
        if not callable(handler):
            raise TypeError("reconnect_to_server_handler must be callable")
        kwargs["choose_server"] = _server_chooser(handler)
    return kwargs


def _ws_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """nats-py's ``{name: [values]}`` (or ``{name: value}``) -> one line per name."""
    out = {}
    for name, value in headers.items():
        values = [value] if isinstance(value, str) else list(value)
        if not isinstance(name, str) or not all(isinstance(v, str) for v in values):
            raise TypeError("ws_connection_headers maps str names to a str or a list of str")
        out[name] = ", ".join(values)
    return out


def _server_chooser(handler: ReconnectToServerHandler) -> Callable[[list[PoolEntry], dict[str, Any]],
                                                                    tuple[PoolEntry | None, float]]:
    """nats-py's reconnect handler, on the reconnect loop's terms: it sees :class:`Server`
    objects (``uri``, ``reconnects``) and picks one by its host and port."""

    def choose(entries: list[PoolEntry], info: dict[str, Any]) -> tuple[PoolEntry | None, float]:
        servers = [Server(uri=urlparse(e.addr.url), reconnects=e.failed_attempts) for e in entries]
        selected, delay = handler(servers, info)
        if selected is None:
            return None, delay
        for entry, server in zip(entries, servers, strict=True):
            if server.uri.netloc == selected.uri.netloc:
                return entry, delay
        return _NOT_IN_POOL, delay

    return choose


def _resolver(future: concurrent.futures.Future[Msg] | asyncio.Future[Msg]) -> Callable[[Msg], None]:
    """The callback that hands the first message to ``future`` (from a dispatcher thread)."""

    def settle(msg: Msg) -> None:
        if not future.done():
            future.set_result(msg)

    if isinstance(future, asyncio.Future):
        loop = future.get_loop()  # asyncio futures are not thread-safe: settle on their loop

        def resolve(msg: Msg) -> None:
            try:
                loop.call_soon_threadsafe(settle, msg)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more
    else:

        def resolve(msg: Msg) -> None:
            try:
                settle(msg)
            except concurrent.futures.InvalidStateError:
                pass  # cancelled (or set) meanwhile by another thread

    return resolve


class Client(_NativeClient):
    """nats-py's client class: ``nc = Client()`` then ``nc.connect(...)``.

    Before :meth:`connect` (and after a failed one) the object answers its
    properties (``is_connected`` is False, ``last_error`` tells why).
    """

    DISCONNECTED = 0
    CONNECTED = 1
    CLOSED = 2
    RECONNECTING = 3
    CONNECTING = 4
    DRAINING_SUBS = 5
    DRAINING_PUBS = 6

    def __init__(self, options: ConnectOptions | None = None):
        self._unstarted = options is None
        # A first connect that failed leaves the callbacks of a close owed (nats-py's
        # close() then calls disconnected_cb and closed_cb once).
        self._close_cbs_owed = False
        # Held while connect() checks the client may connect and puts the new core in place:
        # two threads connecting one client at once must not both make a core (one would
        # never be closed, its threads and socket left running).
        self._connect_lock = threading.Lock()
        super().__init__(options if options is not None else ConnectOptions.build("nats://127.0.0.1:4222"))

    def connect(self, servers: str | Sequence[str] | None = None, **options: Any) -> None:
        """Connect, with nats-py's arguments (``dont_randomize=``, ``flush_timeout=`` ...).

        A failed first connect is reported to ``error_cb`` and kept in
        :attr:`last_error` before it is raised. As in nats-py, the servers may
        not mix WebSocket and TCP URLs (:func:`natsjs_sync.connect` allows it).

        A ``tls://`` URL uses TLS when the server requires it, as in nats-py (as
        ``nats://`` does); :func:`natsjs_sync.connect` requires TLS for it. With
        ``tls=`` given, TLS is required here too (nats-py would go on in plain
        text with a server that does not offer it).

        A closed client (by :meth:`close`, a drain, or a failed connect) may
        connect again, as in nats-py: with the arguments of this call, as a new
        connection. Subscriptions and JetStream contexts of the closed one stay
        closed; make them again.

        Raises:
            NatsConnectionError: the client is connected (or connecting, reconnecting) already.
            NoServersError, AuthorizationError, SecureConnRequiredError: as :func:`natsjs_sync.connect`.
            InvalidServerUrlError: a bad server URL, or ``ws://``/``wss://`` mixed with
                ``nats://``/``tls://`` (a ValueError; nats-py's ``nats.errors.Error``).
            TypeError, ValueError: a bad argument.
        """
        from .._connect import connect_options

        with self._connect_lock:
            if not self.is_closed and not self._unstarted:
                raise NatsConnectionError("this client has connected already, or is connecting (close() it "
                                          "before connecting again)")
            opts = connect_options(servers, **options)
            check_one_transport(opts.servers)
            if opts.tls is None:
                # nats-py's connect(): tls:// alone uses TLS when the server requires it, as nats://
                # does. With tls= given, TLS stays required (nats-py would go on without it).
                opts.tls_url_requires_tls = False
            # A new core: the closed one ended its threads in close() and keeps its state
            # (counters, last error) for whoever still holds its subscriptions.
            self._conn = Connection(opts)
            self._outlet = self._conn.writer.outlet
            self._options = opts
            self.name = opts.name
            spi.register(self, self._conn)
            self._unstarted = False
            self._close_cbs_owed = False
        self._start()

    def _start(self, deadline: Deadline | None = None) -> None:
        """Connect the first time (within ``deadline`` as a whole, if given); a failure goes to
        ``error_cb`` and ``last_error`` first (nats-py)."""
        try:
            self._conn.start(deadline)
        except NatsError as exc:
            self._conn.last_error = exc
            self._close_cbs_owed = True
            if self._options.error_cb is not None:
                self._options.error_cb(exc)
            raise

    def close(self) -> None:
        """:meth:`natsjs_sync.Client.close`; after a failed first connect it calls
        ``disconnected_cb`` and then ``closed_cb`` once, on the caller's thread (the
        client's threads ended with the attempt), as nats-py's close() does."""
        if not self._close_cbs_owed:
            super().close()
            return
        self._close_cbs_owed = False
        for cb in (self._options.disconnected_cb, self._options.closed_cb):
            if cb is None:
                continue
            try:
                cb()
            except Exception as exc:  # a callback's bug goes to error_cb, as on the event thread
                if self._options.error_cb is not None:
                    self._options.error_cb(exc)

    # ------------------------------------------------------------------ nats-py's arguments

    def subscribe(  # nats-py's positional order: future and max_msgs follow cb
        self,
        subject: str,
        queue: str | None = None,
        cb: MsgHandler | None = None,
        future: concurrent.futures.Future[Msg] | asyncio.Future[Msg] | None = None,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """:meth:`natsjs_sync.Client.subscribe`, with nats-py's ``future=``.

        Args:
            future: the first message sets its result (a later one, or one after the
                future was cancelled, is dropped), as nats-py does; ``cb`` is then
                not called. A :class:`concurrent.futures.Future`, or an
                :class:`asyncio.Future` (set on its own loop's thread).

        Raises:
            BadSubjectError, InvalidCallbackTypeError, ConnectionClosedError: as the native ``subscribe``.
        """
        if future is not None:
            cb = _resolver(future)
        return super().subscribe(subject, queue, cb, max_msgs=max_msgs or None,
                                 pending_msgs_limit=pending_msgs_limit, pending_bytes_limit=pending_bytes_limit)

    def request(  # type: ignore[override]  # nats-py's positional order: old_style before headers
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        timeout: TimeoutArg = 1.0,
        old_style: bool | HeadersInput | None = False,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """:meth:`natsjs_sync.Client.request`, with nats-py's ``old_style=``.

        Args:
            old_style: wait for the reply on a subscription of its own to a fresh
                inbox (limited to one message) instead of the shared response
                inbox, as nats-py's ``old_style=True``. A mapping in this place is
                taken as ``headers`` (the native positional order).

        Raises:
            NoRespondersError, TimeoutError, ConnectionClosedError: as the native ``request``.
        """
        if not isinstance(old_style, bool):  # request(subject, payload, timeout, headers)
            headers, old_style = old_style, False
        if not old_style:
            # Through the native Client.request, not around it: what wraps that method (the
            # OpenTelemetry instrumentation, a subclass's override) must see this request too.
            return super().request(subject, payload, timeout, headers)
        inbox = self.new_inbox()
        sub = super().subscribe(inbox, max_msgs=1)
        try:
            self.publish(subject, payload, reply=inbox, headers=headers)
            msg = sub.next_msg(timeout)
        finally:
            if sub.is_valid:
                sub.unsubscribe()
        if is_no_responders(msg.raw_headers, msg.data):
            raise NoRespondersError(f"no responders on {subject!r}")
        return msg

    # ------------------------------------------------------------------ nats-py's names

    @property
    def is_closed(self) -> bool:
        return not self._unstarted and super().is_closed

    @property
    def is_connecting(self) -> bool:
        return not self._unstarted and self._conn.state is ConnState.CONNECTING and not self.is_connected

    @property
    def is_draining_pubs(self) -> bool:
        return self._conn.state is ConnState.DRAINING_PUBS

    @property
    def connected_url(self) -> URL | None:
        url = super().connected_url
        return URL(url) if url is not None else None

    @property
    def servers(self) -> list[URL]:  # type: ignore[override]
        return [URL(u) for u in super().servers]

    @property
    def server_pool(self) -> list[Server]:
        """A copy of the server pool: each server's URL and failed attempts in a row (nats-py)."""
        return [Server(uri=urlparse(e.addr.url), reconnects=e.failed_attempts) for e in self._conn.pool.candidates()]

    @property
    def discovered_servers(self) -> list[URL]:  # type: ignore[override]
        return [URL(u) for u in super().discovered_servers]

    @property
    def connected_server_version(self) -> ServerVersion:
        """The version of the server we are connected to (``0.0.0-unknown`` before
        any server answered, as in nats-py)."""
        return ServerVersion(str(self._conn.info.get("version") or "0.0.0-unknown"))

    @property
    def client_ip(self) -> str | None:
        """Our address as the server sees it (``None`` once closed, as in nats-py)."""
        return None if self.is_closed else self._conn.info.get("client_ip")

    @property
    def client_id(self) -> int | None:
        """The id the server gave this connection (``None`` once closed, as in nats-py)."""
        return None if self.is_closed else super().client_id

    @property
    def options(self) -> dict[str, Any]:
        """The connect options in force, by name."""
        return dict(vars(self._options))

    def force_reconnect(self) -> None:
        """Drop the connection and reconnect (to the next server of the pool)."""
        conn = self._conn
        transport = conn.transport
        if transport is None or not conn.options.allow_reconnect or self.is_closed:
            return
        exc = NatsConnectionError("reconnect forced by the client")
        exc.forced = True  # type: ignore[attr-defined]  # not reported to error_cb, as in nats-py
        conn.connection_lost(exc, transport)

    def jetstream(self, domain: str | None = None, api_prefix: str = "$JS.API", timeout: float = 5.0,
                  publish_async_max_pending: int = 4000, publish_async_stall_wait: float = 5.0,
                  publish_async_timeout: float | None = None,
                  publish_async_error_cb: Callable[[Msg, Exception], object] | None = None,
                  prefix: str | None = None) -> JetStream:
        """A JetStream context (``prefix=`` is nats-py's name for ``api_prefix=``)."""
        return super().jetstream(domain=domain, api_prefix=prefix or api_prefix, timeout=timeout,
                                 publish_async_max_pending=publish_async_max_pending,
                                 publish_async_stall_wait=publish_async_stall_wait,
                                 publish_async_timeout=publish_async_timeout,
                                 publish_async_error_cb=publish_async_error_cb)

    def jsm(self, **opts: Any) -> JetStream:
        """nats-py's JetStream manager: the same context as :meth:`jetstream`."""
        return self.jetstream(**opts)


#: nats-py's other name for the client class (``from nats.aio.client import Client as NATS``).
NATS = Client
