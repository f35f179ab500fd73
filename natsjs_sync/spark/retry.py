"""Riding out a server that is away for a moment (a restart, a leader election) on the driver and executors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..jetstream import paging
from ..jetstream.paging import transient
from .config import NatsConfig

__all__ = ["ride_out", "transient"]

T = TypeVar("T")


def ride_out(cfg: NatsConfig, call: Callable[[], T]) -> T:
    """``call()``, tried again while it fails with a :func:`transient` error,
    for at most ``cfg.retry_timeout`` seconds (then the last error is raised)."""
    return paging.ride_out(cfg.retry_timeout, call)
