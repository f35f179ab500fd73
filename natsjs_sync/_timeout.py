"""One timeout story: a public call turns ``timeout`` into one monotonic deadline."""

from __future__ import annotations

import time
from typing import Final, Union


class _UseDefault:
    """Sentinel type: "use the configured default" (``None`` means "wait forever")."""

    _instance: _UseDefault | None = None

    def __new__(cls) -> _UseDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT: Final = _UseDefault()
TimeoutArg = Union[float, None, _UseDefault]


def resolve(timeout: TimeoutArg, default: float | None) -> float | None:
    """The number of seconds to wait (``None`` = forever), after defaults."""
    if timeout is USE_DEFAULT:
        return default
    if timeout is None:
        return None
    t = float(timeout)  # type: ignore[arg-type]
    if t < 0:
        raise ValueError(f"timeout must be >= 0 or None, got {timeout!r}")
    return t


class Deadline:
    """A point in monotonic time; ``remaining()`` is the budget still left."""

    __slots__ = ("at",)

    def __init__(self, seconds: float | None):
        self.at = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no deadline."""
        if self.at is None:
            return None
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at
