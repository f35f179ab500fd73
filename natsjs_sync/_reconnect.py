"""The server pool and the reconnect back-off (no sockets, no threads).

Each server remembers when we last tried it and how many reconnect attempts in
a row failed. After a disconnect the current server goes to the end of the
pool; servers are then tried in order, each no sooner than
``reconnect_time_wait`` (plus random jitter) after its previous attempt, so a
crowd of clients does not reconnect in lockstep. A server that failed
``max_reconnect_attempts`` times in a row leaves the pool; when the pool is
empty the client closes. Servers announced in INFO ``connect_urls`` join the
pool as "discovered".
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from ._connection import ServerAddress, parse_server_url


@dataclass
class PoolEntry:
    addr: ServerAddress
    failed_attempts: int = 0
    last_attempt: float | None = None
    lame_duck: bool = False


class ServerPool:
    """Not thread-safe: used by the connecting thread only.

    Args:
        servers: the configured servers.
        randomize: shuffle the pool (spreads clients over a cluster).
        max_reconnect_attempts: failed attempts in a row before a server is
            dropped; negative means never.
        reconnect_time_wait: seconds between two attempts on the same server.
        jitter: up to this many random seconds added to each wait.
    """

    def __init__(
        self,
        servers: Iterable[ServerAddress],
        randomize: bool = True,
        max_reconnect_attempts: int = 60,
        reconnect_time_wait: float = 2.0,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ):
        self._rng = rng or random.Random()
        self.entries = [PoolEntry(a) for a in servers]
        if randomize and len(self.entries) > 1:
            self._rng.shuffle(self.entries)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.reconnect_time_wait = reconnect_time_wait
        self.jitter = jitter
        self.current: PoolEntry | None = None
        self._randomize = randomize

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def addresses(self) -> list[ServerAddress]:
        return [e.addr for e in self.entries]

    def _find(self, addr: ServerAddress) -> PoolEntry | None:
        for e in self.entries:
            if (e.addr.host, e.addr.port) == (addr.host, addr.port):
                return e
        return None

    def add_discovered(self, urls: Iterable[str], tls: bool) -> list[ServerAddress]:
        """Add servers from INFO ``connect_urls``; returns those that were new."""
        added = []
        for raw in urls:
            try:
                addr = parse_server_url(("tls://" if tls else "nats://") + raw, discovered=True)
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

    def connected(self, entry: PoolEntry, now: float) -> None:
        entry.failed_attempts = 0
        entry.last_attempt = now
        entry.lame_duck = False
        self.current = entry

    def disconnected(self) -> None:
        """Move the current server to the end, so the others are tried first."""
        if self.current is not None and self.current in self.entries:
            self.entries.remove(self.current)
            self.entries.append(self.current)

    def mark_lame_duck(self) -> None:
        if self.current is not None:
            self.current.lame_duck = True

    def failed(self, entry: PoolEntry) -> None:
        entry.failed_attempts += 1
        if 0 <= self.max_reconnect_attempts <= entry.failed_attempts and entry in self.entries:
            self.entries.remove(entry)

    def next_attempt(self, now: float) -> tuple[PoolEntry, float] | None:
        """The server to try next and how long to wait first; ``None`` when the pool is empty.

        Servers in lame duck mode come last; among the rest the first in order
        whose wait is shortest wins.
        """
        if not self.entries:
            return None
        ordered = [e for e in self.entries if not e.lame_duck] + [e for e in self.entries if e.lame_duck]
        best: tuple[PoolEntry, float] | None = None
        for entry in ordered:
            wait = self.wait_for(entry, now)
            if best is None or wait < best[1]:
                best = (entry, wait)
            if wait == 0:
                break
        return best

    def wait_for(self, entry: PoolEntry, now: float) -> float:
        if entry.last_attempt is None:
            return 0.0
        due = entry.last_attempt + self.reconnect_time_wait + self._rng.uniform(0, self.jitter)
        return max(0.0, due - now)

    def attempted(self, entry: PoolEntry, now: float) -> None:
        entry.last_attempt = now
