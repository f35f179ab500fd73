"""nats-py's ``nats.js.object_store``: the object store and its constants."""

from __future__ import annotations

import re

from ..jetstream.object_models import ObjectStoreStatus
from ..jetstream.object_store import ObjectResult, ObjectStore, ObjectWatcher

VALID_BUCKET_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
VALID_KEY_RE = re.compile(r"^[-/_=\.a-zA-Z0-9]+$")
OBJ_STREAM_TEMPLATE = "OBJ_{bucket}"
OBJ_ALL_CHUNKS_PRE_TEMPLATE = "$O.{bucket}.C.>"
OBJ_ALL_META_PRE_TEMPLATE = "$O.{bucket}.M.>"
OBJ_CHUNKS_PRE_TEMPLATE = "$O.{bucket}.C.{obj}"
OBJ_META_PRE_TEMPLATE = "$O.{bucket}.M.{obj}"
OBJ_NO_PENDING = "0"
OBJ_DEFAULT_CHUNK_SIZE = 128 * 1024
OBJ_DIGEST_TYPE = "SHA-256="
OBJ_DIGEST_TEMPLATE = OBJ_DIGEST_TYPE + "{digest}"
MSG_ROLLUP_SUBJECT = "sub"

__all__ = [
    "MSG_ROLLUP_SUBJECT",
    "OBJ_ALL_CHUNKS_PRE_TEMPLATE",
    "OBJ_ALL_META_PRE_TEMPLATE",
    "OBJ_CHUNKS_PRE_TEMPLATE",
    "OBJ_DEFAULT_CHUNK_SIZE",
    "OBJ_DIGEST_TEMPLATE",
    "OBJ_DIGEST_TYPE",
    "OBJ_META_PRE_TEMPLATE",
    "OBJ_NO_PENDING",
    "OBJ_STREAM_TEMPLATE",
    "VALID_BUCKET_RE",
    "VALID_KEY_RE",
    "ObjectResult",
    "ObjectStore",
    "ObjectStoreStatus",
    "ObjectWatcher",
]
