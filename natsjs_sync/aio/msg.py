"""nats-py's ``nats.aio.msg``: the received message."""

from __future__ import annotations

from ..msg import Msg

__all__ = ["Msg"]
