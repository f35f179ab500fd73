"""``NatsConfig``: what executors need to connect, as a plain picklable value.

Spark ships closures to executors by pickling them; a Client (socket, threads,
locks) cannot travel. A NatsConfig can: it holds names, paths and numbers only.
On the executor, :meth:`NatsConfig.client` gives the one Client of that Python
worker process, made on first use and made again after a fork (Spark's Python
daemon forks its workers), never at import time.
"""

from __future__ import annotations

import os
import ssl
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import natsjs_sync

from ..errors import NatsError, NoServersError

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream import JetStream

# (pid, config) -> Client. A child process after fork() sees its parent's dict
# with the parent's pid in every key, so it never reuses an inherited client.
_clients: dict[tuple[int, NatsConfig], Client] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class NatsConfig:
    """Connection settings for executors. Frozen, hashable and picklable.

    Args:
        servers: URLs (a comma-separated string or a tuple).
        user, password, token: credentials.
        creds_file: a ``.creds`` file path (must exist on every executor).
        nkeys_seed_file: an nkey seed file path.
        tls_ca, tls_cert, tls_key: PEM file paths; any of them turns TLS on.
        tls_verify_hostname: check the server certificate's host name.
        name: the client name shown by the server.
        connect_timeout, timeout: seconds for connecting and for each JetStream call.
        retry_timeout: seconds a first connection keeps being retried when no
            server answers (a task starting during a server restart), and
            unacknowledged publishes of a data source write keep being sent
            again; 0 fails at once. The driver's first connection of a job
            (:meth:`reach`) is not retried: no server there fails the job at once.
        domain, api_prefix: JetStream domain or API prefix.
        max_reconnect_attempts, reconnect_time_wait: reconnect behaviour.
        options: any other :func:`natsjs_sync.connect` keyword (picklable values only).
    """

    servers: tuple[str, ...] | str = ("nats://127.0.0.1:4222",)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds_file: str | None = None
    nkeys_seed_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_verify_hostname: bool = True
    name: str | None = "natsjs-spark"
    connect_timeout: float = 5.0
    timeout: float = 10.0
    retry_timeout: float = 60.0
    domain: str | None = None
    api_prefix: str = "$JS.API"
    max_reconnect_attempts: int = 60
    reconnect_time_wait: float = 1.0
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.servers, str):
            object.__setattr__(self, "servers", tuple(s.strip() for s in self.servers.split(",") if s.strip()))
        elif not isinstance(self.servers, tuple):
            object.__setattr__(self, "servers", tuple(self.servers))
        if isinstance(self.options, dict):
            object.__setattr__(self, "options", tuple(sorted(self.options.items())))
        if not self.servers:
            raise ValueError("NatsConfig needs at least one server URL")

    def _tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca or self.tls_cert):
            return None
        ctx = ssl.create_default_context(cafile=self.tls_ca)
        ctx.check_hostname = self.tls_verify_hostname
        if self.tls_cert:
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
        return ctx

    def connect(self, retry: bool = True) -> Client:
        """A new Client with these settings (the caller owns and closes it).

        Args:
            retry: keep trying for ``retry_timeout`` seconds while no server
                answers (a task starting during a restart); False tries each
                server once, each within ``connect_timeout``.

        Raises:
            NoServersError: no server answered (naming each address and why).
            AuthorizationError: the server refused the credentials.
        """
        kwargs: dict[str, Any] = dict(
            name=self.name,
            user=self.user,
            password=self.password,
            token=self.token,
            user_credentials=self.creds_file,
            nkeys_seed=self.nkeys_seed_file,
            connect_timeout=self.connect_timeout,
            max_reconnect_attempts=self.max_reconnect_attempts,
            reconnect_time_wait=self.reconnect_time_wait,
        )
        tls = self._tls_context()
        if tls is not None:
            kwargs["tls"] = tls
        if self.retry_timeout > 0:
            kwargs["retry_on_failed_connect"] = True
        kwargs.update(dict(self.options))
        if not retry:
            kwargs["retry_on_failed_connect"] = False
        nc = natsjs_sync.connect(list(self.servers), **kwargs)
        if not nc.is_connected and self.retry_timeout > 0:
            # Retrying in the background: wait for it, within the budget.
            try:
                nc.flush(timeout=self.retry_timeout)
            except NatsError as exc:
                nc.close()
                raise NoServersError(f"no server of {', '.join(self.servers)} answered within retry_timeout="
                                     f"{self.retry_timeout} s") from exc
        return nc

    def client(self) -> Client:
        """The shared Client of this process for these settings (made on first use)."""
        key = (os.getpid(), self)
        nc = _clients.get(key)
        if nc is not None and not nc.is_closed:
            return nc
        with _lock:
            nc = _clients.get(key)
            if nc is None or nc.is_closed:
                nc = self.connect()
                _clients[key] = nc
            return nc

    def reach(self) -> Client:
        """The shared client, connected now: what the driver asks for when a job starts.

        Without a client of these settings in this process yet, each server is
        tried once, within ``connect_timeout``: an address where no server
        answers (a typo in ``servers``, a closed port) fails the job on the
        driver within seconds, instead of failing each task attempt after
        ``retry_timeout``. The client made is the one :meth:`client` then
        gives. A client this process already has (connected, or reconnecting
        after the server went away) is given as it is: a server that goes away
        during a job is still waited for, up to ``retry_timeout``.

        Raises:
            NoServersError: no server answered; the message names each address,
                what went wrong there, and the settings the attempt used.
            AuthorizationError: the server refused the credentials.
        """
        key = (os.getpid(), self)
        with _lock:
            nc = _clients.get(key)
            if nc is not None and not nc.is_closed:
                return nc
            try:
                nc = self.connect(retry=False)
            except NoServersError as exc:
                raise NoServersError(
                    f"no NATS server answered at {', '.join(self.servers)} when the job started (each tried once, "
                    f"connect_timeout={self.connect_timeout} s): {exc}. Check the option 'servers'") from exc
            _clients[key] = nc
            return nc

    def jetstream(self) -> JetStream:
        """A JetStream context on :meth:`client`."""
        return self.client().jetstream(domain=self.domain, api_prefix=self.api_prefix, timeout=self.timeout)


def close_clients() -> None:
    """Close every shared client of this process (tests; drivers shutting down)."""
    with _lock:
        items = list(_clients.items())
        _clients.clear()
    pid = os.getpid()
    for (owner, _), nc in items:
        if owner == pid:
            nc.close()
