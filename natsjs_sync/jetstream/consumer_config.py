"""Consumer configuration and state (``ConsumerConfig``, ``ConsumerInfo``)."""

from __future__ import annotations

import datetime
import enum

from .stream_config import ClusterInfo, _Open


class DeliverPolicy(str, enum.Enum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(str, enum.Enum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"  # server 2.14+: durable sourcing through a push consumer


class ReplayPolicy(str, enum.Enum):
    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(str, enum.Enum):
    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class ConsumerConfig(_Open, frozen=True, kw_only=True):
    """How a consumer delivers a stream's messages.

    ``ack_policy`` defaults to ``"explicit"``, as in the Go client (the
    server's own default would be ``"none"``); it is always sent.
    """

    name: str | None = None
    durable_name: str | None = None
    description: str | None = None
    deliver_policy: str = "all"
    opt_start_seq: int | None = None
    opt_start_time: datetime.datetime | None = None
    ack_policy: str = "explicit"
    ack_wait: float | None = None
    max_deliver: int | None = None
    backoff: list[float] | None = None
    filter_subject: str | None = None
    filter_subjects: list[str] | None = None
    replay_policy: str = "instant"
    rate_limit_bps: int | None = None
    sample_freq: str | None = None
    max_waiting: int | None = None
    max_ack_pending: int | None = None
    flow_control: bool = False
    idle_heartbeat: float | None = None
    headers_only: bool = False
    max_batch: int | None = None
    max_expires: float | None = None
    max_bytes: int | None = None
    inactive_threshold: float | None = None
    num_replicas: int = 0
    mem_storage: bool = False
    metadata: dict[str, str] | None = None
    deliver_subject: str | None = None
    deliver_group: str | None = None
    pause_until: datetime.datetime | None = None
    priority_policy: str | None = None
    priority_timeout: float | None = None
    priority_groups: list[str] | None = None


class SequenceInfo(_Open, frozen=True, kw_only=True):
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime.datetime | None = None


class PriorityGroupState(_Open, frozen=True, kw_only=True):
    group: str
    pinned_client_id: str | None = None
    pinned_ts: datetime.datetime | None = None


class ConsumerInfo(_Open, frozen=True, kw_only=True):
    stream_name: str
    name: str
    config: ConsumerConfig
    created: datetime.datetime | None = None
    delivered: SequenceInfo = SequenceInfo()
    ack_floor: SequenceInfo = SequenceInfo()
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: float | None = None
    priority_groups: list[PriorityGroupState] | None = None
    ts: datetime.datetime | None = None


class ConsumerPauseResponse(_Open, frozen=True, kw_only=True):
    """The answer to a pause or resume: whether the consumer is paused, until when."""

    paused: bool = False
    pause_until: datetime.datetime | None = None
    pause_remaining: float | None = None


class ConsumerResetResponse(ConsumerInfo, frozen=True, kw_only=True):
    """A consumer's info after a reset, and the stream sequence it restarts at."""

    reset_seq: int = 0
