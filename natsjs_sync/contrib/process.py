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
needed. A fork while another thread holds the holder's lock (in the middle of
connecting) does not leave the child waiting on that lock for ever: the child
gets a lock of its own.

:func:`~natsjs_sync.contrib.settings.parse_settings` (re-exported here) reads
the one settings mapping both integrations take (Flask's ``NATS_*`` keys,
Django's ``NATS = {...}``) and reports every bad setting at once;
:func:`error_status` is the one mapping from a NATS failure to an HTTP answer,
and :func:`health_answer` the one health endpoint's answer.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._connect import connect_options, open_client
from .._core import fork
from .._core.options import finite_seconds
from .._timeout import Deadline
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
from ..health import DEFAULT_TIMEOUT, Health, check_health, check_options
from .settings import SETTINGS_KEYS, Settings, SettingsError, import_callable, parse_settings

__all__ = ["SETTINGS_KEYS", "ProcessClient", "Settings", "SettingsError", "error_status", "health_answer",
           "import_callable", "parse_settings"]

log = logging.getLogger("natsjs_sync.contrib")

OnConnect = Callable[[Client], object]


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


def health_answer(holder: ProcessClient, details: bool | str | Callable[[Any], object],
                  request: object) -> tuple[dict[str, Any], int]:
    """What a health endpoint answers: the readiness of the process's client, and who sees what.

    Args:
        holder: the process's client holder.
        details: the ``health_details`` setting: ``False`` (the body is
            ``{"status": ...}`` alone), ``True`` (what each check measured too:
            server URL and id, usage, errors), or a callable (or its dotted path)
            given ``request`` that says whether this caller may see them. A
            callable that raises shows no details (and is logged).
        request: the framework's request, handed to a ``details`` callable.

    Returns:
        ``(body, status)``: status 200 (``"pass"``, ``"warn"``) or 503 (``"fail"``).
    """
    health = holder.health()
    return health.as_dict(details=_may_see_details(details, request)), health.http_status


def _may_see_details(details: bool | str | Callable[[Any], object], request: object) -> bool:
    if isinstance(details, bool):
        return details
    try:
        return bool(import_callable(details)(request))
    except Exception:  # a broken check of who may see more shows less, never a 500 to the probe
        log.exception("health_details raised; answering with the status alone")
        return False


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
        on_connect: a callable or dotted path, or a list of them, run with each
            new client before it is handed out, e.g. to declare streams.
        health: keywords of :func:`~natsjs_sync.health.check_health` for :meth:`health`.
        retry_wait: seconds a failed connect is not tried again (a finite number, 0 or more).

    Raises:
        SettingsError: an argument that could not be used, checked by
            :func:`~natsjs_sync.contrib.settings.parse_settings` (servers and options
            by the rules of :func:`natsjs_sync.connect`, dotted paths imported), so a
            mistake fails here rather than at every call.
    """

    def __init__(self, servers: str | Sequence[str] | None = None, *, options: Mapping[str, Any] | None = None,
                 on_connect: str | OnConnect | Sequence[str | OnConnect] = (),
                 health: Mapping[str, Any] | None = None, retry_wait: float = 1.0):
        problems: list[str] = []
        settings = Settings()
        try:
            settings = parse_settings({"servers": servers, "options": options, "on_connect": on_connect,
                                       "health": health}, framework="python")
        except SettingsError as exc:
            problems += exc.problems
        try:
            retry_wait = finite_seconds(retry_wait, "retry_wait")
        except (TypeError, ValueError) as exc:
            problems.append(str(exc))
        if problems:
            raise SettingsError(problems)
        self._setup(settings, retry_wait)

    def _setup(self, settings: Settings, retry_wait: float) -> None:
        self._servers = None if settings.servers is None else list(settings.servers)
        self._options = {"max_reconnect_attempts": -1, **settings.options}
        self._on_connect: list[str | OnConnect] = list(settings.on_connect)
        self._health = dict(settings.health)
        self._retry_wait = retry_wait
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._failure: tuple[float, NatsError] | None = None
        self._exit_hook = False
        fork.track(self)

    def after_fork_in_child(self) -> None:
        """In a forked child: a lock of its own (a parent thread may have held this one
        across a connect at the fork, and no thread of the child would ever release it)."""
        self._lock = threading.Lock()
        self._failure = None  # the parent's attempt: the child tries for itself

    @classmethod
    def from_settings(cls, settings: Settings) -> ProcessClient:
        """A holder for :class:`~natsjs_sync.contrib.settings.Settings` that
        :func:`~natsjs_sync.contrib.settings.parse_settings` made (not checked again)."""
        holder = cls.__new__(cls)
        holder._setup(settings, 1.0)
        return holder

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
        return self._get(None)

    def _get(self, deadline: Deadline | None) -> Client:
        """The client; a connect it makes ends by ``deadline`` (``None``: each server's ``connect_timeout``)."""
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
                nc = self._connect(deadline)
            except NatsError as exc:
                self._failure = (time.monotonic(), exc)
                raise
            self._failure = None
            self._client = nc
            if not self._exit_hook:
                atexit.register(self.close)
                self._exit_hook = True
            return nc

    def _connect(self, deadline: Deadline | None) -> Client:
        nc = open_client(connect_options(self._servers, **self._options), deadline)
        try:
            for fn in self._on_connect:
                import_callable(fn)(nc)
        except BaseException:
            nc.close()
            raise
        return nc

    def health(self, **overrides: Any) -> Health:
        """:func:`~natsjs_sync.health.check_health` of the process's client (connecting it if needed).

        One ``timeout`` (the check's, default 2 s) bounds the whole answer: a first
        connect made for it tries the servers within that budget (each within its
        own ``connect_timeout`` too), and the checks get what is left. Only the
        ``on_connect`` callables of a new client run outside it.

        Args:
            overrides: keywords of ``check_health`` over those given at construction.

        Returns:
            The :class:`~natsjs_sync.health.Health`; a client that cannot be made is a ``"fail"``.

        Raises:
            TypeError, ValueError: an override ``check_health`` refuses.
        """
        kwargs = {**self._health, **overrides}
        deadline = Deadline(check_options(timeout=kwargs.get("timeout", DEFAULT_TIMEOUT))["timeout"])
        start = time.monotonic()
        try:
            nc = self._get(deadline)
        except NatsError as exc:
            return Health.failed(exc, time.monotonic() - start)
        left = deadline.remaining()
        if left is not None and left <= 0:
            return Health("fail", {"connection": {"status": "fail", "connected": nc.is_connected,
                                                  "error": "not checked: the health check's timeout ran out "
                                                           "while connecting"}}, time.monotonic() - start)
        return check_health(nc, **{**kwargs, "timeout": left})

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
