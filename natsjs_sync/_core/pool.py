"""Server addresses and the server pool (no sockets, no threads of its own).

Each server remembers when it was last tried and how many attempts in a row
failed. After a disconnect the current server goes to the end of the pool;
servers are then tried in order, each no sooner than the reconnect back-off
after its previous attempt (``reconnect_time_wait`` plus random jitter, so a
crowd of clients does not reconnect in lockstep). A server that failed
``max_reconnect_attempts`` times in a row leaves the pool; when the pool is
empty the client closes. Servers announced in INFO ``connect_urls`` join the
pool as "discovered". Thread-safe: the reader thread adds discovered servers
while the reconnecting thread walks the pool.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from .._backoff import Backoff
from .._redact import redact_urls
from ..errors import InvalidServerUrlError

DEFAULT_PORT = 4222
#: URL schemes and whether each means TLS.
SCHEMES = {"nats": False, "tls": True, "ws": False, "wss": True}
#: The port of a URL that names none.
DEFAULT_PORTS = {"nats": DEFAULT_PORT, "tls": DEFAULT_PORT, "ws": 80, "wss": 443}
WEBSOCKET_SCHEMES = frozenset({"ws", "wss"})


@dataclass(frozen=True)
class ServerAddress:
    """One server of the pool. Credentials in the URL are kept out of ``repr``."""

    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    discovered: bool = False
    path: str = ""

    @property
    def tls(self) -> bool:
        return SCHEMES.get(self.scheme, False)

    @property
    def websocket(self) -> bool:
        return self.scheme in WEBSOCKET_SCHEMES

    @property
    def url(self) -> str:
        """The URL without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def __str__(self) -> str:
        return self.url


def parse_server_url(url: str, discovered: bool = False) -> ServerAddress:
    """Parse ``nats://[user:pass@]host[:port]``, ``tls://...``, ``ws://host[:port][/path]``,
    ``wss://...`` or ``host:port``.

    Raises:
        InvalidServerUrlError: not a NATS URL (a ValueError, and nats-py's ``nats.errors.Error``).
    """
    if not isinstance(url, str):  # its type, never its value (bytes of a URL hold its password)
        raise InvalidServerUrlError(f"server URL must be a non-empty str, not {type(url).__name__}")
    if not url.strip():
        raise InvalidServerUrlError(f"server URL must be a non-empty str, got {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "nats://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # urllib's message quotes the URL's parts (a password among them): not used
        raise InvalidServerUrlError(f"bad port or host in server URL {redact_urls(url)!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidServerUrlError(f"unsupported URL scheme {parts.scheme!r} in {redact_urls(url)!r}")
    port = port or DEFAULT_PORTS[scheme]
    host = parts.hostname or "127.0.0.1"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    path = parts.path if parts.path not in ("", "/") else ""
    return ServerAddress(scheme, host, port, user, password, discovered, path)


def check_one_transport(addrs: Iterable[ServerAddress]) -> None:
    """Refuse a pool that mixes WebSocket (``ws://``, ``wss://``) and TCP (``nats://``,
    ``tls://``) servers, as nats-py's ``connect()`` does. The native :func:`natsjs_sync.connect`
    accepts the mix (a WebSocket pool may fail over to TCP); nats-py's two-step
    ``NATS().connect()`` calls this.

    Raises:
        InvalidServerUrlError: the servers mix the two.
    """
    if len({a.websocket for a in addrs}) > 1:
        raise InvalidServerUrlError("nats: mixing of websocket and non websocket URLs is not allowed")


@dataclass
class PoolEntry:
    addr: ServerAddress
    failed_attempts: int = 0
    last_attempt: float | None = None
    lame_duck: bool = False


class ServerPool:
    """The servers a client may connect to, and when to try each next.

    Args:
        servers: the configured servers.
        randomize: shuffle the pool (spreads clients over a cluster).
        max_reconnect_attempts: failed attempts in a row before a server is
            dropped; negative means never.
        backoff: the wait between two attempts on the same server.
    """

    def __init__(
        self,
        servers: Iterable[ServerAddress],
        randomize: bool = True,
        max_reconnect_attempts: int = 60,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ):
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.entries = [PoolEntry(a) for a in servers]
        if randomize and len(self.entries) > 1:
            self._rng.shuffle(self.entries)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.backoff = backoff or Backoff(2.0, 2.0, factor=1.0, jitter=0.1, rng=self._rng)
        self.current: PoolEntry | None = None
        self._randomize = randomize

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def addresses(self) -> list[ServerAddress]:
        with self._lock:
            return [e.addr for e in self.entries]

    def _find(self, addr: ServerAddress) -> PoolEntry | None:
        for e in self.entries:
            if (e.addr.host, e.addr.port) == (addr.host, addr.port):
                return e
        return None

    def add_discovered(self, urls: Iterable[str], scheme: str) -> list[ServerAddress]:
        """Add servers from INFO ``connect_urls``; returns those that were new."""
        added = []
        with self._lock:
            for raw in urls:
                try:
                    addr = parse_server_url(f"{scheme}://{raw}", discovered=True)
                except ValueError:
                    continue
                if self._find(addr) is None:
                    entry = PoolEntry(addr)
                    if self._randomize:
                        self.entries.insert(self._rng.randrange(len(self.entries) + 1), entry)
                    else:
                        self.entries.append(entry)
                    added.append(addr)
        return added

    def replace(self, servers: Iterable[ServerAddress]) -> None:
        """Make ``servers`` the pool (nats-py's ``set_server_pool``), for the next reconnect.

        A server already in the pool (same host and port) keeps its failed
        attempts, last attempt and lame duck mark; the connection in use is not
        touched. The new pool is shuffled unless ``randomize`` was turned off,
        and servers the cluster announces keep joining it.
        """
        with self._lock:
            old = {(e.addr.host, e.addr.port): e for e in self.entries}
            if self.current is not None:
                old.setdefault((self.current.addr.host, self.current.addr.port), self.current)
            entries = []
            for addr in servers:
                prev = old.get((addr.host, addr.port))
                entry = PoolEntry(addr)
                if prev is not None:
                    entry.failed_attempts, entry.last_attempt = prev.failed_attempts, prev.last_attempt
                    entry.lame_duck = prev.lame_duck
                    if prev is self.current:
                        self.current = entry  # moved to the back of the pool when it is lost
                entries.append(entry)
            if self._randomize and len(entries) > 1:
                self._rng.shuffle(entries)
            self.entries = entries

    def connected(self, entry: PoolEntry, now: float) -> None:
        with self._lock:
            entry.failed_attempts = 0
            entry.last_attempt = now
            entry.lame_duck = False
            self.current = entry

    def disconnected(self) -> None:
        """Move the current server to the end, so the others are tried first."""
        with self._lock:
            if self.current is not None and self.current in self.entries:
                self.entries.remove(self.current)
                self.entries.append(self.current)

    def mark_lame_duck(self) -> bool:
        """The current server is going away; True if another server is there to move to."""
        with self._lock:
            if self.current is not None:
                self.current.lame_duck = True
            return any(not e.lame_duck for e in self.entries)

    def failed(self, entry: PoolEntry) -> None:
        with self._lock:
            entry.failed_attempts += 1
            if 0 <= self.max_reconnect_attempts <= entry.failed_attempts and entry in self.entries:
                self.entries.remove(entry)

    def next_attempt(self, now: float) -> tuple[PoolEntry, float] | None:
        """The server to try next and how long to wait first; ``None`` when the pool is empty.

        Servers in lame duck mode come last; among the rest the first in order
        whose wait is shortest wins.
        """
        with self._lock:
            if not self.entries:
                return None
            ordered = [e for e in self.entries if not e.lame_duck] + [e for e in self.entries if e.lame_duck]
            best: tuple[PoolEntry, float] | None = None
            for entry in ordered:
                wait = self._wait_for(entry, now)
                if best is None or wait < best[1]:
                    best = (entry, wait)
                if wait == 0:
                    break
            return best

    def candidates(self) -> list[PoolEntry]:
        """The servers still in the pool, in order (for a user's choice of the next one)."""
        with self._lock:
            return list(self.entries)

    def _wait_for(self, entry: PoolEntry, now: float) -> float:
        if entry.last_attempt is None:
            return 0.0
        return max(0.0, entry.last_attempt + self.backoff.delay(entry.failed_attempts + 1) - now)

    def attempted(self, entry: PoolEntry, now: float) -> None:
        with self._lock:
            entry.last_attempt = now
