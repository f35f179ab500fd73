"""Stream configuration and state (``StreamConfig``, ``StreamInfo``, ...).

All are msgspec Structs, mutable as nats-py's dataclasses (``config.max_msgs
= 10``; ``replace()``/``evolve()`` give a changed copy instead; a config
being changed is not to be shared between threads). Durations are seconds
and fields left at their default are not sent. Fields this client does not model (a newer
server's, or another tool's) are kept in ``unknown_fields`` when a config or
info is decoded and sent back unchanged when it is encoded, so a
read-modify-write update (``js.update_stream(info.config.replace(...))``) never
turns off a setting this client does not know.
"""

from __future__ import annotations

import base64
import datetime
import enum
from typing import Any, TypeVar

import msgspec

from ..protocol.headers import Headers, encode_headers

_M = TypeVar("_M", bound="_Model")


class _Model(msgspec.Struct, kw_only=True, omit_defaults=True):
    def replace(self: _M, **changes: Any) -> _M:
        """A copy with ``changes`` applied."""
        from ._api import keep_sent

        new = msgspec.structs.replace(self, **changes)
        keep_sent(self, new)  # so its as_dict() still shows the zeros the server sent
        return new

    # nats-py's names for the same operations (its api classes are dataclasses).

    def evolve(self: _M, **changes: Any) -> _M:
        """A copy with ``changes`` applied (nats-py's name for :meth:`replace`)."""
        return self.replace(**changes)

    def as_dict(self) -> dict[str, Any]:
        """nats-py's ``as_dict()``: the fields nats-py models that are not ``None``.

        A decoded answer keeps every field the server sent, zeros and ``False``
        included; a field the server left out, or one a built config leaves at its
        default, is left out, unless nats-py always writes it (``duplicate_window``,
        ``max_age``, ``ack_wait`` ...). Fields nats-py does not model (``ts``,
        ``first_ts``, ``unknown_fields`` ...) are left out. Durations are
        nanoseconds; times are ``datetime`` objects, or RFC 3339 text where nats-py
        writes text (``ConsumerInfo.created``, ``SequenceInfo.last_active`` ...).

        Returns:
            A new dict (nested models are dicts too).
        """
        from ._api import nats_py_dict

        return nats_py_dict(self)

    @classmethod
    def from_response(cls: type[_M], resp: dict[str, Any]) -> _M:
        """Decode the server's JSON form (nats-py's name; durations in nanoseconds).

        Raises:
            InvalidResponseError: ``resp`` does not fit this class.
        """
        from ._api import from_wire

        return from_wire(resp, cls)


def _none_is_no_limit(model: msgspec.Struct, limits: dict[str, Any]) -> None:
    """``None`` for an optional limit means "no limit": store the value that says so on the wire."""
    for field, unlimited in limits.items():
        if getattr(model, field) is None:
            msgspec.structs.force_setattr(model, field, unlimited)


def equal_but_ts(a: msgspec.Struct, b: object) -> bool:
    """Two answers of the server equal in everything but the time they were answered
    (``ts``), as nats-py's info classes, which have no ``ts``, compare."""
    if type(a) is not type(b):
        return False
    assert isinstance(b, msgspec.Struct)
    return all(getattr(a, f) == getattr(b, f) for f in a.__struct_fields__ if f != "ts")


class _Open(_Model, kw_only=True, dict=True):
    """A model that keeps the JSON fields it does not know (see the module docstring).

    ``dict=True`` gives a decoded instance room to remember which keys the server
    sent (not a field: equality, ``repr`` and encoding ignore it), so that
    :meth:`as_dict` keeps a zero the server sent and leaves out one it did not.
    """

    #: JSON fields of the server's answer that this client does not model, in
    #: wire form (durations in nanoseconds); sent back as they are.
    unknown_fields: dict[str, Any] | None = None


class RetentionPolicy(str, enum.Enum):
    """When a stream lets go of a message: at its limits, once every interested consumer acked it, or
    once one consumer acked it (a work queue).
    """

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(str, enum.Enum):
    """Where a stream keeps its messages: on disk or in memory."""

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(str, enum.Enum):
    """What a full stream does: drop its oldest messages, or refuse new ones."""

    OLD = "old"
    NEW = "new"


class StoreCompression(str, enum.Enum):
    """How a stream compresses what it stores on disk: not at all, or with S2."""

    NONE = "none"
    S2 = "s2"


class Placement(_Open, kw_only=True):
    """Which servers hold a stream: a cluster, and servers with given tags.

    Attributes:
        cluster: the cluster's name.
        tags: only servers carrying every one of these tags.
    """

    cluster: str | None = None
    tags: list[str] | None = None


class SubjectTransform(_Open, kw_only=True):
    """A rewrite of subjects as messages are stored or sourced.

    Attributes:
        src: the subjects matched (wildcards allowed).
        dest: what they become (``{{wildcard(1)}}`` and other mapping functions allowed).
    """

    src: str
    dest: str


class RePublish(_Open, kw_only=True):
    """Publish a copy of every stored message to another subject (after it is stored).

    Attributes:
        src: the stored subjects to republish (default: all).
        dest: the subject the copy goes to (mapping functions allowed).
        headers_only: send only the headers (and the size), not the data.
    """

    src: str | None = None
    dest: str
    headers_only: bool = False


class ExternalStream(_Open, kw_only=True):
    """Where a mirror or source reads from another account or domain: that
    JetStream's API prefix (``$JS.<domain>.API``) and, for a push-based
    source, its delivery prefix.

    Attributes:
        api: the API prefix of the other JetStream.
        deliver: the subject prefix it delivers to (push-based sources).
    """

    api: str
    deliver: str | None = None


class StreamConsumerSource(_Open, kw_only=True):
    """A durable consumer a source or mirror reads through (server 2.14+).

    Attributes:
        name: the consumer's name.
        deliver_subject: the subject it delivers to.
    """

    name: str | None = None
    deliver_subject: str | None = None


class StreamSource(_Open, kw_only=True):
    """A stream to mirror or source from (ADR-57 for key-value buckets).

    Attributes:
        name: the origin stream's name.
        opt_start_seq: start at this sequence of the origin.
        opt_start_time: start at the first message stored at or after this time.
        filter_subject: copy only messages on these subjects.
        subject_transforms: copy only messages matched by these, with their subjects rewritten.
        external: the API and deliver prefixes of a stream in another account or domain.
        domain: another JetStream domain to read from; sent as ``external``
            with its API prefix.
        consumer: a durable consumer of the origin to read through (server 2.14+).
    """

    name: str
    opt_start_seq: int | None = None
    opt_start_time: datetime.datetime | None = None
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None
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


class StreamConsumerLimits(_Open, kw_only=True):
    inactive_threshold: float | None = None
    max_ack_pending: int | None = None


class PersistMode(str, enum.Enum):
    """How a file stream writes to disk: ``default`` (synced per the server's settings) or ``async``
    (faster, may lose the last writes in a crash; server 2.12+).
    """

    DEFAULT = "default"
    ASYNC = "async"


class StreamConfig(_Open, kw_only=True):
    """How a stream stores messages. Only ``name`` is required (to send it: a config
    may be built without one and named later, as nats-py's ``StreamConfig()``).

    Options a server older than the one they need would silently drop
    (``allow_msg_ttl``, ``subject_delete_marker_ttl``: 2.11; ``allow_msg_counter``,
    ``allow_atomic``, ``allow_msg_schedules``, ``persist_mode``: 2.12;
    ``allow_batched``: 2.14) raise FeatureNotSupportedError before anything is sent.
    Durations are seconds. ``None`` for a limit (``max_msgs``, ``max_bytes``,
    ``max_age`` ...) means no limit, as -1 (0 for ``max_age``) does.

    Attributes:
        name: the stream's name (no whitespace, ``.``, ``*``, ``>``, ``/`` or ``\\``).
        description: free text.
        subjects: the subjects it stores (wildcards allowed); none for a mirror.
        retention: ``"limits"``, ``"interest"`` or ``"workqueue"`` (:class:`RetentionPolicy`).
        max_consumers: the most consumers it may have (-1: no limit).
        max_msgs: the most messages it keeps (-1: no limit).
        max_bytes: the most bytes it keeps (-1: no limit).
        discard: ``"old"`` (drop the oldest when full) or ``"new"`` (refuse new messages).
        discard_new_per_subject: with ``discard="new"``, refuse per subject at ``max_msgs_per_subject``.
        max_age: seconds a message is kept (0: for ever).
        max_msgs_per_subject: the most messages kept per subject (-1: no limit).
        max_msg_size: the largest message accepted, in bytes (-1: the server's max_payload).
        storage: ``"file"`` or ``"memory"``.
        num_replicas: how many servers keep a copy (1 to 5).
        no_ack: do not answer publishes with a PubAck.
        duplicate_window: seconds a ``msg_id`` is remembered to drop duplicates (0: two minutes).
        placement: the cluster or tagged servers that hold it.
        mirror: the stream this one mirrors (then no ``subjects``).
        sources: streams whose messages are copied into this one.
        sealed: no more messages, deletes or purges (set by an update; cannot be undone).
        deny_delete: refuse deleting single messages.
        deny_purge: refuse purges.
        allow_rollup_hdrs: honour the ``Nats-Rollup`` header (a message replaces its subject's or the stream's).
        allow_direct: answer direct gets from every replica (faster reads).
        mirror_direct: a mirror answers direct gets for its origin.
        republish: copy every stored message to another subject.
        subject_transform: rewrite subjects as messages are stored.
        compression: ``"none"`` or ``"s2"`` for file storage.
        first_seq: the sequence of the first message (new streams only).
        metadata: your own key-value strings kept with the stream.
        consumer_limits: defaults and caps for its consumers' ``inactive_threshold`` and ``max_ack_pending``.
        allow_msg_ttl: honour a per-message TTL (the ``ttl=`` of publish; server 2.11+).
        subject_delete_marker_ttl: seconds a marker left by ``max_age`` or a purge is kept (server 2.11+).
        allow_msg_counter: the stream is a counter (``Nats-Incr``; server 2.12+).
        allow_atomic: accept atomic batch publishes (server 2.12+).
        allow_msg_schedules: accept scheduled messages (server 2.12+).
        persist_mode: ``"default"`` or ``"async"`` disk writes (server 2.12+).
        allow_batched: accept fast batch publishes (server 2.14+).
        template_owner: the stream template that made it (templates are gone from new servers).
    """

    name: str = ""
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


class LostStreamData(_Open, kw_only=True):
    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(_Open, kw_only=True):
    """What a stream holds now.

    Attributes:
        messages: messages stored.
        bytes: bytes stored.
        first_seq: the sequence of the first stored message.
        first_ts: when the first stored message was stored.
        last_seq: the sequence of the last stored message.
        last_ts: when the last message was stored (``None`` for an empty stream).
        consumer_count: how many consumers it has.
        deleted: sequences deleted between the first and the last (``info(deleted_details=True)``).
        num_deleted: how many sequences are deleted between the first and the last.
        num_subjects: how many distinct subjects it stores.
        subjects: messages per subject (``info(subjects_filter=...)``).
        lost: messages and bytes lost (damaged storage).
    """

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


class PeerInfo(_Open, kw_only=True):
    name: str
    current: bool = False
    offline: bool = False
    active: float = 0.0
    lag: int = 0


class ClusterInfo(_Open, kw_only=True):
    name: str | None = None
    raft_group: str | None = None
    leader: str | None = None
    leader_since: datetime.datetime | None = None
    system_account: bool = False
    traffic_account: str | None = None
    replicas: list[PeerInfo] | None = None

    @property
    def traffic_acc(self) -> str | None:
        """nats-py's name for :attr:`traffic_account`."""
        return self.traffic_account

    @classmethod
    def from_response(cls, resp: dict[str, Any]) -> ClusterInfo:
        """Decode the server's JSON form; nats-py's key ``traffic_acc`` is read as
        ``traffic_account`` (nats-py's from_response takes its own field names).

        Raises:
            InvalidResponseError: ``resp`` does not fit this class.
        """
        if "traffic_acc" in resp and "traffic_account" not in resp:
            resp = {("traffic_account" if k == "traffic_acc" else k): v for k, v in resp.items()}
        return super().from_response(resp)


class StreamSourceInfo(_Open, kw_only=True):
    name: str
    lag: int = 0
    active: float = 0.0
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None


class StreamInfo(_Open, kw_only=True):
    """A stream's configuration and state, as the server answered.

    Attributes:
        config: its configuration (as the server holds it, defaults filled in).
        created: when it was made.
        state: what it holds now.
        cluster: its cluster, leader and replicas (clustered servers).
        mirror: how far its mirror is (for a mirror).
        sources: how far each source is.
        did_create: ``True`` when the request that answered made the stream (the
            server says so in a create's answer, server 2.11+); ``None`` otherwise.
        ts: the server's time of the answer.
    """

    config: StreamConfig
    created: datetime.datetime | None = None
    state: StreamState = msgspec.field(default_factory=StreamState)
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    did_create: bool | None = None
    ts: datetime.datetime | None = None

    def __eq__(self, other: object) -> bool:
        return equal_but_ts(self, other)


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

    @property
    def hdrs(self) -> str | None:
        """The headers in their wire form, base64-encoded as the stream API sends them
        (nats-py's field), or ``None`` when the message has none."""
        if not self.headers:
            return None
        return base64.b64encode(encode_headers(self.headers)).decode()

    def as_dict(self) -> dict[str, Any]:
        """nats-py's ``as_dict()``: the fields that are not ``None``.

        ``headers`` is a plain dict (first value by key), ``hdrs`` the encoded
        headers as base64 text and ``time`` a ``datetime``.

        Returns:
            A new dict with ``subject``, ``seq``, ``data`` and, when known,
            ``hdrs``, ``headers`` and ``time``.
        """
        out: dict[str, Any] = {"subject": self.subject, "seq": self.seq, "data": self.data}
        if self.headers:
            out["hdrs"] = self.hdrs
            out["headers"] = dict(self.headers)
        # ``stream`` is left out: nats-py's get_msg() never fills it, so its as_dict() has none.
        if self.time is not None:
            out["time"] = self.time
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RawStreamMsg):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RawStreamMsg(stream={self.stream!r}, seq={self.seq}, subject={self.subject!r}, "
                f"data={self.data[:40]!r})")
