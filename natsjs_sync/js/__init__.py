"""nats-py's ``nats.js`` package paths: ``natsjs_sync.js.api``, ``.errors``, ``.kv``,
``.object_store``, ``.client``, ``.manager``.

A program written for nats-py imports from here after the migration rule
(``from nats.js.api import StreamConfig`` -> ``from natsjs_sync.js.api import
StreamConfig``). The classes are the native ones of :mod:`natsjs_sync.jetstream`.
"""

from __future__ import annotations

from . import api
from .client import JetStreamContext
from .manager import JetStreamManager

__all__ = ["JetStreamContext", "JetStreamManager", "api"]
