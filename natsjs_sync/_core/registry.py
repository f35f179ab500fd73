"""Subscriptions by sid: what the reader routes to, and what a reconnect restores.

A *route* is the function the reader thread calls for each message of a sid:
a :class:`~natsjs_sync.Subscription`'s enqueue, or a library mux (request
replies, publish acks) that settles waiters in place. Routes run on the reader
thread and must never block or run user code.

The owner (the connection) mutates the registry under its own lock, so that
"register + send SUB" and "snapshot + replay SUBs + go CONNECTED" are each
one step; lookups by the reader are plain dict reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.connection import SubRecord

Route = Callable[[Any], None]


@dataclass
class Entry:
    """One registered subscription."""

    sid: int
    subject: str
    queue: str | None
    route: Route
    #: messages left before the server unsubscribes it (``None``: no limit)
    remaining: Callable[[], int | None] = field(default=lambda: None)
    owner: Any = None  #: the Subscription, when there is one


class Registry:
    """sid -> route. Not locked itself: see the module docstring."""

    def __init__(self) -> None:
        self._sids = itertools.count(1)
        self.entries: dict[int, Entry] = {}
        #: sid -> route, read by the reader thread for every message.
        self.routes: dict[int, Route] = {}

    def next_sid(self) -> int:
        return next(self._sids)

    def add(self, entry: Entry) -> None:
        self.entries[entry.sid] = entry
        self.routes[entry.sid] = entry.route

    def remove(self, sid: int) -> Entry | None:
        self.routes.pop(sid, None)
        return self.entries.pop(sid, None)

    def get(self, sid: int) -> Entry | None:
        return self.entries.get(sid)

    def __len__(self) -> int:
        return len(self.entries)

    def snapshot(self) -> list[SubRecord]:
        """What to replay on a new connection, in sid order. Ended entries
        (see :meth:`used_up`) are left out."""
        out = []
        for entry in self.entries.values():
            if _ended(entry):
                continue
            out.append(SubRecord(entry.sid, entry.subject, entry.queue, entry.remaining()))
        return out

    def used_up(self) -> list[Entry]:
        """Entries a new connection must not restore: their auto-unsubscribe count is
        used up, or they drain (their UNSUB was sent: on a new connection nothing more comes)."""
        return [e for e in self.entries.values() if _ended(e)]

    def clear(self) -> list[Entry]:
        entries = list(self.entries.values())
        self.entries.clear()
        self.routes.clear()
        return entries


def _ended(entry: Entry) -> bool:
    remaining = entry.remaining()
    if remaining is not None and remaining <= 0:
        return True
    owner = entry.owner
    return owner is not None and bool(owner.is_draining)
