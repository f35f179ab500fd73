"""nats-py's ``nats.js.client``: :class:`JetStreamContext` is the native JetStream context,
which answers nats-py's method names (see :mod:`natsjs_sync.jetstream.nats_py`)."""

from __future__ import annotations

from ..jetstream.context import JetStream
from ..jetstream.nats_py import PullSubscription
from ..jetstream.push import OrderedSubscription, PushSubscription
from .object_store import OBJ_ALL_CHUNKS_PRE_TEMPLATE, OBJ_ALL_META_PRE_TEMPLATE, OBJ_STREAM_TEMPLATE, VALID_BUCKET_RE

#: ``nc.jetstream()`` returns one.
JetStreamContext = JetStream

DEFAULT_JS_SUB_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_JS_SUB_PENDING_BYTES_LIMIT = 256 * 1024 * 1024
KV_STREAM_TEMPLATE = "KV_{bucket}"
KV_PRE_TEMPLATE = "$KV.{bucket}."
KV_MAX_HISTORY = 64

__all__ = [
    "DEFAULT_JS_SUB_PENDING_BYTES_LIMIT",
    "DEFAULT_JS_SUB_PENDING_MSGS_LIMIT",
    "KV_MAX_HISTORY",
    "KV_PRE_TEMPLATE",
    "KV_STREAM_TEMPLATE",
    "OBJ_ALL_CHUNKS_PRE_TEMPLATE",
    "OBJ_ALL_META_PRE_TEMPLATE",
    "OBJ_STREAM_TEMPLATE",
    "VALID_BUCKET_RE",
    "JetStreamContext",
    "OrderedSubscription",
    "PullSubscription",
    "PushSubscription",
]
