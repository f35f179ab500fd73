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
            again; 0 fails at once.
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

    def connect(self) -> Client:
        """A new Client with these settings (the caller owns and closes it)."""
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
