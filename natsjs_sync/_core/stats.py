"""A client's counters: messages and bytes in and out, reconnects, server errors.

What comes in is counted as the reader routes it, reconnects by the
reconnector, ``-ERR``s by the connection, and what is published by the outlet
(:class:`Stats` reads the outlet's two counters through). Users read them as
``client.stats``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class Stats:
    """Counters of one client (read them as ``client.stats``); also a read-only mapping
    (``stats["in_msgs"]``), as nats-py's stats dict."""

    in_msgs: int = 0
    in_bytes: int = 0
    reconnects: int = 0
    errors_received: int = 0

    def __init__(self, outlet: Any = None):
        """``outlet``: the connection's publishing end, which keeps the publish
        counters (it counts a plain publish in the call that buffers it)."""
        self._outlet = outlet

    @property
    def out_msgs(self) -> int:
        """Messages published (buffered for sending) by this client."""
        return 0 if self._outlet is None else int(self._outlet.out_msgs)

    @out_msgs.setter
    def out_msgs(self, value: int) -> None:
        self._outlet.out_msgs = value

    @property
    def out_bytes(self) -> int:
        """Payload bytes published (buffered for sending) by this client."""
        return 0 if self._outlet is None else int(self._outlet.out_bytes)

    @out_bytes.setter
    def out_bytes(self, value: int) -> None:
        self._outlet.out_bytes = value

    _KEYS = ("in_msgs", "out_msgs", "in_bytes", "out_bytes", "reconnects", "errors_received")

    def __getitem__(self, key: str) -> int:
        if key not in self._KEYS:
            raise KeyError(key)
        return int(getattr(self, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    def __contains__(self, key: object) -> bool:
        return key in self._KEYS

    def keys(self) -> tuple[str, ...]:
        """The counter names (nats-py's ``stats`` keys)."""
        return self._KEYS

    def items(self) -> list[tuple[str, int]]:
        """``(name, value)`` of every counter, as nats-py's ``stats`` dict gives them."""
        return [(k, self[k]) for k in self._KEYS]

    def get(self, key: str, default: Any = None) -> Any:
        """The counter ``key``, or ``default`` when there is none of that name."""
        return self[key] if key in self._KEYS else default
