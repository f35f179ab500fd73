"""The JetStream context: streams, consumers, publishing (after Go's ``jetstream``)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import BadSubjectError, BucketNotFoundError, StreamNotFoundError, TimeoutError
from ..protocol.headers import HeadersInput
from ._api import DEFAULT_API_PREFIX, DEFAULT_TIMEOUT, JetStreamAPI, encode_json, from_wire, rfc3339, to_wire
from .consumer import Consumer
from .consumer_config import ConsumerConfig, ConsumerInfo
from .kv import KeyValue, KeyValueConfig, KeyValueStatus, create_key_value, kv_config, open_key_value, validate_bucket
from .nats_py import NatsPyNames
from .object_store import (
    ObjectStore,
    ObjectStoreConfig,
    ObjectStoreStatus,
    create_object_store,
    obj_config,
    open_object_store,
)
from .publish import PubAck, PublishWindow, ack_mux, publish_headers, publish_sync
from .stream import Stream
from .stream_config import StreamConfig, StreamInfo, _Model

if TYPE_CHECKING:
    from ..client import Client
    from .ordered import OrderedConsumer


class APIStats(_Model, frozen=True, kw_only=True):
    total: int = 0
    errors: int = 0


class AccountLimits(_Model, frozen=True, kw_only=True):
    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False


class AccountInfo(_Model, frozen=True, kw_only=True):
    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = AccountLimits()
    api: APIStats = APIStats()
    domain: str | None = None


_BAD_NAME_CHARS = frozenset(" \t\r\n.*>/\\")


_WILDCARD = frozenset("*>")


def check_name(name: object, what: str) -> str:
    """Stream and consumer names: non-empty, no whitespace, dots, wildcards or slashes."""
    if not isinstance(name, str) or not name:
        raise BadSubjectError(f"{what} name must be a non-empty str, got {name!r}")
    if _BAD_NAME_CHARS.intersection(name):
        raise BadSubjectError(f"{what} name {name!r} may not contain whitespace, '.', '*', '>', '/' or '\\'")
    return name


def _config(cls: type[Any], config: Any, kwargs: dict[str, Any]) -> Any:
    if config is None:
        return cls(**kwargs)
    if not isinstance(config, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(config).__name__}")
    return config.replace(**kwargs) if kwargs else config


class JetStream(NatsPyNames):
    """JetStream on one connection. Thread-safe. Make it with ``nc.jetstream()``."""

    def __init__(self, nc: Client, domain: str | None = None, api_prefix: str = DEFAULT_API_PREFIX,
                 timeout: float = DEFAULT_TIMEOUT, publish_async_max_pending: int = 4000,
                 publish_async_stall_wait: float = 5.0):
        self.nc = nc
        self._api = JetStreamAPI(nc, api_prefix, domain, timeout)
        self._core = self._api.core
        self.timeout = timeout
        self._window_args = (publish_async_max_pending, publish_async_stall_wait, timeout)
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
        return self._api.prefix

    def account_info(self, timeout: TimeoutArg = USE_DEFAULT) -> AccountInfo:
        """Usage and limits of this account. Raises JetStreamNotEnabledError."""
        return self._api.request_typed("INFO", None, AccountInfo, timeout)

    # ------------------------------------------------------------------ streams

    def _stream_request(self, action: str, cfg: StreamConfig, timeout: TimeoutArg) -> Stream:
        check_name(cfg.name, "stream")
        info = self._api.request_typed(f"STREAM.{action}.{cfg.name}", cfg, StreamInfo, timeout)
        return Stream(self, info)

    def create_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                      **kwargs: Any) -> Stream:
        """Create a stream (from a StreamConfig or keyword arguments).

        Raises:
            StreamNameInUseError: a stream of that name exists with another config.
        """
        return self._stream_request("CREATE", _config(StreamConfig, config, kwargs), timeout)

    def update_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                      **kwargs: Any) -> Stream:
        """Change a stream's config. Raises StreamNotFoundError."""
        return self._stream_request("UPDATE", _config(StreamConfig, config, kwargs), timeout)

    def create_or_update_stream(self, config: StreamConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                **kwargs: Any) -> Stream:
        """Update the stream, or create it when it does not exist (one ``timeout`` for both)."""
        cfg = _config(StreamConfig, config, kwargs)
        deadline = self._api.deadline(timeout)
        try:
            return self._stream_request("UPDATE", cfg, deadline)
        except StreamNotFoundError:
            return self._stream_request("CREATE", cfg, deadline)

    def delete_stream(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete a stream and its messages. Raises StreamNotFoundError."""
        check_name(name, "stream")
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
        body = {"subject": subject} if subject else None
        yield from self._api.paged("STREAM.NAMES", "streams", body, timeout)

    # ------------------------------------------------------------------ consumers

    def _consumer_request(self, stream: str, cfg: ConsumerConfig, action: str,
                          timeout: TimeoutArg) -> Consumer:
        check_name(stream, "stream")
        name = cfg.name or cfg.durable_name
        if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
            raise ValueError("name and durable_name differ")
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
        info = from_wire(self._api.request(suffix, encode_json(body), timeout), ConsumerInfo)
        return Consumer(self, info)

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Any) -> Consumer:
        """Create a consumer; fails if one of that name exists with another config.

        Without ``name``/``durable_name`` the consumer is ephemeral.
        """
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "create", timeout)

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Any) -> Consumer:
        """Change an existing consumer. Raises ConsumerNotFoundError."""
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "update", timeout)

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None,
                                  timeout: TimeoutArg = USE_DEFAULT, **kwargs: Any) -> Consumer:
        return self._consumer_request(stream, _config(ConsumerConfig, config, kwargs), "", timeout)

    def _consumer_info(self, stream: str, name: str, timeout: TimeoutArg) -> ConsumerInfo:
        check_name(stream, "stream")
        check_name(name, "consumer")
        return self._api.request_typed(f"CONSUMER.INFO.{stream}.{name}", None, ConsumerInfo, timeout)

    def consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> Consumer:
        """A handle on an existing consumer. Raises ConsumerNotFoundError."""
        return Consumer(self, self._consumer_info(stream, name, timeout))

    def delete_consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        check_name(stream, "stream")
        check_name(name, "consumer")
        return bool(self._api.request(f"CONSUMER.DELETE.{stream}.{name}", None, timeout).get("success"))

    def list_consumers(self, stream: str, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[ConsumerInfo]:
        check_name(stream, "stream")
        for item in self._api.paged(f"CONSUMER.LIST.{stream}", "consumers", None, timeout):
            yield from_wire(item, ConsumerInfo)

    def consumer_names(self, stream: str, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        check_name(stream, "stream")
        yield from self._api.paged(f"CONSUMER.NAMES.{stream}", "consumers", None, timeout)

    def pause_consumer(self, stream: str, name: str, until: datetime.datetime,
                       timeout: TimeoutArg = USE_DEFAULT) -> dict[str, Any]:
        """Pause a consumer until ``until`` (server 2.11+)."""
        body = {"pause_until": rfc3339(until)}
        return self._api.request(f"CONSUMER.PAUSE.{stream}.{name}", body, timeout)

    def resume_consumer(self, stream: str, name: str, timeout: TimeoutArg = USE_DEFAULT) -> dict[str, Any]:
        return self._api.request(f"CONSUMER.PAUSE.{stream}.{name}", {}, timeout)

    def unpin_consumer(self, stream: str, name: str, group: str, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Release the pinned client of a priority group (server 2.11+)."""
        self._api.request(f"CONSUMER.UNPIN.{stream}.{name}", {"group": group}, timeout)

    def ordered_consumer(self, stream: str, **kwargs: Any) -> OrderedConsumer:
        """An ordered consumer (ADR-17): every message once, in order, no acks, self-healing."""
        from .ordered import OrderedConsumer

        check_name(stream, "stream")
        return OrderedConsumer(self, stream, **kwargs)

    # ------------------------------------------------------------------ key-value

    def create_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                         **kwargs: Any) -> KeyValue:
        """Create a key-value bucket (``KeyValueConfig`` or keyword arguments: bucket, history, ttl ...).

        Raises:
            BucketExistsError: it exists with another configuration.
        """
        return create_key_value(self, kv_config(config, kwargs), "create", timeout)

    def update_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                         **kwargs: Any) -> KeyValue:
        """Change a bucket's configuration. Raises BucketNotFoundError."""
        return create_key_value(self, kv_config(config, kwargs), "update", timeout)

    def create_or_update_key_value(self, config: KeyValueConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                   **kwargs: Any) -> KeyValue:
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

    def create_object_store(self, config: ObjectStoreConfig | str | None = None, timeout: TimeoutArg = USE_DEFAULT,
                            **kwargs: Any) -> ObjectStore:
        """Create an object store bucket (``ObjectStoreConfig``, a bucket name, or keyword arguments)."""
        return create_object_store(self, obj_config(config, kwargs), "create", timeout)

    def update_object_store(self, config: ObjectStoreConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                            **kwargs: Any) -> ObjectStore:
        return create_object_store(self, obj_config(config, kwargs), "update", timeout)

    def create_or_update_object_store(self, config: ObjectStoreConfig | None = None,
                                      timeout: TimeoutArg = USE_DEFAULT, **kwargs: Any) -> ObjectStore:
        return create_object_store(self, obj_config(config, kwargs), "create_or_update", timeout)

    def object_store(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> ObjectStore:
        """An existing object store. Raises BucketNotFoundError."""
        return open_object_store(self, bucket, timeout)

    def delete_object_store(self, bucket: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        validate_bucket(bucket)
        try:
            return self.delete_stream(f"OBJ_{bucket}", timeout=timeout)
        except StreamNotFoundError:
            raise BucketNotFoundError(f"object store {bucket!r} not found") from None

    def object_store_names(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        for name in self.stream_names(subject="$O.*.M.>", timeout=timeout):
            if name.startswith("OBJ_"):
                yield name[4:]

    def object_stores(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[ObjectStoreStatus]:
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
    ) -> PubAck:
        """Publish to a stream and wait for it to store the message.

        Args:
            msg_id: de-duplication id (``Nats-Msg-Id``) within the stream's duplicate window.
            expected_*: the publish fails (WrongLastSequenceError) unless these hold.
            ttl: per-message TTL in seconds (or a Go duration string) on streams with allow_msg_ttl.
            retry_attempts: retries when no stream answers yet (ADR-22).
            stream: nats-py's name for ``expected_stream``.

        Raises:
            NoStreamResponseError: no stream captures ``subject``.
            WrongLastSequenceError: an expectation failed.
            TimeoutError: no PubAck within ``timeout`` (default: the context's).
        """
        hdrs = publish_headers(headers, msg_id, expected_stream or stream, expected_last_seq,
                               expected_last_subject_seq, expected_last_msg_id, ttl)
        return publish_sync(self._core, subject, payload, hdrs, self._api.deadline(timeout), retry_attempts)

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
    ) -> Future[PubAck]:
        """Publish without waiting; the future completes with the PubAck (or its error).

        Blocks while ``publish_async_max_pending`` publishes await their acks
        (at most the stall wait, then TimeoutError).
        """
        hdrs = publish_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                               expected_last_msg_id, ttl)
        return self._async.publish(subject, payload, hdrs)

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

    @property
    def publish_async_pending(self) -> int:
        """Async publishes of this context not yet settled."""
        return len(self._window.pending) if self._window is not None else 0

    def __repr__(self) -> str:
        return f"<JetStream {self._api.prefix}>"


__all__ = ["AccountInfo", "JetStream", "TimeoutError"]
