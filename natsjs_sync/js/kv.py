"""nats-py's ``nats.js.kv``: the key-value store and its operation names."""

from __future__ import annotations

import re

from ..jetstream.kv import Entry, KeyValue, KeyValueStatus, KeyWatcher

KV_OP = "KV-Operation"
KV_DEL = "DEL"
KV_PURGE = "PURGE"
KV_MARKER_REASON = "Nats-Marker-Reason"
MSG_ROLLUP_SUBJECT = "sub"
VALID_KEY_RE = re.compile(r"^[-/_=\.a-zA-Z0-9]+$")

__all__ = [
    "KV_DEL",
    "KV_MARKER_REASON",
    "KV_OP",
    "KV_PURGE",
    "MSG_ROLLUP_SUBJECT",
    "VALID_KEY_RE",
    "Entry",
    "KeyValue",
    "KeyValueStatus",
    "KeyWatcher",
]
