"""Key-value store on JetStream (ADR-8, ADR-48, ADR-57).

A bucket ``B`` is the stream ``KV_B`` on subjects ``$KV.B.>``; key ``k`` is the
subject ``$KV.B.k``, its value the newest message there and its revision that
message's stream sequence. Deletes and purges are messages too, marked by the
``KV-Operation`` header (``DEL``, ``PURGE``; a purge also rolls the subject up
to itself). Since server 2.11 the server may write its own markers (header
``Nats-Marker-Reason``) when a key's TTL or the bucket's limits remove it.

Reads of the latest value use direct get (any replica answers); listing keys,
history and watching use an ordered consumer with the key filters applied on
the server, never a fetch of every key.
"""

from __future__ import annotations

import copy
import datetime
import enum
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import (
    BadBucketError,
    BadSubscriptionError,
    BucketExistsError,
    InvalidKeyError,
    KeyDecodeError,
    KeyDeletedError,
    KeyHistoryNotFoundError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    KvCodecError,
    MsgNotFoundError,
    NoKeysError,
    StreamNotFoundError,
    WrongLastSequenceError,
)
from ..kvcodec import BucketCodecs, KeyCodec, ValueCodec
from ..msg import Msg
from ..protocol.headers import Headers
from ..protocol.subjects import subject_matches
from ._bucket import BucketStatus, bucket_stream, open_bucket_stream, validate_bucket
from .message import parse_metadata
from .publish_options import msg_ttl_value
from .stream_config import Placement, RePublish, StreamConfig, StreamSource, SubjectTransform, _Model, _none_is_no_limit
from .watcher import Watcher

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .._core.spi import CoreLink
    from ..codecs import Codec, TypedKeyValue
    from ..errors import PayloadDecodeError
    from .context import JetStream
    from .ordered import OrderedConsumer
    from .stream import Stream

KV_OPERATION = "KV-Operation"
MARKER_REASON = "Nats-Marker-Reason"
MAX_HISTORY = 64
_DEFAULT_DUPLICATE_WINDOW = 120.0
_PURGE_DELETES_THRESHOLD = 30 * 60.0

_KEY_RE = re.compile(r"[-/_=.a-zA-Z0-9]+")
_FILTER_RE = re.compile(r"[-/_=.a-zA-Z0-9*>]+")


def validate_key(key: object, filter: bool = False) -> str:  # noqa: A002
    """Keys: letters, digits and ``-/_=.``, no empty token; filters also ``*`` and ``>``."""
    what = "key filter" if filter else "key"
    if not isinstance(key, str) or not key:
        raise InvalidKeyError(f"{what} must be a non-empty str, got {key!r}")
    if not (_FILTER_RE if filter else _KEY_RE).fullmatch(key) or key.startswith(".") or key.endswith(".") \
            or ".." in key:
        raise InvalidKeyError(f"invalid {what} {key!r}")
    if filter:
        tokens = key.split(".")
        for i, tok in enumerate(tokens):
            if (">" in tok and (tok != ">" or i != len(tokens) - 1)) or ("*" in tok and tok != "*"):
                raise InvalidKeyError(f"invalid {what} {key!r}: wildcards must be whole tokens, '>' last")
    return key



#: nats-py's text of a key that is not there (never set, deleted or purged), which
#: programs match on; the exception's ``entry`` and ``op`` tell a deleted one apart.
_KEY_NOT_FOUND = "nats: key not found"

class KeyValueOp(str, enum.Enum):
    """What a revision of a key is: a value (``PUT``), a delete marker (``DEL``) or a purge marker
    (``PURGE``, which also removed the key's history).
    """

    PUT = "PUT"
    DEL = "DEL"
    PURGE = "PURGE"


class KeyValueConfig(_Model, kw_only=True):
    """A bucket's configuration. ``ttl`` and ``limit_marker_ttl`` are seconds.

    ``None`` for a limit (``ttl``, ``max_bytes``, ``max_value_size``,
    ``limit_marker_ttl``) means no limit.

    Attributes:
        bucket: the bucket's name (letters, digits, ``-`` and ``_``); its stream is ``KV_<bucket>``.
        description: free text.
        max_value_size: the largest value accepted, in bytes (-1: the server's max_payload).
        history: revisions kept per key (1 to 64).
        ttl: seconds a value is kept (0: for ever).
        max_bytes: the most bytes the bucket holds (-1: no limit).
        storage: ``"file"`` (the default) or ``"memory"``.
        replicas: how many servers keep a copy (1 to 5).
        placement: which cluster or tagged servers hold the bucket.
        republish: copy every change to another subject.
        mirror: the bucket this one mirrors (read-only copy).
        sources: buckets whose keys are copied into this one.
        compression: store values compressed (S2).
        metadata: your own key-value strings kept with the bucket.
        limit_marker_ttl: seconds a marker left when a key expires or is purged is kept; also
            enables ``create(key, ttl=...)`` (server 2.11+).
        direct: accepted for nats-py compatibility; buckets always allow direct gets.
    """

    bucket: str
    description: str | None = None
    max_value_size: int = -1
    history: int = 1
    ttl: float = 0.0
    max_bytes: int = -1
    storage: str = "file"
    replicas: int = 1
    placement: Placement | None = None
    republish: RePublish | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] | None = None
    compression: bool = False
    metadata: dict[str, str] | None = None
    limit_marker_ttl: float = 0.0
    direct: bool = True  # nats-py's name; buckets always allow direct get

    def __post_init__(self) -> None:
        _none_is_no_limit(self, {"max_value_size": -1, "ttl": 0.0, "max_bytes": -1, "limit_marker_ttl": 0.0})

    def stream_config(self) -> StreamConfig:
        """The stream that holds this bucket (what other clients make too).

        Raises:
            InvalidBucketNameError: the bucket name cannot be a stream's.
            KeyHistoryTooLargeError: ``history`` over 64 (nats-py's class; also a ValueError).
            ValueError: ``history`` below 1, a negative ``ttl`` or ``limit_marker_ttl``.
        """
        validate_bucket(self.bucket)
        if self.history > MAX_HISTORY:
            raise KeyHistoryTooLargeError(f"history must be between 1 and {MAX_HISTORY}")
        if self.history < 1:
            raise ValueError(f"history must be between 1 and {MAX_HISTORY}")
        if self.ttl < 0 or self.limit_marker_ttl < 0:
            raise ValueError("ttl and limit_marker_ttl must not be negative")
        dup = _DEFAULT_DUPLICATE_WINDOW
        if 0 < self.ttl < dup:
            dup = self.ttl
        fields: dict[str, Any] = dict(
            name=f"KV_{self.bucket}",
            description=self.description,
            max_msgs_per_subject=self.history,
            max_bytes=self.max_bytes,
            max_age=self.ttl,
            max_msg_size=self.max_value_size,
            storage=getattr(self.storage, "value", self.storage),
            num_replicas=self.replicas,
            placement=self.placement,
            allow_rollup_hdrs=True,
            deny_delete=True,
            duplicate_window=dup,
            max_msgs=-1,
            max_consumers=-1,
            allow_direct=True,
            republish=self.republish,
            compression="s2" if self.compression else "none",
            discard="new",
            metadata=self.metadata,
        )
        if self.limit_marker_ttl:
            fields["allow_msg_ttl"] = True
            fields["subject_delete_marker_ttl"] = self.limit_marker_ttl
        if self.mirror is not None:
            m = self.mirror
            if not m.name.startswith("KV_"):
                m = m.replace(name=f"KV_{m.name}")
            fields["mirror"] = m
            fields["mirror_direct"] = True
        else:
            fields["subjects"] = [f"$KV.{self.bucket}.>"]
            if self.sources:
                sources = []
                for src in self.sources:
                    if src.subject_transforms:
                        # Given transforms mean full control (any stream, its name as given), as in nats.go.
                        sources.append(src)
                        continue
                    origin = src.name[3:] if src.name.startswith("KV_") else src.name
                    src = src.replace(name=f"KV_{origin}")
                    if src.external is None or origin != self.bucket:
                        src = src.replace(subject_transforms=[
                            SubjectTransform(src=f"$KV.{origin}.>", dest=f"$KV.{self.bucket}.>")])
                    sources.append(src)
                fields["sources"] = sources
        return StreamConfig(**fields)


class KeyValueStatus(BucketStatus):
    """A bucket's state and settings (from its stream's info)."""

    @property
    def values(self) -> int:
        """Messages stored: values, history and delete markers."""
        return self.stream_info.state.messages

    @property
    def history(self) -> int:
        """How many revisions of each key are kept."""
        return self.stream_info.config.max_msgs_per_subject

    @property
    def bytes(self) -> int:
        """Bytes the bucket stores, history and markers included."""
        return self.stream_info.state.bytes

    @property
    def limit_marker_ttl(self) -> float:
        """Seconds a marker left by a limit (a key expired or purged) is kept (0: none left)."""
        return self.stream_info.config.subject_delete_marker_ttl

    @property
    def marker_ttl(self) -> float | None:
        """nats-py's name for :attr:`limit_marker_ttl`, with nats-py's answer for a bucket
        that leaves no markers: ``None`` (where :attr:`limit_marker_ttl` says 0)."""
        return self.stream_info.config.subject_delete_marker_ttl or None

    @property
    def config(self) -> KeyValueConfig:
        """The bucket's configuration, read back from its stream."""
        cfg = self.stream_info.config
        mirror = cfg.mirror
        if mirror is not None and mirror.name.startswith("KV_"):
            mirror = mirror.replace(name=mirror.name[3:])
        return KeyValueConfig(
            bucket=self.bucket,
            description=cfg.description,
            max_value_size=cfg.max_msg_size,
            history=cfg.max_msgs_per_subject,
            ttl=cfg.max_age,
            max_bytes=cfg.max_bytes,
            storage=str(getattr(cfg.storage, "value", cfg.storage)),
            replicas=cfg.num_replicas,
            placement=cfg.placement,
            republish=cfg.republish,
            mirror=mirror,
            sources=cfg.sources,
            compression=self.is_compressed,
            metadata=cfg.metadata,
            limit_marker_ttl=cfg.subject_delete_marker_ttl,
            direct=cfg.allow_direct,
        )

    def __repr__(self) -> str:
        return f"<KeyValueStatus {self.bucket} values={self.values} history={self.history} ttl={self.ttl}>"


class Entry:
    """One revision of a key: a value, or a delete/purge marker."""

    __slots__ = ("bucket", "created", "delta", "key", "operation", "revision", "value")

    def __init__(self, bucket: str, key: str, value: bytes, revision: int, created: datetime.datetime | None,
                 delta: int, operation: KeyValueOp):
        self.bucket = bucket
        self.key = key
        self.value = value
        self.revision = revision
        self.created = created
        self.delta = delta
        self.operation = operation

    def __repr__(self) -> str:
        return (f"Entry(key={self.key!r}, revision={self.revision}, operation={self.operation.value}, "
                f"value={self.value[:40]!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


def _operation(headers: Headers | None) -> KeyValueOp:
    if not headers:
        return KeyValueOp.PUT
    op = headers.get(KV_OPERATION)
    if op == "DEL":
        return KeyValueOp.DEL
    if op == "PURGE":
        return KeyValueOp.PURGE
    reason = headers.get(MARKER_REASON)
    if reason is not None:  # a server-written marker (TTL or limits expired the key)
        return KeyValueOp.DEL if reason == "Remove" else KeyValueOp.PURGE
    return KeyValueOp.PUT


def _value(value: bytes | bytearray | memoryview | str) -> bytes | bytearray | memoryview:
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"value must be bytes or str, not {type(value).__name__}")
    return value


class KeyValue:
    """A key-value bucket. Thread-safe; get one from ``js.key_value(bucket)``."""

    def __init__(self, js: JetStream, bucket: str, stream: Stream):
        self._js = js
        self.bucket = bucket
        self._stream = stream
        # The key and value codecs of this view (with_codecs()); None: keys and values as stored.
        self._codecs: BucketCodecs | None = None
        self.stream_name = stream.name
        cfg = stream.cached_info.config
        # A mirror holds the origin's subjects; writes go to the origin.
        origin = bucket
        if cfg.mirror is not None:
            origin = cfg.mirror.name[3:] if cfg.mirror.name.startswith("KV_") else cfg.mirror.name
        self._pre = f"$KV.{origin}."
        self._put_pre = self._pre
        if cfg.mirror is not None and cfg.mirror.external is not None and cfg.mirror.external.api:
            self._put_pre = f"{cfg.mirror.external.api}.$KV.{origin}."

    def with_codecs(self, key_codec: KeyCodec | None = None, value_codec: ValueCodec | None = None) -> KeyValue:
        """This bucket seen through a key codec and/or a value codec (:mod:`natsjs_sync.kvcodec`).

        Every call of the returned view encodes the keys and values it writes and
        filters it asks for, and decodes the keys and values it reads (``get``,
        ``keys``, ``list_keys``, ``history``, ``watch``); delete and purge markers
        keep their empty value. Only the *encoded* key must be a valid key, so a
        key codec lets any text be a key. The bucket itself is unchanged: this
        view and a plain one (or another client with the same codecs) share it.

        Raises:
            TypeError: a codec without ``encode``/``decode``.
        """
        view = copy.copy(self)
        view._codecs = BucketCodecs(key_codec, value_codec) if key_codec or value_codec else None
        return view

    # ------------------------------------------------------------------ reading

    def _subject(self, key: str, filter: bool = False, validate: bool = True) -> str:  # noqa: A002
        if self._codecs is None:
            return self._pre + (validate_key(key, filter) if validate else key)
        if not isinstance(key, str) or not key:
            raise InvalidKeyError(f"{'key filter' if filter else 'key'} must be a non-empty str, got {key!r}")
        stored = self._codecs.encode_filter(key) if filter else self._codecs.encode_key(key)
        try:
            return self._pre + validate_key(stored, filter)
        except InvalidKeyError as exc:
            raise InvalidKeyError(f"{'key filter' if filter else 'key'} {key!r} encodes to {stored!r}: {exc}") \
                from None

    def _entry_from_raw(self, key: str, raw: Any) -> Entry:
        op = _operation(raw.headers)
        value = raw.data
        if self._codecs is not None and op is KeyValueOp.PUT:
            value = self._codecs.decode_value(value, key)
        return Entry(self.bucket, key, value, raw.seq, raw.time, 0, op)

    def _encode_value(self, value: bytes | bytearray | memoryview | str) -> bytes | bytearray | memoryview:
        data = _value(value)
        return data if self._codecs is None else self._codecs.encode_value(bytes(data))

    def _last_entry(self, key: str, timeout: TimeoutArg = USE_DEFAULT, validate: bool = True) -> Entry | None:
        """The newest revision of ``key``, markers included; None when there is none."""
        try:
            raw = self._stream.get_last_msg_for_subject(self._subject(key, validate=validate), timeout=timeout)
        except MsgNotFoundError:
            return None
        return self._entry_from_raw(key, raw)

    def get(self, key: str, revision: int | None = None, timeout: TimeoutArg = USE_DEFAULT, *,
            validate_keys: bool = True) -> Entry:
        """The value of ``key`` (or the given revision of it).

        ``validate_keys=False`` (nats-py's keyword, on every call that takes a
        key) skips the client-side check of the key's characters.

        Raises:
            InvalidKeyError: ``key`` is not a valid key (``validate_keys`` on).
            KeyNotFoundError: no such key (or revision); when ``revision`` is another
                key's, the text names both subjects, as nats-py's: ``nats: key not found:
                expected '$KV.<bucket>.<key>', but got '$KV.<bucket>.<other>'``.
            KeyDeletedError: (a KeyNotFoundError) the key was deleted or purged; its
                ``entry`` is the marker's entry and ``op`` its operation, ``"DEL"`` or
                ``"PURGE"`` (as nats-py's KeyNotFoundError carries them).
        """
        if revision is None:
            entry = self._last_entry(key, timeout, validate_keys)
        else:
            subject = self._subject(key, validate=validate_keys)
            try:
                raw = self._stream.get_msg(revision, timeout=timeout)
            except MsgNotFoundError:
                raw = None
            if raw is not None and raw.subject != subject:
                # nats-py's text names both subjects (the revision is another key's)
                raise KeyNotFoundError(f"{_KEY_NOT_FOUND}: expected '{subject}', but got '{raw.subject}'")
            entry = self._entry_from_raw(key, raw) if raw is not None else None
        if entry is None:
            raise KeyNotFoundError(_KEY_NOT_FOUND)
        if entry.operation is not KeyValueOp.PUT:
            err = KeyDeletedError(_KEY_NOT_FOUND)  # nats-py's get() says the same of a deleted key
            err.entry = entry
            err.op = entry.operation.value  # a plain str, as nats-py's: it prints as "DEL", not "KeyValueOp.DEL"
            raise err
        return entry

    # ------------------------------------------------------------------ writing

    def _wrong_last(self, exc: WrongLastSequenceError, key: str) -> KeyWrongLastSequenceError:
        err = KeyWrongLastSequenceError(exc.description, code=exc.code, err_code=exc.err_code)
        err.key, err.bucket = key, self.bucket
        return err

    def _publish(self, key: str, value: bytes | bytearray | memoryview, headers: dict[str, str] | None,
                 last: int | None, timeout: TimeoutArg, validate: bool = True) -> int:
        subject = self._put_pre + self._subject(key, validate=validate)[len(self._pre):]
        try:
            ack = self._js.publish(subject, bytes(value), headers=headers, expected_last_subject_seq=last,
                                   timeout=timeout)
        except WrongLastSequenceError as exc:
            raise self._wrong_last(exc, key) from None
        return ack.seq

    def put(self, key: str, value: bytes | bytearray | memoryview | str, timeout: TimeoutArg = USE_DEFAULT, *,
            validate_keys: bool = True) -> int:
        """Set ``key``; returns the new revision."""
        return self._publish(key, self._encode_value(value), None, None, timeout, validate_keys)

    def update(self, key: str, value: bytes | bytearray | memoryview | str, last: int | None = None,
               timeout: TimeoutArg = USE_DEFAULT, *, validate_keys: bool = True) -> int:
        """Set ``key`` only if its latest revision is ``last`` (compare and set).

        Raises:
            WrongLastSequenceError: the key moved on (or does not exist, for ``last`` > 0).
        """
        return self._publish(key, self._encode_value(value), None, last if last is not None else 0, timeout,
                             validate_keys)

    def create(self, key: str, value: bytes | bytearray | memoryview | str, ttl: float | str | None = None,
               timeout: TimeoutArg = USE_DEFAULT, *, msg_ttl: float | str | None = None,
               validate_keys: bool = True) -> int:
        """Set ``key`` only if it has no value (never set, deleted or purged).

        ``msg_ttl`` is nats-py's name for ``ttl``.

        ``ttl`` (seconds) makes the key expire on its own (bucket with ``limit_marker_ttl``);
        ``None`` or ``0``: it does not expire.

        Raises:
            KeyExistsError: the key has a value.
            BadHeaderError: a negative ``ttl`` (nothing is sent).
        """
        data = self._encode_value(value)
        headers = None
        if ttl is None:
            ttl = msg_ttl
        ttl_value = msg_ttl_value(ttl)
        if ttl_value is not None:
            self._js._require("msg_ttl")
            headers = {"Nats-TTL": ttl_value}
        deadline = self._js._api.deadline(timeout)  # one budget for up to three requests
        try:
            return self._publish(key, data, headers, 0, deadline, validate_keys)
        except WrongLastSequenceError as exc:
            entry = self._last_entry(key, deadline, validate_keys)
            if entry is not None and entry.operation is not KeyValueOp.PUT:
                try:
                    return self._publish(key, data, headers, entry.revision, deadline, validate_keys)
                except WrongLastSequenceError:
                    pass
            raise self._wrong_last(exc, key) from None

    def delete(self, key: str, last: int | None = None, timeout: TimeoutArg = USE_DEFAULT, *,
               msg_ttl: float | str | None = None, validate_keys: bool = True) -> int:
        """Mark ``key`` deleted (history is kept); with ``last``, only at that revision.

        ``msg_ttl`` is accepted and ignored with a DeprecationWarning, as nats-py
        2.16 does (a TTL on a delete marker has no meaning in NATS KV; use
        :meth:`purge` with ``ttl``)."""
        headers = {KV_OPERATION: "DEL"}
        if msg_ttl is not None:
            warnings.warn("msg_ttl on delete() is deprecated and ignored; use create() or purge() for a TTL",
                          DeprecationWarning, stacklevel=2)
        return self._publish(key, b"", headers, last, timeout, validate_keys)

    def purge(self, key: str, last: int | None = None, ttl: float | str | None = None,
              timeout: TimeoutArg = USE_DEFAULT, *, msg_ttl: float | str | None = None) -> int:
        """Delete ``key`` and all its history, leaving one purge marker (which
        itself goes after ``ttl`` seconds, nats-py's ``msg_ttl``, on buckets with
        ``limit_marker_ttl``; ``None`` or ``0``: the marker stays).

        Raises:
            BadHeaderError: a negative ``ttl`` (nothing is sent).
        """
        if ttl is None:
            ttl = msg_ttl
        headers = {KV_OPERATION: "PURGE", "Nats-Rollup": "sub"}
        ttl_value = msg_ttl_value(ttl)
        if ttl_value is not None:
            self._js._require("msg_ttl")
            headers["Nats-TTL"] = ttl_value
        return self._publish(key, b"", headers, last, timeout)

    def purge_deletes(self, older_than: float | None = None, timeout: TimeoutArg = USE_DEFAULT,
                      olderthan: float | None = None) -> int:
        """Remove delete/purge markers and what is left behind them.

        Markers older than ``older_than`` seconds (nats-py: ``olderthan``;
        default 30 minutes; 0 or negative: all) go entirely; younger ones are
        kept alone. Returns how many keys were cleaned.

        Through a codec (:meth:`with_codecs`) the markers are those of the
        bucket, purged under the keys they are stored under, as orbit.go's
        ``kvcodec`` does: a stored key decoded and encoded again could name
        another key (or not decode at all, written without the codec).
        """
        if self._codecs is not None:
            return self.with_codecs().purge_deletes(older_than, timeout, olderthan)
        if older_than is None:
            older_than = olderthan
        threshold = _PURGE_DELETES_THRESHOLD if older_than is None else older_than
        deadline = self._js._api.deadline(timeout)
        markers = [e for e in self._initial(">", include_history=False, meta_only=True, timeout=deadline)
                   if e.operation is not KeyValueOp.PUT]
        now = datetime.datetime.now(datetime.timezone.utc)
        for entry in markers:
            keep = 0
            if threshold > 0 and entry.created is not None and (now - entry.created).total_seconds() < threshold:
                keep = 1
            self._stream.purge(subject=self._subject(entry.key, validate=False), keep=keep, timeout=deadline)
        return len(markers)

    # ------------------------------------------------------------------ listing and watching

    def _initial(self, *filters: str, include_history: bool = False, meta_only: bool = False,
                 ignore_deletes: bool = False, timeout: TimeoutArg = 30.0,
                 skip_foreign_keys: bool = False) -> list[Entry]:
        """The entries present now (not waiting for updates).

        ``skip_foreign_keys``: leave out the stored keys the key codec cannot
        decode instead of raising :class:`~natsjs_sync.errors.KeyDecodeError`.
        """
        out: list[Entry] = []
        deadline = timeout if isinstance(timeout, Deadline) else Deadline.of(timeout, 30.0)
        with self.watch(*filters, include_history=include_history, meta_only=meta_only,
                        ignore_deletes=ignore_deletes) as w:
            while True:
                try:
                    entry = w.next(timeout=deadline.remaining())
                except KeyDecodeError:
                    if skip_foreign_keys:
                        continue  # the watcher has moved past it
                    raise
                if entry is None:
                    return out
                out.append(entry)

    def keys(self, *patterns: str, filters: Sequence[str] | None = None, timeout: TimeoutArg = 30.0) -> list[str]:
        """Keys with a value (deleted ones left out).

        ``kv.keys()``, or matched on the server: ``kv.keys("users.*")``,
        ``kv.keys("a.>", "b.>")``. ``kv.keys(filters=[...])`` keeps the keys
        that contain one of those strings (nats-py's meaning) or match it as a
        subject filter (``"users.*"``).

        Through a key codec (:meth:`with_codecs`), a stored key the codec
        cannot decode (written without it) is left out, as orbit.go's
        ``kvcodec`` lister does: a plain view of the bucket lists it.

        Raises:
            NoKeysError: no key matched (as nats-py and nats.go do).
        """
        keys = [e.key for e in self._initial(*(patterns or (">",)), meta_only=True, ignore_deletes=True,
                                              timeout=timeout, skip_foreign_keys=True)]
        if filters:
            keys = [k for k in keys if any(f in k or subject_matches(f, k) for f in filters)]
        if not keys:
            raise NoKeysError(f"no keys found in bucket {self.bucket!r}")
        return keys

    def list_keys(self, *patterns: str, filters: Sequence[str] | None = None,
                  timeout: TimeoutArg = 30.0) -> KeyLister:
        """Keys with a value, streamed as the server sends them (nats.go's ``ListKeys``).

        Unlike :meth:`keys` nothing is collected in memory: iterate the lister,
        and :meth:`KeyLister.stop` (or leaving a ``with`` block) ends it early.
        ``timeout`` bounds each wait for the next key. Through a key codec, a
        stored key it cannot decode is left out, as in :meth:`keys`.
        """
        fs = list(patterns) + list(filters or [])
        return KeyLister(self.watch(*(fs or [">"]), meta_only=True, ignore_deletes=True), timeout, self._js._api.core)

    def history(self, key: str, timeout: TimeoutArg = 30.0) -> list[Entry]:
        """Every stored revision of ``key``, oldest first.

        Through a codec, a revision that does not decode raises as in
        :meth:`watch` (the stored keys are the encoding of ``key``, so only a
        wildcard filter meets keys written without the codec).

        Raises:
            KeyNotFoundError: no revision of ``key`` (also a NoKeysError, nats-py's name).
        """
        entries = self._initial(key, include_history=True, timeout=timeout)
        if not entries:
            raise KeyHistoryNotFoundError("nats: no keys found")  # nats-py's text (its NoKeysError)
        return entries

    def watch(self, *keys: str, include_history: bool = False, ignore_deletes: bool = False,
              updates_only: bool = False, meta_only: bool = False, resume_from_revision: int | None = None,
              headers_only: bool = False, inactive_threshold: float | None = None) -> KeyWatcher:
        """Follow ``keys`` (filters allowed; none: every key).

        Yields the current values first (all revisions with
        ``include_history``), then ``None`` once (end of the initial values),
        then every change as it happens. ``updates_only`` skips the initial
        values (and the ``None``); ``resume_from_revision`` starts at that
        revision instead. ``meta_only`` leaves the values out; ``headers_only`` is
        taken and, as in nats-py, changes nothing. ``inactive_threshold`` (seconds;
        0 or None: the default, 300) is how long the server keeps the watch's
        consumer once nobody is there to read it.

        Through a codec (:meth:`with_codecs`), an entry whose stored key or
        value the codec cannot decode (written without it) raises
        :class:`~natsjs_sync.errors.KeyDecodeError` /
        :class:`~natsjs_sync.errors.ValueDecodeError` from ``next()`` (and
        ends a ``for`` loop over it); the watcher keeps its place, and the
        next call goes on with the following entry. (orbit.go's ``kvcodec`` watcher hands such an
        entry out under its stored key instead; a stored key passed off as a
        decoded one would be written back under another key, so here it is
        an error. :meth:`keys` and :meth:`list_keys` leave such keys out.)
        """
        if include_history and updates_only:
            raise ValueError("include_history and updates_only do not go together")
        subjects = [self._subject(k, filter=True) for k in (keys or (">",))]
        if updates_only:
            policy: dict[str, Any] = {"deliver_policy": "new"}
        elif resume_from_revision is not None:
            policy = {"deliver_policy": "by_start_sequence", "opt_start_seq": resume_from_revision}
        elif include_history:
            policy = {"deliver_policy": "all"}
        else:
            policy = {"deliver_policy": "last_per_subject"}
        if inactive_threshold:  # 0 is nats-py's "the default" too (the server would take 5 s)
            policy["inactive_threshold"] = inactive_threshold
        del headers_only  # nats-py's watch takes it and sends meta_only instead
        oc = self._js.ordered_consumer(self.stream_name, filter_subjects=subjects, headers_only=meta_only,
                                       **policy)
        return KeyWatcher(self, oc, ignore_deletes, initial=not updates_only, values=not meta_only)

    def watch_all(self, **options: Any) -> KeyWatcher:
        """:meth:`watch` every key."""
        return self.watch(">", **options)

    #: nats-py's name for :meth:`watch_all`.
    watchall = watch_all

    # ------------------------------------------------------------------ bucket

    def typed(self, type_: type[_T], codec: Codec | None = None,
              on_decode_error: Callable[[Entry, PayloadDecodeError], None] | None = None) -> TypedKeyValue[_T]:
        """A typed view of this bucket: put values, get and watch decoded entries.

        Args:
            type_: the type of the values.
            codec: their encoding (default :data:`~natsjs_sync.codecs.JSON`).
            on_decode_error: ``cb(entry, error)`` for entries that do not decode
                in history and watches (skipped then); without it they raise.
        """
        from ..codecs.typed import TypedKeyValue

        return TypedKeyValue(self, type_, codec, on_decode_error)

    def status(self, timeout: TimeoutArg = USE_DEFAULT) -> KeyValueStatus:
        """The bucket's state and settings, read from the server now."""
        return KeyValueStatus(self._stream.info(timeout=timeout), self.bucket)

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket}>"


class KeyWatcher(Watcher[Entry]):
    """Entries of a watch, then ``None`` once at the end of the initial values.

    Iterate it, or call :meth:`next`/:meth:`updates` with a timeout. :meth:`stop`
    (from any thread) ends the iteration; it never blocks on the reader.
    """

    def __init__(self, kv: KeyValue, oc: OrderedConsumer, ignore_deletes: bool, initial: bool,
                 values: bool = True):
        self._bucket = kv.bucket
        self._prefix_len = len(kv._pre)
        self._codecs = kv._codecs
        self._values = values  # False: a meta-only watch, whose messages carry no value to decode
        super().__init__(oc, ignore_deletes, initial)

    def _decode(self, msg: Msg) -> tuple[Entry | Exception, int, bool]:
        md = parse_metadata(msg.reply)
        op = _operation(msg.headers)
        key, value = msg.subject[self._prefix_len:], msg.data
        if self._codecs is not None:
            try:
                key = self._codecs.decode_key(key)
                if self._values and op is KeyValueOp.PUT:
                    value = self._codecs.decode_value(value, key)
            except KvCodecError as exc:  # raised by next(), after the watch kept its place
                return exc, md.num_pending, op is not KeyValueOp.PUT
        entry = Entry(self._bucket, key, value, md.sequence.stream, md.timestamp, md.num_pending, op)
        return entry, entry.delta, op is not KeyValueOp.PUT


# ---------------------------------------------------------------------- bucket management

# What makes a bucket the bucket it is. The reference clients differ in the rest
# while making the same bucket: nats-py turns on per-message TTLs, nats.go only
# with limit markers; nats.js sets neither deny_delete nor the duplicate window;
# old clients discarded old; the server adds metadata of its own (ADR-44).
_DEFINING = ("subjects", "max_msgs_per_subject", "max_bytes", "max_age", "max_msg_size", "storage", "num_replicas",
             "compression", "republish", "subject_delete_marker_ttl", "allow_rollup_hdrs", "description")


class KeyLister:
    """The keys of a bucket, one at a time, from :meth:`KeyValue.list_keys`.

    Iterate it once; the iteration ends after the last key present when it
    began. :meth:`stop` ends it early from any thread.
    """

    def __init__(self, watcher: KeyWatcher, timeout: TimeoutArg, core: CoreLink):
        self._watcher = watcher
        self._timeout = timeout
        self._core = core

    def __iter__(self) -> Iterator[str]:
        # Stops the watcher at the end; a close by the garbage collector hands it to a core thread.
        with self._core.releasing(self._watcher.stop):
            while True:
                try:
                    entry = self._watcher.next(self._timeout)
                except BadSubscriptionError:
                    return
                except KeyDecodeError:
                    continue  # a key written without the view's key codec: not listed (orbit.go's kvcodec)
                if entry is None:
                    return
                yield entry.key

    def stop(self) -> None:
        """End the listing (deletes its server-side consumer)."""
        self._watcher.stop()

    def __enter__(self) -> KeyLister:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _same_bucket(have: StreamConfig, want: StreamConfig) -> bool:
    """Whether the existing stream ``have`` is the bucket ``want`` describes."""
    def norm(v: Any) -> Any:
        return getattr(v, "value", v)

    if any(norm(getattr(have, k)) != norm(getattr(want, k)) for k in _DEFINING):
        return False
    if (have.mirror and have.mirror.name) != (want.mirror and want.mirror.name):
        return False
    return sorted(s.name for s in have.sources or []) == sorted(s.name for s in want.sources or [])


def create_key_value(js: JetStream, config: KeyValueConfig, action: str, timeout: TimeoutArg) -> KeyValue:
    """Create (``action`` "create"), update or create-or-update a bucket.

    The stream is made as nats-py makes it (per-key TTLs allowed on servers
    that have them, so ``create(key, ttl=...)`` works on any bucket); a
    bucket another client made with the same settings is opened, not refused.
    """
    what = f"key-value bucket {config.bucket!r}"
    deadline = js._api.deadline(timeout)  # one budget for every request below
    scfg = config.stream_config()
    if scfg.mirror is None and not scfg.allow_msg_ttl and js.supports("msg_ttl"):
        scfg = scfg.replace(allow_msg_ttl=True)
    if action != "create":
        try:
            have: StreamConfig | None = js.stream(scfg.name, timeout=deadline).cached_info.config
        except StreamNotFoundError:
            have = None
        if have is not None:
            # Never turn off what the bucket has (the server refuses it) or add it on an update.
            scfg = scfg.replace(allow_msg_ttl=have.allow_msg_ttl or bool(scfg.subject_delete_marker_ttl))
    try:
        stream = bucket_stream(js, scfg, action, what, BucketExistsError, deadline)
    except BucketExistsError:
        try:
            existing = js.stream(scfg.name, timeout=deadline)
        except StreamNotFoundError:
            raise BucketExistsError(f"{what} exists with another configuration") from None
        if not _same_bucket(existing.cached_info.config, scfg):
            raise
        stream = existing
    return KeyValue(js, config.bucket, stream)


def open_key_value(js: JetStream, bucket: str, timeout: TimeoutArg) -> KeyValue:
    """An existing bucket.

    Raises:
        BucketNotFoundError: no stream ``KV_<bucket>``.
        BadBucketError: that stream is not a bucket (it keeps no value per key).
    """
    stream = open_bucket_stream(js, bucket, f"KV_{bucket}", f"key-value bucket {bucket!r}", timeout)
    if (stream.cached_info.config.max_msgs_per_subject or 0) < 1:
        raise BadBucketError(f"stream KV_{bucket} is not a key-value bucket")
    return KeyValue(js, bucket, stream)


def kv_config(config: KeyValueConfig | None, kwargs: Mapping[str, Any]) -> KeyValueConfig:
    nested = {"placement": Placement, "republish": RePublish, "mirror": StreamSource,
              "sources": list[StreamSource]}
    kwargs = {k: (msgspec.convert(v, nested[k]) if k in nested and v is not None else v)
              for k, v in kwargs.items()}
    if config is None:
        return KeyValueConfig(**kwargs)
    if not isinstance(config, KeyValueConfig):
        raise TypeError(f"expected a KeyValueConfig, got {type(config).__name__}")
    return config.replace(**kwargs) if kwargs else config


__all__ = ["Entry", "KeyValue", "KeyValueConfig", "KeyValueOp", "KeyValueStatus", "KeyWatcher"]
