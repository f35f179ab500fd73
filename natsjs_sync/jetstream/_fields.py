"""Keyword arguments of the config-taking calls, for type checkers.

``js.create_stream(name=..., subjects=[...])`` takes the fields of
:class:`StreamConfig` as keywords; these TypedDicts let mypy and IDEs check
their names and types (a test keeps them equal to the structs' fields).
``None`` for a limit (``max_bytes``, ``max_age``, ``ttl`` ...) means no limit.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from .stream_config import Placement, RePublish, StreamConsumerLimits, StreamSource, SubjectTransform

__all__ = ["ConsumerConfigFields", "KeyValueConfigFields", "ObjectStoreConfigFields", "StreamConfigFields"]


class StreamConfigFields(TypedDict, total=False):
    """The fields of :class:`~natsjs_sync.jetstream.StreamConfig` as keyword arguments."""
    name: str
    description: str | None
    subjects: list[str] | None
    retention: str
    max_consumers: int | None
    max_msgs: int | None
    max_bytes: int | None
    discard: str
    discard_new_per_subject: bool
    max_age: float | None
    max_msgs_per_subject: int | None
    max_msg_size: int | None
    storage: str
    num_replicas: int
    no_ack: bool
    duplicate_window: float
    placement: Placement | None
    mirror: StreamSource | None
    sources: list[StreamSource] | None
    sealed: bool
    deny_delete: bool
    deny_purge: bool
    allow_rollup_hdrs: bool
    allow_direct: bool
    mirror_direct: bool
    republish: RePublish | None
    subject_transform: SubjectTransform | None
    compression: str
    first_seq: int
    metadata: dict[str, str] | None
    consumer_limits: StreamConsumerLimits | None
    allow_msg_ttl: bool
    subject_delete_marker_ttl: float
    allow_msg_counter: bool
    allow_atomic: bool
    allow_msg_schedules: bool
    persist_mode: str | None
    allow_batched: bool
    template_owner: str | None


class ConsumerConfigFields(TypedDict, total=False):
    """The fields of :class:`~natsjs_sync.jetstream.ConsumerConfig` as keyword arguments."""
    name: str | None
    durable_name: str | None
    description: str | None
    deliver_policy: str
    opt_start_seq: int | None
    opt_start_time: datetime.datetime | None
    ack_policy: str
    ack_wait: float | None
    max_deliver: int | None
    backoff: list[float] | None
    filter_subject: str | None
    filter_subjects: list[str] | None
    replay_policy: str
    rate_limit_bps: int | None
    sample_freq: str | None
    max_waiting: int | None
    max_ack_pending: int | None
    flow_control: bool
    idle_heartbeat: float | None
    headers_only: bool
    max_batch: int | None
    max_expires: float | None
    max_bytes: int | None
    inactive_threshold: float | None
    num_replicas: int
    mem_storage: bool
    metadata: dict[str, str] | None
    deliver_subject: str | None
    deliver_group: str | None
    pause_until: datetime.datetime | None
    priority_policy: str | None
    priority_timeout: float | None
    priority_groups: list[str] | None


class KeyValueConfigFields(TypedDict, total=False):
    """The fields of :class:`~natsjs_sync.jetstream.KeyValueConfig` as keyword arguments."""
    bucket: str
    description: str | None
    max_value_size: int | None
    history: int
    ttl: float | None
    max_bytes: int | None
    storage: str
    replicas: int
    placement: Placement | None
    republish: RePublish | None
    mirror: StreamSource | None
    sources: list[StreamSource] | None
    compression: bool
    metadata: dict[str, str] | None
    limit_marker_ttl: float | None
    direct: bool


class ObjectStoreConfigFields(TypedDict, total=False):
    """The fields of :class:`~natsjs_sync.jetstream.ObjectStoreConfig` as keyword arguments."""
    bucket: str
    description: str | None
    ttl: float | None
    max_bytes: int | None
    storage: str
    replicas: int
    placement: Placement | None
    compression: bool
    metadata: dict[str, str] | None
