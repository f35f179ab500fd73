"""One client per process, made on first use: what web apps and task workers share.

:class:`ProcessClient` holds the client of the current process. It connects
on the first call (never at import or at app set-up, so a pre-fork server's
master makes none unless something asks it to), keeps reconnecting for ever
(``max_reconnect_attempts=-1`` unless told otherwise), makes a new client when
the one it holds was closed, and closes its client when the process exits.
A client inherited through ``fork`` (gunicorn ``--preload``, a Celery or
multiprocessing pool) is kept: it drops the parent's connection in the child
and connects afresh on first use (see :mod:`natsjs_sync._core.fork`), so
gunicorn's ``post_fork`` and Celery's ``worker_process_init`` hooks are not
needed.

:func:`parse_settings` reads the one settings mapping both integrations take
(Flask's ``NATS_*`` keys, Django's ``NATS = {...}``) and reports every bad
setting at once, and :func:`error_status` is the one mapping from a NATS
failure to an HTTP answer.
"""

from __future__ import annotations

import atexit
import importlib
import inspect
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import natsjs_sync

from ..client import Client
from ..errors import (
    JetStreamError,
    NatsError,
    NoRespondersError,
    NoServersError,
    NotSentError,
    ServiceUnavailableError,
    TimeoutError,
)
from ..health import Health, check_health

__all__ = ["ProcessClient", "Settings", "SettingsError", "error_status", "import_callable", "parse_settings"]

OnConnect = Callable[[Client], object]

#: The keys of the settings mapping (Django's ``NATS``; Flask's ``NATS_<KEY>`` in upper case).
SETTINGS_KEYS = ("servers", "options", "on_connect", "health", "workers", "drain_timeout")
_SCHEMES = ("nats", "tls", "ws", "wss")
_CONNECT_OPTIONS = frozenset(
    name for name, p in inspect.signature(natsjs_sync.connect).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY)
_HEALTH_OPTIONS = frozenset(
    name for name, p in inspect.signature(check_health).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY)


class SettingsError(ValueError):
    """The settings are wrong; ``problems`` lists each mistake in words."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("bad NATS settings: " + "; ".join(self.problems))


@dataclass(frozen=True)
class Settings:
    """The validated settings of an integration. Immutable.

    Attributes:
        servers: server URLs; ``None``: ``NATS_URL`` from the environment, else
            ``nats://127.0.0.1:4222`` (the default of :func:`natsjs_sync.connect`).
        options: more keywords of :func:`natsjs_sync.connect`.
        on_connect: callables (or their dotted paths) run with each new client
            before it is handed out (declare streams there); if one raises,
            the client is closed and the error raised to the caller.
        health: keywords of :func:`natsjs_sync.health.check_health`.
        workers: dotted paths of callables taking the client, started by the
            Django ``nats_worker`` command.
        drain_timeout: seconds a worker's drain may take when it is told to stop.
    """

    servers: tuple[str, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    on_connect: tuple[str | OnConnect, ...] = ()
    health: Mapping[str, Any] = field(default_factory=dict)
    workers: tuple[str, ...] = ()
    drain_timeout: float = 30.0


def import_callable(spec: str | Callable[..., Any]) -> Callable[..., Any]:
    """The callable named by ``"package.module.attribute"`` (or ``"package.module:attribute"``).

    Args:
        spec: a dotted path, or a callable (returned as it is).

    Raises:
        ImportError: the module or attribute is not there.
        TypeError: what it names cannot be called.
    """
    if callable(spec):
        return spec
    module_name, sep, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module_name or not attr:
        raise ImportError(f"{spec!r} is not a dotted path 'module.attribute'")
    module = importlib.import_module(module_name)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise TypeError(f"{spec!r} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or callable(value):
        return (value,)
    return tuple(value)


def parse_settings(raw: Mapping[str, Any] | None, *, import_paths: bool = True) -> Settings:
    """Validate a settings mapping and return it as :class:`Settings`.

    Args:
        raw: the mapping (lower-case keys, see :data:`SETTINGS_KEYS`); ``None`` is all defaults.
        import_paths: also import every dotted path (``on_connect``, ``workers``)
            to check that it names a callable.

    Raises:
        SettingsError: every mistake found, each in ``problems``.
    """
    raw = {} if raw is None else raw
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise SettingsError([f"the settings are a dict, not a {type(raw).__name__}"])
    for key in raw:
        if key not in SETTINGS_KEYS:
            problems.append(f"unknown key {key!r} (known: {', '.join(SETTINGS_KEYS)})")

    servers: tuple[str, ...] | None = None
    if raw.get("servers") is not None:
        value = raw["servers"]
        items = [s.strip() for s in value.split(",")] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not items:
            problems.append(f"'servers' is a URL, a comma-separated string or a list of URLs, not {value!r}")
        else:
            for url in items:
                if not isinstance(url, str) or not url:
                    problems.append(f"'servers' holds {url!r}, not a URL")
                    continue
                scheme = urlsplit(url).scheme if "://" in url else "nats"
                if scheme not in _SCHEMES:
                    problems.append(f"server {url!r}: the scheme is one of {', '.join(_SCHEMES)}, not {scheme!r}")
            servers = tuple(str(s) for s in items)

    options = _keywords(raw, "options", "natsjs_sync.connect()", _CONNECT_OPTIONS, problems)
    health = _keywords(raw, "health", "check_health()", _HEALTH_OPTIONS, problems)

    drain_timeout = raw.get("drain_timeout", 30.0)
    if isinstance(drain_timeout, bool) or not isinstance(drain_timeout, (int, float)) or not drain_timeout > 0:
        problems.append(f"'drain_timeout' is a number of seconds above 0, not {drain_timeout!r}")
        drain_timeout = 30.0

    on_connect = _as_tuple(raw.get("on_connect"))
    workers = _as_tuple(raw.get("workers"))
    for key, specs in (("on_connect", on_connect), ("workers", workers)):
        for spec in specs:
            if callable(spec) and key == "on_connect":
                continue
            if not isinstance(spec, str):
                problems.append(f"{key!r} holds {spec!r}, not a dotted path 'module.attribute'")
            elif import_paths:
                try:
                    import_callable(spec)
                except (ImportError, TypeError) as exc:
                    problems.append(f"{key!r}: {spec!r} cannot be used: {exc}")
    if problems:
        raise SettingsError(problems)
    return Settings(servers=servers, options=dict(options), on_connect=on_connect, health=dict(health),
                    workers=workers, drain_timeout=float(drain_timeout))


def _keywords(raw: Mapping[str, Any], key: str, function: str, allowed: Collection[str],
              problems: list[str]) -> Mapping[str, Any]:
    """The setting ``key``: a dict of keywords of ``function`` (empty when unset or wrong;
    each problem is added to ``problems``)."""
    value = {} if raw.get(key) is None else raw[key]
    if not isinstance(value, Mapping):
        problems.append(f"{key!r} is a dict of {function} keywords, not {value!r}")
        return {}
    problems += [f"{key!r}: {function} takes no keyword {k!r}" for k in value if k not in allowed]
    return value


def error_status(exc: NatsError) -> tuple[int, str]:
    """The HTTP status and message that answer a request which failed with ``exc``.

    504 for a timeout, 503 when nobody answers a request or NATS cannot be
    reached (no server, connection lost or closed; also a request withdrawn
    unsent at its deadline, :class:`~natsjs_sync.errors.NotSentError`: nothing
    was done, a retry is safe), 502 for an error answer of JetStream (503 for
    its "unavailable" answer).

    Args:
        exc: what a NATS call raised.

    Returns:
        ``(status, message)``.
    """
    if isinstance(exc, NotSentError):
        return 503, f"NATS unavailable, nothing was sent: {exc}"
    if isinstance(exc, TimeoutError):
        return 504, f"timed out: {exc}"
    if isinstance(exc, NoRespondersError):
        return 503, f"service unavailable: {exc}"
    if isinstance(exc, ServiceUnavailableError):
        return 503, f"JetStream unavailable: {exc}"
    if isinstance(exc, JetStreamError):
        return 502, str(exc)
    return 503, f"NATS unavailable: {exc}"


class ProcessClient:
    """The one client of this process, made on first use and made again when closed. Thread-safe.

    Call it (``holder()``) for the client. The first call connects; later calls
    return the same client, connected or riding out an outage (it never stops
    reconnecting unless ``options`` say otherwise). A client that was closed
    (by hand, or refused by the server) is replaced on the next call. While no
    server can be reached, a call raises :class:`~natsjs_sync.NoServersError`;
    for ``retry_wait`` seconds after such a failure calls raise it again at
    once instead of each trying to connect.

    Args:
        servers: the server URLs (default: ``NATS_URL``, else ``nats://127.0.0.1:4222``).
        options: more keywords of :func:`natsjs_sync.connect` (``name``,
            credentials, ``connect_timeout`` ...).
        on_connect: callables (or dotted paths) run with each new client before
            it is handed out, e.g. to declare streams.
        health: keywords of :func:`~natsjs_sync.health.check_health` for :meth:`health`.
        retry_wait: seconds a failed connect is not tried again.
    """

    def __init__(self, servers: str | Sequence[str] | None = None, *, options: Mapping[str, Any] | None = None,
                 on_connect: Sequence[str | OnConnect] = (), health: Mapping[str, Any] | None = None,
                 retry_wait: float = 1.0):
        self._servers = servers if servers is None or isinstance(servers, str) else list(servers)
        self._options = {"max_reconnect_attempts": -1, **(options or {})}
        self._on_connect = list(on_connect)
        self._health = dict(health or {})
        self._retry_wait = retry_wait
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._failure: tuple[float, NatsError] | None = None
        self._exit_hook = False

    @classmethod
    def from_settings(cls, settings: Settings) -> ProcessClient:
        """A holder for validated :class:`Settings`."""
        return cls(settings.servers, options=settings.options, on_connect=settings.on_connect,
                   health=settings.health)

    def add_on_connect(self, fn: str | OnConnect) -> None:
        """Run ``fn(client)`` for each client made from now on."""
        with self._lock:
            self._on_connect.append(fn)

    @property
    def current(self) -> Client | None:
        """The client held now (``None`` before the first call), without connecting."""
        return self._client

    def __call__(self) -> Client:
        """The process's client, connecting it first if there is none or it was closed.

        Raises:
            NoServersError: no server could be reached (now, or less than
                ``retry_wait`` seconds ago).
            NatsError: another failure to connect, or what an ``on_connect`` callable raised.
        """
        nc = self._client
        if nc is not None and not nc.is_closed:
            return nc
        with self._lock:
            nc = self._client
            if nc is not None and not nc.is_closed:
                return nc
            if self._failure is not None:
                failed_at, failure = self._failure
                if time.monotonic() - failed_at < self._retry_wait:
                    raise NoServersError(f"NATS not reachable (tried {time.monotonic() - failed_at:.1f} s ago): "
                                         f"{failure}") from failure
            try:
                nc = self._connect()
            except NatsError as exc:
                self._failure = (time.monotonic(), exc)
                raise
            self._failure = None
            self._client = nc
            if not self._exit_hook:
                atexit.register(self.close)
                self._exit_hook = True
            return nc

    def _connect(self) -> Client:
        nc = natsjs_sync.connect(self._servers, **self._options)
        try:
            for fn in self._on_connect:
                import_callable(fn)(nc)
        except BaseException:
            nc.close()
            raise
        return nc

    def health(self, **overrides: Any) -> Health:
        """:func:`~natsjs_sync.health.check_health` of the process's client (connecting it if needed).

        Args:
            overrides: keywords of ``check_health`` over those given at construction.

        Returns:
            The :class:`~natsjs_sync.health.Health`; a client that cannot be made is a ``"fail"``.
        """
        kwargs = {**self._health, **overrides}
        start = time.monotonic()
        try:
            nc = self()
        except NatsError as exc:
            return Health.failed(exc, time.monotonic() - start)
        return check_health(nc, **kwargs)

    def close(self) -> None:
        """Close the client held (if any); the next call makes a new one. Registered with ``atexit``."""
        with self._lock:
            nc, self._client = self._client, None
        if nc is not None:
            nc.close()

    def drain(self, timeout: float | None = 30.0) -> None:
        """Drain the client held (if any): finish what was received, flush, close.

        Raises:
            TimeoutError: draining took longer than ``timeout``; the client is closed anyway.
        """
        with self._lock:
            nc, self._client = self._client, None
        if nc is not None and not nc.is_closed:
            nc.drain(timeout=timeout)

    def __repr__(self) -> str:
        nc = self._client
        return f"<ProcessClient pid={os.getpid()} client={nc!r}>"
