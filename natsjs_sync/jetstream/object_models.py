"""Object store wire models and their codec.

What every NATS client reads and writes in an object store bucket: the JSON
ObjectInfo on ``$O.<bucket>.M.<base64url(name)>`` (with its meta, options and
link), the ``SHA-256=<base64url>`` digest, the meta-subject token of a name,
and the bucket's configuration and status. Encoding follows the reference
clients field by field; decoding accepts what any of them writes.
:mod:`.object_store` moves objects with them.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import msgspec

from ..errors import ObjectStoreError
from ._api import truncate_time
from ._bucket import BucketStatus, validate_bucket
from .stream_config import Placement, StreamConfig, _Model, _none_is_no_limit


class ObjectLink(_Model, kw_only=True):
    """Where a link points: an object of ``bucket`` (``name`` set) or the whole bucket.

    Attributes:
        bucket: the object store the link points into.
        name: the object's name; ``None`` for a link to the whole bucket.
    """

    bucket: str
    name: str | None = None


class ObjectMetaOptions(_Model, kw_only=True):
    """Options stored with an object.

    Attributes:
        link: set when the object is a link (:meth:`ObjectStore.add_link`).
        max_chunk_size: the chunk size the object was written with, in bytes.
    """

    link: ObjectLink | None = None
    max_chunk_size: int | None = None


class ObjectMeta(_Model, frozen=False, kw_only=True):
    """What the user says about an object (``name`` is set by ``put`` when omitted).

    Mutable, as nats-py's (``meta.description = ...``); not thread-safe to change while shared.

    Attributes:
        name: the object's name (any string).
        description: free text.
        headers: headers kept with the object: each a list of values, or a single str
            (as nats-py takes them); they are stored and read back as given.
        metadata: your own key-value strings kept with the object.
        options: the chunk size to write with, or a link.
    """

    name: str = ""
    description: str | None = None
    headers: dict[str, str | list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: ObjectMetaOptions | None = None


class ObjectInfo(_Model, frozen=False, kw_only=True):
    """An object's metadata as stored in the bucket (JSON shared by all clients).

    Mutable, as nats-py's: changing one changes nothing in the bucket (see ``update_meta``).

    ``nuid`` is empty for a link written by a client that gives links none (nats.js).

    Attributes:
        name: the object's name.
        bucket: the object store it is in.
        nuid: the unique id its chunks are stored under (new for every version).
        description: free text.
        headers: headers kept with the object, as they were stored: a list of values
            (what nats.go and nats.js write), or a single str where the writer gave one
            (nats-py keeps what its user passed).
        metadata: your own key-value strings kept with the object.
        options: the chunk size it was written with, or where a link points.
        size: its size in bytes.
        mtime: when it was last written.
        chunks: how many chunks hold its data.
        digest: ``"SHA-256=<base64url>"`` of its data.
        deleted: it was deleted (this is its delete marker).
    """

    name: str
    bucket: str
    nuid: str = ""
    description: str | None = None
    headers: dict[str, str | list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: ObjectMetaOptions | None = None
    size: int = 0
    mtime: datetime.datetime | None = None
    chunks: int = 0
    digest: str | None = None
    deleted: bool = False

    @property
    def is_link(self) -> bool:
        """True when this entry is a link to another object or bucket, not data."""
        return self.options is not None and self.options.link is not None

    @property
    def meta(self) -> ObjectMeta:
        """The object's name, description, headers, metadata and options, as an ObjectMeta
        (what :meth:`ObjectStore.update_meta` takes).
        """
        return ObjectMeta(name=self.name, description=self.description, headers=self.headers,
                          metadata=self.metadata, options=self.options)


class ObjectStoreConfig(_Model, kw_only=True):
    """An object store's configuration. ``None`` for ``ttl`` or ``max_bytes`` means no limit.

    Attributes:
        bucket: the store's name (letters, digits, ``-`` and ``_``); its stream is ``OBJ_<bucket>``.
            May be left out when the bucket is named apart (nats-py's
            ``create_object_store(bucket, config=...)``).
        description: free text.
        ttl: seconds an object is kept (0: for ever).
        max_bytes: the most bytes the store holds (-1: no limit).
        storage: ``"file"`` (the default) or ``"memory"``.
        replicas: how many servers keep a copy (1 to 5).
        placement: which cluster or tagged servers hold the store.
        compression: store chunks compressed (S2).
        metadata: your own key-value strings kept with the store.
    """

    bucket: str = ""
    description: str | None = None
    ttl: float = 0.0
    max_bytes: int = -1
    storage: str = "file"
    replicas: int = 1
    placement: Placement | None = None
    compression: bool = False
    metadata: dict[str, str] | None = None

    def __post_init__(self) -> None:
        _none_is_no_limit(self, {"ttl": 0.0, "max_bytes": -1})

    def stream_config(self) -> StreamConfig:
        """The StreamConfig of the stream that holds this store (what other clients make too)."""
        validate_bucket(self.bucket)
        return StreamConfig(
            name=f"OBJ_{self.bucket}",
            description=self.description,
            subjects=[f"$O.{self.bucket}.C.>", f"$O.{self.bucket}.M.>"],
            max_age=self.ttl,
            max_bytes=self.max_bytes,
            storage=getattr(self.storage, "value", self.storage),
            num_replicas=self.replicas,
            placement=self.placement,
            discard="new",
            allow_rollup_hdrs=True,
            allow_direct=True,
            compression="s2" if self.compression else "none",
            metadata=self.metadata,
        )


class ObjectStoreStatus(BucketStatus):
    """An object store's state and settings (from its stream's info)."""

    @property
    def sealed(self) -> bool:
        """True once :meth:`ObjectStore.seal` made the store read-only."""
        return self.stream_info.config.sealed

    @property
    def size(self) -> int:
        """Bytes the store holds: every chunk and metadata message."""
        return self.stream_info.state.bytes

    def __repr__(self) -> str:
        return f"<ObjectStoreStatus {self.bucket} size={self.size} sealed={self.sealed}>"


def encode_name(name: str) -> str:
    """The meta-subject token for an object name (base64url with padding, as Go writes it)."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def digest_value(sha: Any) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()


def _decode_digest(value: str) -> bytes:
    kind, _, b64 = value.partition("=")
    if kind.upper() != "SHA-256" or not b64:
        raise ObjectStoreError(f"unsupported digest {value!r}")
    # Some writers omit the padding.
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))


_encoder = msgspec.json.Encoder()

def encode_info(info: ObjectInfo) -> bytes:
    """An object info's JSON with ``size``, ``chunks`` and ``mtime`` always present.

    Other clients wait for chunks that never come when ``size``/``chunks`` are
    missing from the info of an empty object. ``mtime`` is the time of writing,
    as nats.js and nats-py write it and show it; nats.go writes a zero time and
    shows the message's time, which readers that know better (this one) use.
    """
    body = msgspec.to_builtins(info.replace(mtime=None))
    body["size"] = info.size
    body["chunks"] = info.chunks
    body["mtime"] = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    return _encoder.encode(body)


def _lenient(raw: dict[str, Any]) -> dict[str, Any]:
    """Bring what other clients write into the shape of :class:`ObjectInfo`."""
    out = dict(raw)
    mtime = out.get("mtime")
    if not isinstance(mtime, str) or not mtime or mtime.startswith("0001-01-01"):
        out.pop("mtime", None)  # nats-py writes "" on deletes; the message time is used instead
    else:
        try:
            mtime = truncate_time(mtime)  # nanoseconds from nats.go: cut, not rounded
            msgspec.convert(mtime, datetime.datetime)
            out["mtime"] = mtime
        except msgspec.ValidationError:
            out.pop("mtime", None)
    for key in ("nuid", "description", "digest"):
        if out.get(key) is None:
            out.pop(key, None)
    for key in ("size", "chunks"):
        if out.get(key) is None:
            out.pop(key, None)
    headers = out.get("headers")
    if isinstance(headers, dict):
        # A single value stays a str: nats-py shows headers as they were put, and
        # turning "v" into ["v"] made a nats-py program's object read back changed.
        out["headers"] = {str(k): (v if isinstance(v, (list, str)) else [v]) for k, v in headers.items()}
    elif headers is not None:
        out.pop("headers")
    opts = out.get("options")
    if isinstance(opts, dict):
        opts = dict(opts)
        link = opts.get("link")
        if not link:  # {} or null: no link
            opts.pop("link", None)
        if opts.get("max_chunk_size") is None:
            opts.pop("max_chunk_size", None)
        out["options"] = opts
    elif opts is not None:
        out.pop("options")
    return out


def decode_info(data: bytes | memoryview, where: str) -> ObjectInfo:
    """Decode a stored object info, accepting what other clients write.

    Raises:
        ObjectStoreError: it is not an object info at all (``where`` names it).
    """
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ObjectStoreError(f"{where}: object info is not JSON: {bytes(data[:80])!r}") from exc
    if not isinstance(raw, dict):
        raise ObjectStoreError(f"{where}: object info is not a JSON object: {bytes(data[:80])!r}")
    try:
        return msgspec.convert(_lenient(raw), ObjectInfo, strict=False)
    except msgspec.ValidationError as exc:
        raise ObjectStoreError(f"{where}: cannot read object info ({exc}): {bytes(data[:80])!r}") from exc
