"""nats-py's ``nats.js.api``: the JetStream config and info classes, header names, constants.

The classes are the native ones (:mod:`natsjs_sync.jetstream`): durations in
seconds, every field a keyword; besides :meth:`replace` they answer nats-py's
``evolve()``, ``as_dict()`` and ``from_response()``.
"""

from __future__ import annotations

import enum

from ..jetstream.consumer_config import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    SequenceInfo,
)
from ..jetstream.context import AccountInfo, AccountLimits, APIStats, Tier
from ..jetstream.kv import KeyValueConfig
from ..jetstream.nats_py import StreamsListIterator
from ..jetstream.object_models import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
)
from ..jetstream.publish import PubAck
from ..jetstream.stream_config import (
    ClusterInfo,
    DiscardPolicy,
    ExternalStream,
    LostStreamData,
    PeerInfo,
    PersistMode,
    Placement,
    RawStreamMsg,
    RePublish,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamInfo,
    StreamSource,
    StreamSourceInfo,
    StreamState,
    SubjectTransform,
)
from ..jetstream.stream_config import _Model as Base

#: nats-py's names of the pause and reset answers.
ConsumerPause = ConsumerPauseResponse
ConsumerReset = ConsumerResetResponse


class Header(str, enum.Enum):
    """The header names JetStream reads and writes."""

    BATCH_COMMIT = "Nats-Batch-Commit"
    BATCH_ID = "Nats-Batch-Id"
    BATCH_SEQUENCE = "Nats-Batch-Sequence"
    CONSUMER_STALLED = "Nats-Consumer-Stalled"
    DESCRIPTION = "Description"
    EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
    EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
    EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
    EXPECTED_STREAM = "Nats-Expected-Stream"
    INCR = "Nats-Incr"
    LAST_CONSUMER = "Nats-Last-Consumer"
    LAST_STREAM = "Nats-Last-Stream"
    MSG_ID = "Nats-Msg-Id"
    MSG_TTL = "Nats-TTL"
    ROLLUP = "Nats-Rollup"
    SCHEDULE = "Nats-Schedule"
    SCHEDULE_NEXT = "Nats-Schedule-Next"
    SCHEDULE_ROLLUP = "Nats-Schedule-Rollup"
    SCHEDULE_SOURCE = "Nats-Schedule-Source"
    SCHEDULE_TARGET = "Nats-Schedule-Target"
    SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"
    SCHEDULE_TTL = "Nats-Schedule-TTL"
    SCHEDULER = "Nats-Scheduler"
    STATUS = "Status"


class StatusCode(str, enum.Enum):
    """Status codes of JetStream control messages."""

    SERVICE_UNAVAILABLE = "503"
    NO_MESSAGES = "404"
    REQUEST_TIMEOUT = "408"
    CONFLICT = "409"
    CONTROL_MESSAGE = "100"


SCHEDULE_YEARLY = "@yearly"
SCHEDULE_MONTHLY = "@monthly"
SCHEDULE_WEEKLY = "@weekly"
SCHEDULE_DAILY = "@daily"
SCHEDULE_HOURLY = "@hourly"

DEFAULT_PREFIX = "$JS.API"
INBOX_PREFIX = b"_INBOX."

__all__ = [
    "DEFAULT_PREFIX",
    "INBOX_PREFIX",
    "SCHEDULE_DAILY",
    "SCHEDULE_HOURLY",
    "SCHEDULE_MONTHLY",
    "SCHEDULE_WEEKLY",
    "SCHEDULE_YEARLY",
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "Base",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPause",
    "ConsumerReset",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "Header",
    "KeyValueConfig",
    "LostStreamData",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectStoreConfig",
    "PeerInfo",
    "PersistMode",
    "Placement",
    "PriorityPolicy",
    "PubAck",
    "RawStreamMsg",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StatusCode",
    "StorageType",
    "StoreCompression",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "StreamsListIterator",
    "SubjectTransform",
    "Tier",
]
