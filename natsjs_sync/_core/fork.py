"""Fork safety: a forked child never uses its parent's sockets, threads or locks.

``os.register_at_fork`` runs ``after_fork_in_child()`` in the child for every
tracked object while the child still has one thread. A connection replaces its
locks (a parent thread may have held them at the fork), forgets the parent's
socket without shutting it down (that would cut the parent's connection too),
and becomes FORKED: it connects afresh on first use. Other holders of a lock
that a fork may catch held (the per-process client of the web integrations, the
OpenTelemetry instrumentation's state) replace their locks the same way.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class Forkable(Protocol):
    def after_fork_in_child(self) -> None: ...


_LIVE: weakref.WeakSet[Forkable] = weakref.WeakSet()


def track(obj: Forkable) -> None:
    """Reset ``obj`` in every forked child of this process (held weakly)."""
    _LIVE.add(obj)


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
