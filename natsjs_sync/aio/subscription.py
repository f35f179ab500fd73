"""nats-py's ``nats.aio.subscription``: the subscription and its default limits."""

from __future__ import annotations

from ..subscription import Subscription

DEFAULT_SUB_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_SUB_PENDING_BYTES_LIMIT = 128 * 1024 * 1024

__all__ = ["DEFAULT_SUB_PENDING_BYTES_LIMIT", "DEFAULT_SUB_PENDING_MSGS_LIMIT", "Subscription"]
