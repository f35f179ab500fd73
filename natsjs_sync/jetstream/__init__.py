"""JetStream: streams, consumers, publishing, key-value and object stores."""

from .consumer import Consumer
from .consumer_config import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    SequenceInfo,
)
from .context import AccountInfo, JetStream
from .kv import Entry, KeyValue, KeyValueConfig, KeyValueOp, KeyValueStatus, KeyWatcher
from .message import MsgMetadata, SequencePair
from .nats_py import PullSubscription
from .object_store import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectResult,
    ObjectStore,
    ObjectStoreConfig,
    ObjectStoreStatus,
    ObjectWatcher,
)
from .ordered import OrderedConsumer, OrderedMessages
from .publish import PubAck
from .pull import ConsumeContext, MessageBatch, MessagesContext
from .push import OrderedSubscription, PushSubscription
from .stream import Stream
from .stream_config import (
    DiscardPolicy,
    Placement,
    RawStreamMsg,
    RePublish,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamSource,
    StreamState,
    SubjectTransform,
)

__all__ = [
    "AccountInfo",
    "AckPolicy",
    "ConsumeContext",
    "Consumer",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "Entry",
    "JetStream",
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
    "Placement",
    "PriorityPolicy",
    "PubAck",
    "PullSubscription",
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
    "StreamInfo",
    "StreamSource",
    "StreamState",
    "SubjectTransform",
]
