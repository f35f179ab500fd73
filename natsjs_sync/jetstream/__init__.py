"""JetStream: streams, consumers, publishing, key-value and object stores."""

from .batch import BatchPublisher
from .consumer import Consumer
from .consumer_config import (
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
from .context import AccountInfo, APIStats, JetStream, Tier
from .counter import Counter, CounterEntry
from .fastbatch import BatchGap, FastBatchPublisher, FastPubAck
from .kv import Entry, KeyLister, KeyValue, KeyValueConfig, KeyValueOp, KeyValueStatus, KeyWatcher
from .message import MsgMetadata, SequencePair
from .messages import ConsumeContext, MessagesContext
from .nats_py import PullSubscription
from .object_models import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    ObjectStoreStatus,
)
from .object_store import ObjectResult, ObjectStore, ObjectWatcher
from .ordered import OrderedConsumer, OrderedMessages
from .publish import PubAck
from .pull import MessageBatch
from .push import OrderedSubscription, PushConsumeContext, PushConsumer, PushSubscription
from .stream import Stream
from .stream_config import (
    DiscardPolicy,
    ExternalStream,
    PersistMode,
    Placement,
    RawStreamMsg,
    RePublish,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamConsumerSource,
    StreamInfo,
    StreamSource,
    StreamState,
    SubjectTransform,
)

__all__ = [
    "APIStats",
    "AccountInfo",
    "AckPolicy",
    "BatchGap",
    "BatchPublisher",
    "ConsumeContext",
    "Consumer",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPauseResponse",
    "ConsumerResetResponse",
    "Counter",
    "CounterEntry",
    "DeliverPolicy",
    "DiscardPolicy",
    "Entry",
    "ExternalStream",
    "FastBatchPublisher",
    "FastPubAck",
    "JetStream",
    "KeyLister",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
    "MessageBatch",
    "MessagesContext",
    "MsgMetadata",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectResult",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "OrderedConsumer",
    "OrderedMessages",
    "OrderedSubscription",
    "PersistMode",
    "Placement",
    "PriorityPolicy",
    "PubAck",
    "PullSubscription",
    "PushConsumeContext",
    "PushConsumer",
    "PushSubscription",
    "RawStreamMsg",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "SequencePair",
    "StorageType",
    "StoreCompression",
    "Stream",
    "StreamConfig",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamSource",
    "StreamState",
    "SubjectTransform",
    "Tier",
]
