"""Consumer configuration and state (``ConsumerConfig``, ``ConsumerInfo``)."""

from __future__ import annotations

import datetime
import enum
from typing import Any

import msgspec

from .stream_config import ClusterInfo, _Open, equal_but_ts


class DeliverPolicy(str, enum.Enum):
    """Where a new consumer starts in its stream: all messages, the last, only new ones, a sequence,
    a time, or the last message of each subject.
    """

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(str, enum.Enum):
    """What a consumer waits for: no acks, an ack that covers every earlier message, an ack per
    message, or flow control (durable sourcing through a push consumer; server 2.14+).
    """

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"  # server 2.14+: durable sourcing through a push consumer


class ReplayPolicy(str, enum.Enum):
    """How fast a consumer delivers stored messages: at once, or at the pace they were stored."""

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(str, enum.Enum):
    """How pull requests of one priority group share a consumer (server 2.11+): overflow,
    a pinned client, or by priority (server 2.12+).
    """

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class ConsumerConfig(_Open, kw_only=True):
    """How a consumer delivers a stream's messages.

    ``ack_policy`` defaults to ``"explicit"``, as in the Go client (the
    server's own default would be ``"none"``); it is always sent. Durations
    are seconds; ``None`` leaves a setting to the server's default.

    Attributes:
        name: the consumer's name (default: made up by the server, or ``durable_name``).
        durable_name: makes it durable: it outlives its subscribers (nats-py's and older clients' way).
        description: free text.
        deliver_policy: where it starts (:class:`DeliverPolicy`): ``"all"``, ``"last"``, ``"new"``,
            ``"by_start_sequence"``, ``"by_start_time"`` or ``"last_per_subject"``.
        opt_start_seq: the start sequence, with ``deliver_policy="by_start_sequence"``.
        opt_start_time: the start time, with ``deliver_policy="by_start_time"``.
        ack_policy: ``"explicit"``, ``"all"`` or ``"none"`` (:class:`AckPolicy`).
        ack_wait: seconds it waits for an ack before delivering again (server default 30).
        max_deliver: the most times one message is delivered (``None``/-1: no limit).
        backoff: seconds to wait before each redelivery, in order (instead of ``ack_wait``).
        filter_subject: deliver only messages on this subject (wildcards allowed).
        filter_subjects: deliver only messages on these subjects.
        replay_policy: ``"instant"`` or ``"original"`` (the pace they were stored at).
        rate_limit_bps: the most bits per second a push consumer delivers.
        sample_freq: the share of acks sampled for monitoring, e.g. ``"10%"``.
        max_waiting: the most pull requests waiting at once (pull consumers).
        max_ack_pending: the most messages delivered and not yet acked (then it waits).
        flow_control: push consumers: the server paces delivery with flow-control messages.
        idle_heartbeat: push consumers: seconds between heartbeats while idle.
        headers_only: deliver the headers (and the size) without the data.
        max_batch: the largest ``batch`` a pull request may ask for.
        max_expires: the longest ``expires`` a pull request may ask for.
        max_bytes: the largest ``max_bytes`` a pull request may ask for.
        inactive_threshold: seconds without activity after which the server deletes it.
        num_replicas: replicas of its state (0: those of the stream).
        mem_storage: keep its state in memory even on a file stream.
        metadata: your own key-value strings kept with the consumer.
        deliver_subject: makes it a push consumer delivering to this subject.
        deliver_group: push consumers: the queue group that shares its messages.
        pause_until: it delivers nothing before this time (server 2.11+).
        priority_policy: ``"overflow"``, ``"pinned_client"`` or ``"prioritized"`` (:class:`PriorityPolicy`).
        priority_timeout: seconds a pinned client keeps its pin without pulling.
        priority_groups: the names of its priority groups.
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


class SequenceInfo(_Open, kw_only=True):
    """A position of a consumer: the consumer's own sequence and the stream's.

    Attributes:
        consumer_seq: the consumer's sequence (counts deliveries, redeliveries included).
        stream_seq: the stream sequence of that message.
        last_active: when the position last moved.
    """

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime.datetime | None = None


class PriorityGroupState(_Open, kw_only=True):
    group: str
    pinned_client_id: str | None = None
    pinned_ts: datetime.datetime | None = None


class ConsumerInfo(_Open, kw_only=True):
    """A consumer's configuration and state, as the server answered.

    Attributes:
        stream_name: the stream it reads.
        name: its name.
        config: its configuration (defaults filled in by the server).
        created: when it was made.
        delivered: the last message delivered.
        ack_floor: the last message below which everything is acked.
        num_ack_pending: messages delivered and not yet acked.
        num_redelivered: messages delivered more than once and not yet acked.
        num_waiting: pull requests waiting.
        num_pending: messages in the stream not yet delivered to it.
        cluster: its cluster, leader and replicas (clustered servers).
        push_bound: a push consumer has a subscriber on its deliver subject.
        paused: it is paused (server 2.11+).
        pause_remaining: seconds until it resumes, when paused.
        priority_groups: the state of each priority group (pinned client).
        ts: the server's time of the answer.
    """

    stream_name: str
    name: str
    config: ConsumerConfig
    created: datetime.datetime | None = None
    delivered: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
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

    def __eq__(self, other: object) -> bool:
        return equal_but_ts(self, other)


class ConsumerPauseResponse(_Open, kw_only=True):
    """The answer to a pause or resume: whether the consumer is paused, until when.

    Attributes:
        paused: it is paused now.
        pause_until: when it resumes.
        pause_remaining: seconds until it resumes.
    """

    paused: bool = False
    pause_until: datetime.datetime | None = None
    pause_remaining: float | None = None


class ConsumerResetResponse(ConsumerInfo, kw_only=True):
    """A consumer's info after a reset, and the stream sequence it restarts at.

    Attributes:
        reset_seq: the stream sequence delivery restarts at.
    """

    reset_seq: int = 0

    def as_dict(self) -> dict[str, Any]:
        """nats-py's ``as_dict()`` of its ``ConsumerReset``: the consumer's info under ``info``
        (as :meth:`ConsumerInfo.as_dict` writes it), beside ``reset_seq``.

        Returns:
            ``{"info": {...}, "reset_seq": n}``.
        """
        info = super().as_dict()
        return {"info": info, "reset_seq": info.pop("reset_seq", self.reset_seq)}
