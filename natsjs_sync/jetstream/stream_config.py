"""Stream configuration and state (``StreamConfig``, ``StreamInfo``, ...).

All are frozen msgspec Structs: durations are seconds and fields left at
their default are not sent. Fields this client does not model (a newer
server's, or another tool's) are kept in ``unknown_fields`` when a config or
info is decoded and sent back unchanged when it is encoded, so a
read-modify-write update (``js.update_stream(info.config.replace(...))``) never
turns off a setting this client does not know.
"""

from __future__ import annotations

import datetime
import enum
from typing import Any, TypeVar

import msgspec

from ..protocol.headers import Headers

_M = TypeVar("_M", bound="_Model")


class _Model(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    def replace(self: _M, **changes: Any) -> _M:
        """A copy with ``changes`` applied."""
        return msgspec.structs.replace(self, **changes)


def _none_is_no_limit(model: msgspec.Struct, limits: dict[str, Any]) -> None:
    """``None`` for an optional limit means "no limit": store the value that says so on the wire."""
    for field, unlimited in limits.items():
        if getattr(model, field) is None:
            msgspec.structs.force_setattr(model, field, unlimited)


class _Open(_Model, frozen=True, kw_only=True):
    """A model that keeps the JSON fields it does not know (see the module docstring)."""

    #: JSON fields of the server's answer that this client does not model, in
    #: wire form (durations in nanoseconds); sent back as they are.
    unknown_fields: dict[str, Any] | None = None


class RetentionPolicy(str, enum.Enum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(str, enum.Enum):
    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(str, enum.Enum):
    OLD = "old"
    NEW = "new"


class StoreCompression(str, enum.Enum):
    NONE = "none"
    S2 = "s2"


class Placement(_Open, frozen=True, kw_only=True):
    cluster: str | None = None
    tags: list[str] | None = None


class SubjectTransform(_Open, frozen=True, kw_only=True):
    src: str
    dest: str


class RePublish(_Open, frozen=True, kw_only=True):
    src: str | None = None
    dest: str
    headers_only: bool = False


class ExternalStream(_Open, frozen=True, kw_only=True):
    """Where a mirror or source reads from another account or domain: that
    JetStream's API prefix (``$JS.<domain>.API``) and, for a push-based
    source, its delivery prefix."""

    api: str
    deliver: str | None = None


class StreamConsumerSource(_Open, frozen=True, kw_only=True):
    """A durable consumer a source or mirror reads through (server 2.14+)."""

    name: str | None = None
    deliver_subject: str | None = None


class StreamSource(_Open, frozen=True, kw_only=True):
    """A stream to mirror or source from (ADR-57 for key-value buckets)."""

    name: str
    opt_start_seq: int | None = None
    opt_start_time: datetime.datetime | None = None
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None
    #: Another JetStream domain to read from; sent as ``external`` with its API prefix.
    domain: str | None = None
    consumer: StreamConsumerSource | None = None


def _source_on_the_wire(src: StreamSource) -> StreamSource:
    # The server knows no "domain" in a source: it is the API prefix of another
    # JetStream domain, sent as ``external`` (what nats.go sends).
    if not src.domain:
        return src if src.domain is None else src.replace(domain=None)
    if src.external is not None:
        raise ValueError(f"source {src.name!r} sets both domain and external: give one")
    return src.replace(domain=None, external=ExternalStream(api=f"$JS.{src.domain}.API"))


def sources_on_the_wire(cfg: StreamConfig) -> StreamConfig:
    """``cfg`` with each mirror/source ``domain`` turned into its ``external`` API prefix."""
    if not (cfg.mirror is not None and cfg.mirror.domain is not None) \
            and not any(s.domain is not None for s in cfg.sources or ()):
        return cfg
    mirror = _source_on_the_wire(cfg.mirror) if cfg.mirror is not None else None
    sources = [_source_on_the_wire(s) for s in cfg.sources] if cfg.sources is not None else None
    return cfg.replace(mirror=mirror, sources=sources)


class StreamConsumerLimits(_Open, frozen=True, kw_only=True):
    inactive_threshold: float | None = None
    max_ack_pending: int | None = None


class PersistMode(str, enum.Enum):
    DEFAULT = "default"
    ASYNC = "async"


class StreamConfig(_Open, frozen=True, kw_only=True):
    """How a stream stores messages. Only ``name`` is required.

    Options a server older than the one they need would silently drop
    (``allow_msg_ttl``, ``subject_delete_marker_ttl``: 2.11; ``allow_msg_counter``,
    ``allow_atomic``, ``allow_msg_schedules``, ``persist_mode``: 2.12;
    ``allow_batched``: 2.14) raise FeatureNotSupportedError before anything is sent.
    """

    name: str
    description: str | None = None
    subjects: list[str] | None = None
    retention: str = "limits"
    max_consumers: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    discard: str = "old"
    discard_new_per_subject: bool = False
    max_age: float = 0.0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    storage: str = "file"
    num_replicas: int = 1
    no_ack: bool = False
    duplicate_window: float = 0.0
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] | None = None
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    allow_direct: bool = False
    mirror_direct: bool = False
    republish: RePublish | None = None
    subject_transform: SubjectTransform | None = None
    compression: str = "none"
    first_seq: int = 0
    metadata: dict[str, str] | None = None
    consumer_limits: StreamConsumerLimits | None = None
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl: float = 0.0
    allow_msg_counter: bool = False
    allow_atomic: bool = False
    allow_msg_schedules: bool = False
    persist_mode: str | None = None
    allow_batched: bool = False
    template_owner: str | None = None

    def __post_init__(self) -> None:
        _none_is_no_limit(self, _STREAM_LIMITS)


#: The limits of a stream that may be given as ``None`` (no limit).
_STREAM_LIMITS: dict[str, Any] = {
    "max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0.0, "max_msgs_per_subject": -1,
    "max_msg_size": -1,
}


class LostStreamData(_Open, frozen=True, kw_only=True):
    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(_Open, frozen=True, kw_only=True):
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime.datetime | None = None
    last_seq: int = 0
    last_ts: datetime.datetime | None = None
    consumer_count: int = 0
    deleted: list[int] | None = None
    num_deleted: int = 0
    num_subjects: int = 0
    subjects: dict[str, int] | None = None
    lost: LostStreamData | None = None


class PeerInfo(_Open, frozen=True, kw_only=True):
    name: str
    current: bool = False
    offline: bool = False
    active: float = 0.0
    lag: int = 0


class ClusterInfo(_Open, frozen=True, kw_only=True):
    name: str | None = None
    raft_group: str | None = None
    leader: str | None = None
    leader_since: datetime.datetime | None = None
    system_account: bool = False
    traffic_account: str | None = None
    replicas: list[PeerInfo] | None = None


class StreamSourceInfo(_Open, frozen=True, kw_only=True):
    name: str
    lag: int = 0
    active: float = 0.0
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None


class StreamInfo(_Open, frozen=True, kw_only=True):
    config: StreamConfig
    created: datetime.datetime | None = None
    state: StreamState = StreamState()
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    ts: datetime.datetime | None = None


class RawStreamMsg:
    """A message read from a stream by sequence or subject (not through a consumer).

    ``headers`` is a :class:`~natsjs_sync.Headers` (first value by key,
    ``get_all`` for repeated keys) or ``None``, as on :class:`~natsjs_sync.Msg`.
    """

    __slots__ = ("data", "headers", "seq", "stream", "subject", "time")

    def __init__(self, subject: str, seq: int, data: bytes = b"", headers: Headers | None = None,
                 time: datetime.datetime | None = None, stream: str | None = None):
        self.subject = subject
        self.seq = seq
        self.data = data
        self.headers = headers
        self.time = time
        self.stream = stream

    def header(self, key: str) -> str | None:
        """The first value of a header, or ``None``."""
        return self.headers.get(key) if self.headers else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RawStreamMsg):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RawStreamMsg(stream={self.stream!r}, seq={self.seq}, subject={self.subject!r}, "
                f"data={self.data[:40]!r})")
