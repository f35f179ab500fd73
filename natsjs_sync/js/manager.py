"""nats-py's ``nats.js.manager``: ``nc.jsm()`` returns a :class:`JetStreamManager`, the
native JetStream context (management calls and all)."""

from __future__ import annotations

from ..jetstream.context import JetStream

#: ``nc.jsm()`` returns one.
JetStreamManager = JetStream

__all__ = ["JetStreamManager"]
