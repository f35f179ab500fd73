"""The JetStream context: streams, consumers, publishing (after Go's ``jetstream``)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from .._backoff import Backoff
from .._core.options import check_callback
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg, check_seconds
from ..errors import BadSubjectError, BucketNotFoundError, StreamNotFoundError, TimeoutError
from ..protocol.headers import HeadersInput
from . import _features
from ._api import DEFAULT_API_PREFIX, DEFAULT_TIMEOUT, JetStreamAPI, encode_json, from_wire, rfc3339, to_wire
from ._bucket import validate_bucket
from .batch import BatchPublisher
from .consumer import Consumer
from .consumer_config import ConsumerConfig, ConsumerInfo, ConsumerPauseResponse, ConsumerResetResponse
from .counter import Counter
from .fastbatch import FastBatchPublisher
from .kv import KeyValue, KeyValueConfig, KeyValueStatus, create_key_value, kv_config, open_key_value
from .nats_py import NatsPyNames, _consumer_name, _stream_name
from .object_models import ObjectStoreConfig, ObjectStoreStatus
from .object_store import ObjectStore, create_object_store, obj_config, open_object_store
from .publish import RETRY_BACKOFF, PubAck, publish_sync
from .publish_async import PublishWindow, ack_mux
from .publish_options import publish_headers
from .push import PushConsumer
from .stream import Stream
from .stream_config import StreamConfig, StreamInfo, _Open, sources_on_the_wire

_T = TypeVar("_T")

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..client import Client
    from ..codecs import Codec, TypedSubject
    from ..msg import Msg
    from ._fields import ConsumerConfigFields, KeyValueConfigFields, ObjectStoreConfigFields, StreamConfigFields
    from .ordered import OrderedConsumer


class APIStats(_Open, kw_only=True):
    """API usage, and the server's JetStream API level (ADR-44).

    Attributes:
        level: the server's JetStream API level (what features it has); ``None``
            when the server did not say (before 2.11), as in nats-py.
        total: API requests this account made.
        errors: API requests that failed.
        inflight: API requests being handled now (newer servers).
    """

    level: int | None = None
    total: int = 0
    errors: int = 0
    inflight: int | None = None


class AccountLimits(_Open, kw_only=True):
    """The JetStream limits of an account or tier (-1: no limit).

    Attributes:
        max_memory: bytes of memory storage.
        max_storage: bytes of file storage.
        max_streams: streams.
        max_consumers: consumers.
        max_ack_pending: the most unacknowledged messages a consumer may have.
        memory_max_stream_bytes: the largest ``max_bytes`` of one memory stream.
        storage_max_stream_bytes: the largest ``max_bytes`` of one file stream.
        max_bytes_required: every stream must set ``max_bytes``.
    """

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False


class Tier(_Open, kw_only=True):
    """Usage and limits of one storage tier (``R1``, ``R3``) of an account.

    Attributes:
        memory: bytes of memory storage used.
        storage: bytes of file storage used.
        reserved_memory: bytes of memory reserved by streams' ``max_bytes``.
        reserved_storage: bytes of file storage reserved by streams' ``max_bytes``.
        streams: streams in the tier.
        consumers: consumers in the tier.
        limits: the tier's limits.
    """

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)


class AccountInfo(_Open, kw_only=True):
    """Usage and limits of this account; ``api.level`` is the server's JetStream API level.

    Attributes:
        memory: bytes of memory storage used.
        storage: bytes of file storage used.
        reserved_memory: bytes of memory reserved by streams' ``max_bytes``.
        reserved_storage: bytes of file storage reserved by streams' ``max_bytes``.
        streams: how many streams the account has.
        consumers: how many consumers the account has.
        limits: the account's limits.
        api: API usage and the server's API level.
        domain: the JetStream domain, if the server has one.
        tiers: usage and limits per tier (accounts with tiered limits).
    """

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)
    api: APIStats = msgspec.field(default_factory=APIStats)
    domain: str | None = None
    tiers: dict[str, Tier] | None = None


_BAD_NAME_CHARS = frozenset(" \t\r\n.*>/\\")


_WILDCARD = frozenset("*>")


def check_name(name: object, what: str) -> str:
    """Stream and consumer names: non-empty, no whitespace, dots, wildcards or slashes."""
    if not isinstance(name, str) or not name:
        raise BadSubjectError(f"{what} name must be a non-empty str, got {name!r}")
    if _BAD_NAME_CHARS.intersection(name):
        raise BadSubjectError(f"{what} name {name!r} may not contain whitespace, '.', '*', '>', '/' or '\\'")
    return name


def _config(cls: type[Any], config: Any, kwargs: Mapping[str, Any]) -> Any:
    if config is None:
        return cls(**kwargs)
    if not isinstance(config, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(config).__name__}")
    return config.replace(**kwargs) if kwargs else config


def _common_headers(headers: HeadersInput | None, msg_id: str | None, expected_stream: str | None,
                    expected_last_seq: int | None, expected_last_subject_seq: int | None,
                    expected_last_msg_id: str | None) -> HeadersInput | None:
    """publish_headers() for the options of the common publish_async(); None, without the
    call, when there is nothing to merge (pipelined publishing is per-message work)."""
    if (headers is None and msg_id is None and expected_stream is None and expected_last_seq is None
            and expected_last_subject_seq is None and expected_last_msg_id is None):
        return None
    return publish_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                           expected_last_msg_id)


class JetStream(NatsPyNames):
    """JetStream on one connection. Thread-safe. Make it with ``nc.jetstream()``."""

    def __init__(self, nc: Client, domain: str | None = None, api_prefix: str = DEFAULT_API_PREFIX,
                 timeout: float = DEFAULT_TIMEOUT, publish_async_max_pending: int = 4000,
                 publish_async_stall_wait: float = 5.0, publish_async_timeout: float | None = None,
                 publish_async_error_cb: Callable[[Msg, Exception], object] | None = None):
        """Args:
            publish_async_timeout: seconds an async publish waits for its PubAck
                before its future fails (default: ``timeout``).
            publish_async_error_cb: ``cb(msg, exc)`` for each failed async publish,
                on the client's dispatcher (nats.go's ``WithPublishAsyncErrHandler``).
        """
        if publish_async_timeout is not None and publish_async_timeout <= 0:
            raise ValueError("publish_async_timeout must be > 0")
        check_callback(publish_async_error_cb, "publish_async_error_cb")
        self._async_error_cb = publish_async_error_cb
        self.nc = nc
        self._api = JetStreamAPI(nc, api_prefix, domain, timeout)
        self._core = self._api.core
        self.timeout = timeout
        self._window_args = (publish_async_max_pending, publish_async_stall_wait,
                             timeout if publish_async_timeout is None else publish_async_timeout)
        if publish_async_max_pending < 1:
            raise ValueError("publish_async_max_pending must be >= 1")
        self._window: PublishWindow | None = None

    @property
    def _async(self) -> PublishWindow:
        """This context's window of async publishes (made on first use)."""
        if self._window is None:
            self._window = ack_mux(self._core).window(*self._window_args)
        return self._window

    @property
    def api_prefix(self) -> str:
        """The subject prefix of this context's API requests (``$JS.API``, or ``$JS.<domain>.API``)."""
        return self._api.prefix

    def account_info(self, timeout: TimeoutArg = USE_DEFAULT) -> AccountInfo:
        """Usage and limits of this account, and the server's API level (``api.level``).

        Raises:
            JetStreamNotEnabledError: JetStream is off for this account or server.
        """
        return self._api.request_typed("INFO", None, AccountInfo, timeout)

    # ------------------------------------------------------------------ server features (ADR-44)

    @property
    def server_version(self) -> str:
        """The version the connected server announced (``""`` when it announced none)."""
        return str(self.nc.server_info.get("version", ""))

    def supports(self, feature: str) -> bool:
        """Whether the connected server has ``feature`` (a key of the feature table, e.g.
        ``"msg_ttl"``, ``"counters"``, ``"consumer_reset"``).

        Raises:
            KeyError: no such feature.
        """
        if feature not in _features.FEATURES:
            raise KeyError(f"unknown feature {feature!r}; known: {', '.join(sorted(_features.FEATURES))}")
        return _features.supports(self.nc.server_info, feature)

    def _require(self, *features: str) -> dict[str, str] | None:
        """Refuse ``features`` the connected server lacks; the headers that make
        an API request carrying them refused by an older *answering* server."""
        if not features:
            return None
        info = self.nc.server_info
        _features.require(info, *features)
        return _features.level_headers(info, features)

    # ------------------------------------------------------------------ streams

    def _stream_request(self, action: str, cfg: StreamConfig, timeout: TimeoutArg) -> Stream:
        check_name(cfg.name, "stream")
        level = self._require(*_features.stream_config_features(cfg))
        cfg = sources_on_the_wire(cfg)
        info = self._api.request_typed(f"STREAM.{action}.{cfg.name}", cfg, StreamInfo, timeout, level)
        return Stream(self, info)

    def create_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                      **kwargs: Unpack[StreamConfigFields]) -> Stream:
        """Create a stream (from a StreamConfig or keyword arguments).

        Raises:
            StreamNameInUseError: a stream of that name exists with another config.
        """
        return self._stream_request("CREATE", _config(StreamConfig, config, kwargs), timeout)

    def update_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                      **kwargs: Unpack[StreamConfigFields]) -> Stream:
        """Change a stream's config. Raises StreamNotFoundError."""
        cfg = _config(StreamConfig, config, kwargs)
        _stream_name(cfg.name)  # nats-py's texts (this name is nats-py's too)
        return self._stream_request("UPDATE", cfg, timeout)

    def create_or_update_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                **kwargs: Unpack[StreamConfigFields]) -> Stream:
        """Update the stream, or create it when it does not exist (one ``timeout`` for both)."""
        cfg = _config(StreamConfig, config, kwargs)
        deadline = self._api.deadline(timeout)
        try:
            return self._stream_request("UPDATE", cfg, deadline)
        except StreamNotFoundError:
            return self._stream_request("CREATE", cfg, deadline)

    def delete_stream(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete a stream and its messages. Raises StreamNotFoundError."""
        _stream_name(name)  # nats-py's texts (this name is nats-py's too)
        return bool(self._api.request(f"STREAM.DELETE.{name}", None, timeout).get("success"))

    def stream(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> Stream:
        """A handle on an existing stream. Raises StreamNotFoundError."""
        check_name(name, "stream")
        return Stream(self, self._stream_info(name, timeout))

    def _stream_info(self, name: str, timeout: TimeoutArg) -> StreamInfo:
        return self._api.request_typed(f"STREAM.INFO.{name}", None, StreamInfo, timeout)

    def stream_name_by_subject(self, subject: str, timeout: TimeoutArg = USE_DEFAULT) -> str:
        """The stream capturing ``subject``. Raises StreamNotFoundError."""
        resp = self._api.request("STREAM.NAMES", {"subject": subject}, timeout)
        names = resp.get("streams") or []
        if not names:
            raise StreamNotFoundError(f"no stream captures subject {subject!r}", code=404)
        return str(names[0])

    def list_streams(self, subject: str | None = None, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[StreamInfo]:
        """Info of every stream (optionally those capturing ``subject``), page by page."""
        body = {"subject": subject} if subject else None
        for item in self._api.paged("STREAM.LIST", "streams", body, timeout):
            yield from_wire(item, StreamInfo)

    def stream_names(self, subject: str | None = None, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        """The names of every stream (or of those that store ``subject``, wildcards allowed),
        fetched page by page within one ``timeout``.
        """
        body = {"subject": subject} if subject else None
        yield from self._api.paged("STREAM.NAMES", "streams", body, timeout)

    # ------------------------------------------------------------------ consumers

    def _consumer_request(self, stream: str, cfg: ConsumerConfig, action: str,
                          timeout: TimeoutArg) -> Consumer:
        check_name(stream, "stream")
        # A durable_name other than the name is the server's to refuse (error 10017,
        # BadRequestError), as nats-py and nats.go let it: one rule, the server's.
        name = cfg.name or cfg.durable_name
        level = self._require(*_features.consumer_config_features(cfg))
        if name:
            check_name(name, "consumer")
            suffix = f"CONSUMER.CREATE.{stream}.{name}"
            # The filter in the subject lets permissions scope consumer creation;
            # a wildcard cannot ride in a published subject, so those go without.
            if cfg.filter_subject and not cfg.filter_subjects and not _WILDCARD.intersection(cfg.filter_subject):
                suffix += f".{cfg.filter_subject}"
        else:
            suffix = f"CONSUMER.CREATE.{stream}"
        wire = to_wire(cfg)
        wire["ack_policy"] = cfg.ack_policy.value if hasattr(cfg.ack_policy, "value") else cfg.ack_policy
        body: dict[str, Any] = {"stream_name": stream, "config": wire}
        if action:
            body["action"] = action
        # ``body`` is on the wire already (durations in ns): encode it as it is.
        info = from_wire(self._api.request(suffix, encode_json(body), timeout, level), ConsumerInfo)
        return Consumer(self, info)

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Create a consumer; fails if one of that name exists with another config.

        Without ``name``/``durable_name`` the consumer is ephemeral.
        """
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "create", timeout)

    def create_push_consumer(self, stream: str, config: ConsumerConfig | None = None,
                             timeout: TimeoutArg = USE_DEFAULT, **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Create a push consumer (its config needs a ``deliver_subject``), as nats.go's
        ``CreatePushConsumer``; ``.consume(handler)`` delivers its messages.

        Raises:
            ValueError: no ``deliver_subject`` (that would be a pull consumer).
        """
        return PushConsumer(self, self._push_request(stream, config, kwargs, "create", timeout))

    def create_or_update_push_consumer(self, stream: str, config: ConsumerConfig | None = None,
                                       timeout: TimeoutArg = USE_DEFAULT,
                                       **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Create the push consumer, or update it when it exists."""
        return PushConsumer(self, self._push_request(stream, config, kwargs, "", timeout))

    def update_push_consumer(self, stream: str, config: ConsumerConfig | None = None,
                             timeout: TimeoutArg = USE_DEFAULT, **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Change an existing push consumer. Raises ConsumerNotFoundError."""
        return PushConsumer(self, self._push_request(stream, config, kwargs, "update", timeout))

    def push_consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> PushConsumer:
        """A handle on an existing push consumer. Raises ConsumerNotFoundError."""
        return PushConsumer(self, self._consumer_info(stream, name, timeout))

    def _push_request(self, stream: str, config: ConsumerConfig | None, kwargs: Mapping[str, Any], action: str,
                      timeout: TimeoutArg) -> ConsumerInfo:
        cfg = _config(ConsumerConfig, config, kwargs)
        if not cfg.deliver_subject:
            raise ValueError("a push consumer needs a deliver_subject (without one, use create_consumer)")
        return self._consumer_request(stream, cfg, action, timeout).cached_info

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Change an existing consumer. Raises ConsumerNotFoundError."""
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "update", timeout)

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None,
                                  timeout: TimeoutArg = USE_DEFAULT,
                                  **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Create the consumer, or update it when one of that name exists (nats.go's
        ``CreateOrUpdateConsumer``). Takes the same arguments as :meth:`create_consumer`.
        """
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "", timeout)

    def _consumer_info(self, stream: str, name: str, timeout: TimeoutArg) -> ConsumerInfo:
        check_name(stream, "stream")
        check_name(name, "consumer")
        return self._api.request_typed(f"CONSUMER.INFO.{stream}.{name}", None, ConsumerInfo, timeout)

    def consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> Consumer:
        """A handle on an existing consumer. Raises ConsumerNotFoundError."""
        return Consumer(self, self._consumer_info(stream, name, timeout))

    def delete_consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete a consumer of ``stream``; True when the server deleted it.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        _stream_name(stream)  # nats-py's texts (this name is nats-py's too)
        _consumer_name(name)
        return bool(self._api.request(f"CONSUMER.DELETE.{stream}.{name}", None, timeout).get("success"))

    def list_consumers(self, stream: str, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[ConsumerInfo]:
        """The ConsumerInfo of every consumer of ``stream``, fetched page by page within one ``timeout``."""
        check_name(stream, "stream")
        for item in self._api.paged(f"CONSUMER.LIST.{stream}", "consumers", None, timeout):
            yield from_wire(item, ConsumerInfo)

    def consumer_names(self, stream: str, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        """The names of every consumer of ``stream``, fetched page by page within one ``timeout``."""
        check_name(stream, "stream")
        yield from self._api.paged(f"CONSUMER.NAMES.{stream}", "consumers", None, timeout)

    def pause_consumer(self, stream: str, name: str, until: datetime.datetime | str | None = None,
                       timeout: TimeoutArg = USE_DEFAULT, *,
                       pause_until: datetime.datetime | str | None = None) -> ConsumerPauseResponse:
        """Pause a consumer until ``until``: it delivers nothing before then (server 2.11+).

        Args:
            until: a datetime (naive means local time), or an RFC 3339 string as
                nats-py takes it (``pause_until=`` is nats-py's keyword).

        Raises:
            FeatureNotSupportedError: the server is older than 2.11.
            ConsumerNotFoundError: no such consumer.
        """
        check_name(stream, "stream")
        check_name(name, "consumer")
        if until is None:
            until = pause_until
        if isinstance(until, str):
            try:
                datetime.datetime.fromisoformat(until[:26].rstrip("Z").split("+")[0])
            except ValueError:
                raise ValueError(f"until must be an RFC 3339 time, got {until!r}") from None
            stamp = until
        elif isinstance(until, datetime.datetime):
            stamp = rfc3339(until)
        else:
            raise TypeError(f"until must be a datetime or an RFC 3339 str, got {type(until).__name__}")
        level = self._require("consumer_pause")
        body = {"pause_until": stamp}
        return from_wire(self._api.request(f"CONSUMER.PAUSE.{stream}.{name}", body, timeout, level),
                         ConsumerPauseResponse)

    def resume_consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerPauseResponse:
        """Resume a paused consumer (server 2.11+).

        Raises:
            FeatureNotSupportedError: the server is older than 2.11.
            ConsumerNotFoundError: no such consumer.
        """
        check_name(stream, "stream")
        check_name(name, "consumer")
        level = self._require("consumer_pause")
        return from_wire(self._api.request(f"CONSUMER.PAUSE.{stream}.{name}", {}, timeout, level),
                         ConsumerPauseResponse)

    def unpin_consumer(self, stream: str, name: str, group: str, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Release the pinned client of a priority group (server 2.11+).

        Raises:
            FeatureNotSupportedError: the server is older than 2.11.
            ConsumerNotFoundError: no such consumer.
        """
        check_name(stream, "stream")
        check_name(name, "consumer")
        if not isinstance(group, str) or not group:
            raise ValueError(f"group must be a non-empty str, got {group!r}")
        level = self._require("consumer_unpin")
        self._api.request(f"CONSUMER.UNPIN.{stream}.{name}", {"group": group}, timeout, level)

    def reset_consumer(self, stream: str, name: str, seq: int | None = None,
                       timeout: TimeoutArg = USE_DEFAULT) -> ConsumerResetResponse:
        """Reset a consumer's delivery state (server 2.14+): redeliver from stream
        sequence ``seq``, or, without one, from just after its ack floor.

        Returns:
            The consumer's new info, with ``reset_seq`` the sequence it restarts at.

        Raises:
            FeatureNotSupportedError: the server is older than 2.14.
            ConsumerInvalidResetError: ``seq`` does not fit the consumer's deliver policy.
            ConsumerNotFoundError: no such consumer.
            StreamNotFoundError: no such stream.
            TimeoutError: no answer within ``timeout`` (one deadline for the lookup and the reset).
        """
        check_name(stream, "stream")
        check_name(name, "consumer")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
            raise ValueError(f"seq must be a stream sequence >= 1, got {seq!r}")
        level = self._require("consumer_reset")
        body = {"seq": seq} if seq is not None else {}
        deadline = self._api.deadline(timeout)
        # The server leaves a reset of a consumer (or stream) that does not exist
        # unanswered: look it up first, so that is ConsumerNotFoundError (or
        # StreamNotFoundError) at once instead of a TimeoutError after ``timeout``.
        # One round trip more, within the same deadline; only a consumer deleted
        # between the two requests still ends in the timeout.
        self._consumer_info(stream, name, deadline)
        return from_wire(self._api.request(f"CONSUMER.RESET.{stream}.{name}", body, deadline, level),
                         ConsumerResetResponse)

    def ordered_consumer(self, stream: str, **kwargs: Any) -> OrderedConsumer:
        """An ordered consumer (ADR-17): every message once, in order, no acks, self-healing."""
        from .ordered import OrderedConsumer

        check_name(stream, "stream")
        return OrderedConsumer(self, stream, **kwargs)

    # ------------------------------------------------------------------ key-value

    def create_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                         **kwargs: Unpack[KeyValueConfigFields]) -> KeyValue:
        """Create a key-value bucket (``KeyValueConfig`` or keyword arguments: bucket, history, ttl ...).

        Raises:
            BucketExistsError: it exists with another configuration.
        """
        return create_key_value(self, kv_config(config, kwargs), "create", timeout)

    def update_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                         **kwargs: Unpack[KeyValueConfigFields]) -> KeyValue:
        """Change a bucket's configuration. Raises BucketNotFoundError."""
        return create_key_value(self, kv_config(config, kwargs), "update", timeout)

    def create_or_update_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                   **kwargs: Unpack[KeyValueConfigFields]) -> KeyValue:
        """Create the bucket, or update its settings when it exists; same arguments as
        :meth:`create_key_value`.
        """
        return create_key_value(self, kv_config(config, kwargs), "create_or_update", timeout)

    def key_value(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> KeyValue:
        """An existing bucket. Raises BucketNotFoundError."""
        return open_key_value(self, bucket, timeout)

    def delete_key_value(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete a bucket and everything in it. Raises BucketNotFoundError."""
        validate_bucket(bucket)
        try:
            return self.delete_stream(f"KV_{bucket}", timeout=timeout)
        except StreamNotFoundError:
            raise BucketNotFoundError(f"key-value bucket {bucket!r} not found") from None

    def key_value_store_names(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        """The names of every key-value bucket."""
        for name in self.stream_names(subject="$KV.*.>", timeout=timeout):
            if name.startswith("KV_"):
                yield name[3:]

    def key_value_stores(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[KeyValueStatus]:
        """The status of every key-value bucket."""
        for info in self.list_streams(subject="$KV.*.>", timeout=timeout):
            if info.config.name.startswith("KV_"):
                yield KeyValueStatus(info, info.config.name[3:])

    # ------------------------------------------------------------------ object store

    def create_object_store(self, bucket: ObjectStoreConfig | str | None = None,
                            config: ObjectStoreConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                            **kwargs: Any) -> ObjectStore:
        """Create an object store bucket: an ``ObjectStoreConfig``, a bucket name, keyword
        arguments, or nats-py's ``(bucket, config=ObjectStoreConfig(...))``."""
        if isinstance(bucket, str) and config is not None:
            return create_object_store(self, obj_config(config, {**kwargs, "bucket": bucket}), "create", timeout)
        return create_object_store(self, obj_config(bucket if bucket is not None else config, kwargs), "create",
                                   timeout)

    def update_object_store(self, config: ObjectStoreConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                            **kwargs: Unpack[ObjectStoreConfigFields]) -> ObjectStore:
        """Change an existing object store's settings; same arguments as :meth:`create_object_store`.

        Raises:
            BucketNotFoundError: no such object store.
        """
        return create_object_store(self, obj_config(config, kwargs), "update", timeout)

    def create_or_update_object_store(self, config: ObjectStoreConfig | None = None,
                                      timeout: TimeoutArg = USE_DEFAULT,
                                      **kwargs: Unpack[ObjectStoreConfigFields]) -> ObjectStore:
        """Create the object store, or update its settings when it exists; same arguments as
        :meth:`create_object_store`.
        """
        return create_object_store(self, obj_config(config, kwargs), "create_or_update", timeout)

    def object_store(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> ObjectStore:
        """An existing object store. Raises BucketNotFoundError."""
        return open_object_store(self, bucket, timeout)

    def delete_object_store(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete an object store and every object in it; True when deleted.

        Raises:
            BucketNotFoundError: no such object store.
        """
        validate_bucket(bucket)
        try:
            return self.delete_stream(f"OBJ_{bucket}", timeout=timeout)
        except StreamNotFoundError:
            raise BucketNotFoundError(f"object store {bucket!r} not found") from None

    def object_store_names(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        """The names of every object store (buckets, without the ``OBJ_`` stream prefix)."""
        for name in self.stream_names(subject="$O.*.M.>", timeout=timeout):
            if name.startswith("OBJ_"):
                yield name[4:]

    def object_stores(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[ObjectStoreStatus]:
        """The status of every object store."""
        for info in self.list_streams(subject="$O.*.M.>", timeout=timeout):
            if info.config.name.startswith("OBJ_"):
                yield ObjectStoreStatus(info, info.config.name[4:])

    # ------------------------------------------------------------------ publish

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        headers: HeadersInput | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
        retry_attempts: int = 2,
        stream: str | None = None,
        *,
        expected_last_subject_seq_subject: str | None = None,
        retry_wait: float = 0.25,
        schedule_at: datetime.datetime | None = None,
        schedule_every: float | str | None = None,
        schedule_cron: str | None = None,
        schedule_target: str | None = None,
        schedule_source: str | None = None,
        schedule_ttl: float | str | None = None,
        schedule_time_zone: str | None = None,
        schedule_rollup: bool = False,
        msg_ttl: float | str | None = None,
    ) -> PubAck:
        """Publish to a stream and wait for it to store the message.

        Args:
            msg_id: de-duplication id (``Nats-Msg-Id``) within the stream's duplicate window.
            expected_*: the publish fails (WrongLastSequenceError) unless these hold.
            expected_last_subject_seq_subject: check ``expected_last_subject_seq``
                against this subject (wildcards allowed) instead of ``subject`` (2.11+).
            ttl: per-message TTL in seconds (or a Go duration string) on streams
                with allow_msg_ttl (2.11+).
            retry_attempts, retry_wait: retries, and seconds between them, when no
                stream answers yet (ADR-22).
            stream: nats-py's name for ``expected_stream``.
            schedule_at, schedule_every, schedule_cron: make this message a
                schedule (ADR-51, streams with allow_msg_schedules): published
                once at a datetime (2.12+), every N seconds (or a Go duration,
                at least 1 s) or on a 6-field cron expression or ``@hourly``,
                ``@daily`` ... (2.14+), to ``schedule_target``.
            schedule_target: the subject (in the same stream) the schedule publishes to.
            schedule_source: publish the newest message of this subject instead
                of this message's body (sampling, 2.14+).
            schedule_ttl: TTL of the messages the schedule produces (seconds, a
                Go duration, or ``"never"``; 2.14+).
            schedule_time_zone: IANA time zone of a cron schedule (2.14+).
            schedule_rollup: each produced message rolls up (replaces) the
                earlier ones on the target subject (2.14+).
            msg_ttl: nats-py's name for ``ttl``.

        Raises:
            FeatureNotSupportedError: an option the connected server cannot honour (nothing is sent).
            NoStreamResponseError: no stream captures ``subject``.
            WrongLastSequenceError: an expectation failed.
            TimeoutError: no PubAck within ``timeout`` (default: the context's).
        """
        if msg_ttl is not None:
            ttl = msg_ttl
        if retry_attempts < 0:
            raise ValueError("retry_attempts must be >= 0")
        if retry_wait <= 0:
            raise ValueError("retry_wait must be > 0")
        features: list[str] = []
        hdrs = publish_headers(
            headers, msg_id, expected_stream or stream, expected_last_seq, expected_last_subject_seq,
            expected_last_msg_id, ttl, expected_last_subject_seq_subject=expected_last_subject_seq_subject,
            schedule_at=schedule_at, schedule_every=schedule_every, schedule_cron=schedule_cron,
            schedule_target=schedule_target, schedule_source=schedule_source, schedule_ttl=schedule_ttl,
            schedule_time_zone=schedule_time_zone, schedule_rollup=schedule_rollup, features=features)
        self._require(*features)
        backoff = RETRY_BACKOFF if retry_wait == RETRY_BACKOFF.base else Backoff(retry_wait, retry_wait, factor=1.0)
        return publish_sync(self._core, subject, payload, hdrs, self._api.deadline(timeout), retry_attempts,
                            backoff)

    def typed(self, subject: str, type_: type[_T], codec: Codec | None = None,
              reply_type: Any = Any) -> TypedSubject[_T]:
        """A typed view of ``subject``: publish values to a stream (each returns its PubAck).

        ``js.typed("orders.new", Order).publish(order, msg_id=...)``. The untyped calls
        are unchanged (and no slower). See :doc:`codecs`.

        Args:
            type_: the type of the values (a msgspec Struct, dataclass, TypedDict,
                plain type or pydantic model).
            codec: the encoding (default :data:`~natsjs_sync.codecs.JSON`).
            reply_type: what :meth:`TypedSubject.request <natsjs_sync.codecs.TypedSubject.request>`
                decodes replies to.
        """
        from ..codecs.typed import TypedSubject

        return TypedSubject(self, subject, type_, codec, reply_type)

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        headers: HeadersInput | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        *,
        expected_last_subject_seq_subject: str | None = None,
        schedule_at: datetime.datetime | None = None,
        schedule_every: float | str | None = None,
        schedule_cron: str | None = None,
        schedule_target: str | None = None,
        schedule_source: str | None = None,
        schedule_ttl: float | str | None = None,
        schedule_time_zone: str | None = None,
        schedule_rollup: bool = False,
        stream: str | None = None,
        msg_ttl: float | str | None = None,
        wait_stall: float | None = None,
    ) -> Future[PubAck]:
        """Publish without waiting; the future completes with the PubAck (or its error).

        Takes the options of :meth:`publish`. Blocks while
        ``publish_async_max_pending`` publishes await their acks (at most the
        stall wait, or ``wait_stall`` seconds, then TooManyStalledMsgsError, a
        TimeoutError); a future fails with TimeoutError when no PubAck comes
        within ``publish_async_timeout``.

        Raises:
            FeatureNotSupportedError: an option the connected server cannot honour (nothing is sent).
        """
        if stream is not None:
            expected_stream = expected_stream or stream
        if msg_ttl is not None:
            ttl = msg_ttl
        if wait_stall is not None:
            wait_stall = check_seconds(wait_stall, "wait_stall")
        if (expected_last_subject_seq_subject is None and schedule_at is None and schedule_every is None
                and schedule_cron is None and schedule_target is None and schedule_source is None
                and schedule_ttl is None and schedule_time_zone is None and ttl is None and not schedule_rollup):
            # The common case stays as short as it was: pipelined publishing is per-message work.
            hdrs = _common_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                                   expected_last_msg_id)
            fut = self._async.publish(subject, payload, hdrs, wait_stall)
            if self._async_error_cb is not None:
                fut.add_done_callback(self._report_async_failure)
            return fut
        features: list[str] = []
        hdrs = publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id,
            ttl, expected_last_subject_seq_subject=expected_last_subject_seq_subject,
            schedule_at=schedule_at, schedule_every=schedule_every, schedule_cron=schedule_cron,
            schedule_target=schedule_target, schedule_source=schedule_source, schedule_ttl=schedule_ttl,
            schedule_time_zone=schedule_time_zone, schedule_rollup=schedule_rollup, features=features)
        self._require(*features)
        fut = self._async.publish(subject, payload, hdrs, wait_stall)
        if self._async_error_cb is not None:
            fut.add_done_callback(self._report_async_failure)
        return fut

    def _report_async_failure(self, fut: Future[PubAck]) -> None:
        """Dispatcher: hand a failed async publish to ``publish_async_error_cb``."""
        exc = fut.exception(0)
        cb = self._async_error_cb
        if exc is not None and cb is not None and isinstance(exc, Exception):
            cb(fut.msg, exc)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ counters and batches

    def counter(self, stream: str, timeout: TimeoutArg = USE_DEFAULT) -> Counter:
        """The counters (ADR-49) of a stream made with ``allow_msg_counter`` (and
        ``allow_direct``): every subject in it is a counter.

        Raises:
            FeatureNotSupportedError: the server is older than 2.12.
            StreamNotFoundError: no such stream.
            JetStreamError: the stream does not allow counters.
        """
        check_name(stream, "stream")
        self._require("counters")
        return Counter(self, self.stream(stream, timeout=timeout))

    def atomic_batch(self, batch_id: str | None = None, timeout: TimeoutArg = USE_DEFAULT) -> BatchPublisher:
        """An atomic batch publish (ADR-50): the messages added are stored all
        together at :meth:`~BatchPublisher.commit`, or none of them.

        ``with js.atomic_batch() as batch: batch.add(...); ack = batch.commit(...)``

        Raises:
            FeatureNotSupportedError: the server is older than 2.12.
        """
        self._require("atomic_batch")
        return BatchPublisher(self, batch_id, timeout)

    def fast_batch(self, batch_id: str | None = None, *, flow: int = 100, max_outstanding_acks: int = 2,
                   gap: Literal["fail", "ok"] = "fail", timeout: TimeoutArg = USE_DEFAULT) -> FastBatchPublisher:
        """A fast-ingest batch publish (ADR-50, server 2.14+, streams with ``allow_batched``).

        Messages stream in without a PubAck each; the stream acknowledges every
        few messages and sets the pace. Not atomic: what was stored stays
        stored if the batch ends early.

        ``with js.fast_batch() as batch: for m in rows: batch.add("s", m)``
        (leaving the block commits it), or ``ack = batch.commit(...)``.

        Args:
            flow: acknowledge at most every ``flow`` messages (the server may ask for acks more often).
            max_outstanding_acks: how many flow acks may be outstanding before
                :meth:`~FastBatchPublisher.add` waits (1 to 3; 2 keeps the stream busy).
            gap: ``"fail"``: a lost message or a failed check ends the batch, so
                what is stored has no gaps; ``"ok"``: the batch goes on, and
                :attr:`~FastBatchPublisher.gaps` / :attr:`~FastBatchPublisher.errors` report it.
            timeout: the default longest wait of each call (seconds).

        Raises:
            FeatureNotSupportedError: the server is older than 2.14.
            ValueError: a bad option (nothing sent).
        """
        publisher = FastBatchPublisher(self, batch_id=batch_id, flow=flow, max_outstanding_acks=max_outstanding_acks,
                                       gap=gap, timeout=timeout)
        self._require("fast_batch")
        return publisher

    def publish_async_complete(self, timeout: TimeoutArg = 10.0) -> None:
        """Wait until every async publish of this context is settled: acknowledged, or failed.

        When it returns, every future it waited for is done (``exception(0)``
        never times out). One ``timeout`` covers the flush and the wait.

        Raises:
            TimeoutError: publishes still pending after ``timeout`` seconds.
        """
        deadline = Deadline.of(timeout, 10.0)
        self._core.flush(deadline)
        if self._window is not None:
            self._window.wait_complete(deadline)

    def cleanup_publisher(self) -> None:
        """Release this context's async publishing (nats.go's ``CleanupPublisher``).

        Publishes still awaiting their PubAck fail at once with
        :class:`~natsjs_sync.errors.JetStreamPublisherClosedError` (and reach
        ``publish_async_error_cb``); a ``publish_async`` stalled for room raises
        it. The client forgets this context's publishes, and once no context
        publishes asynchronously any more, it unsubscribes its ack inbox. Call
        :meth:`publish_async_complete` first to wait for the acks instead.

        The context stays usable: a later ``publish_async`` starts afresh. For
        a context per unit of work, ``with nc.jetstream() as js:`` calls this
        when the block ends, so a long-lived process keeps nothing of it.
        Idempotent; thread-safe.
        """
        window, self._window = self._window, None
        if window is not None:
            window.mux.release(window)

    def __enter__(self) -> JetStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Release the context's async publishing (:meth:`cleanup_publisher`)."""
        self.cleanup_publisher()

    @property
    def publish_async_pending(self) -> PendingCount:
        """Async publishes of this context not yet settled: an int, also callable
        (``js.publish_async_pending()``, as nats-py has it)."""
        return PendingCount(len(self._window.pending) if self._window is not None else 0)

    def __repr__(self) -> str:
        return f"<JetStream {self._api.prefix}>"


class PendingCount(int):
    """An ``int`` that also answers a call with itself (a property in one API, a method in nats-py)."""

    def __call__(self) -> int:
        return int(self)


__all__ = ["AccountInfo", "JetStream", "PendingCount", "TimeoutError"]
