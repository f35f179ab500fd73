"""What key-value buckets and object stores share: bucket names, their stream, their status.

A bucket is a stream with a naming convention (``KV_<bucket>``, ``OBJ_<bucket>``);
these helpers create and open that stream, and turn stream errors into bucket
errors that name the bucket.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._timeout import TimeoutArg
from ..errors import (
    BucketNotFoundError,
    InvalidBucketNameError,
    JetStreamError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from .stream_config import StorageType, StreamConfig, StreamInfo

if TYPE_CHECKING:
    from .context import JetStream
    from .stream import Stream

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")


def validate_bucket(name: object) -> str:
    """A bucket name: letters, digits, ``_`` and ``-``.

    Raises:
        InvalidBucketNameError: anything else (nothing is sent).
    """
    if not isinstance(name, str) or not _BUCKET_RE.fullmatch(name):
        raise InvalidBucketNameError(f"invalid bucket name {name!r}: use letters, digits, '_' and '-'")
    return name


class BucketStatus:
    """What key-value buckets and object stores share: both read their stream's info.

    Attributes:
        bucket: the bucket's name.
        stream_info: the StreamInfo of the stream behind the bucket, as read.
    """

    def __init__(self, info: StreamInfo, bucket: str):
        self.stream_info = info
        self.bucket = bucket

    @property
    def description(self) -> str | None:
        """The bucket's description, if it was given one."""
        return self.stream_info.config.description

    @property
    def ttl(self) -> float:
        """Seconds a value or object is kept (0: for ever)."""
        return self.stream_info.config.max_age

    @property
    def storage(self) -> str:
        """``"file"`` or ``"memory"``."""
        return str(getattr(self.stream_info.config.storage, "value", self.stream_info.config.storage))

    @property
    def storage_type(self) -> StorageType:
        """nats-py's name: the storage as a :class:`StorageType`."""
        return StorageType(self.storage)

    @property
    def replicas(self) -> int:
        """How many servers keep a copy (1 on a single server)."""
        return self.stream_info.config.num_replicas

    @property
    def backing_store(self) -> str:
        """Always ``"JetStream"`` (the name other clients report)."""
        return "JetStream"

    @property
    def is_compressed(self) -> bool:
        """True when the bucket's stream stores data compressed (S2)."""
        return getattr(self.stream_info.config.compression, "value", self.stream_info.config.compression) == "s2"

    @property
    def metadata(self) -> dict[str, str]:
        """The bucket's metadata (a copy)."""
        return dict(self.stream_info.config.metadata or {})


def bucket_stream(js: JetStream, scfg: StreamConfig, action: str, what: str,
                  exists_error: type[JetStreamError], timeout: TimeoutArg) -> Stream:
    """Create, update or create-or-update the stream behind a KV bucket or an
    object store (``what`` names it in errors)."""
    try:
        if action == "create":
            return js.create_stream(scfg, timeout=timeout)
        if action == "update":
            try:
                return js.update_stream(scfg, timeout=timeout)
            except StreamNotFoundError:
                raise BucketNotFoundError(f"{what} not found") from None
        return js.create_or_update_stream(scfg, timeout=timeout)
    except StreamNameInUseError as exc:
        raise exists_error(f"{what} exists with another configuration",
                           code=exc.code, err_code=exc.err_code) from None


def open_bucket_stream(js: JetStream, bucket: str, stream_name: str, what: str, timeout: TimeoutArg) -> Stream:
    """The stream behind an existing KV bucket or object store."""
    validate_bucket(bucket)
    try:
        return js.stream(stream_name, timeout=timeout)
    except StreamNotFoundError:
        raise BucketNotFoundError(f"{what} not found") from None
