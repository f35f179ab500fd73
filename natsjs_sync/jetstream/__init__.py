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
from .message import MsgMetadata, SequencePair
from .publish import PubAck
from .pull import ConsumeContext, MessageBatch, MessagesContext
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
    "JetStream",
    "MessageBatch",
    "MessagesContext",
    "MsgMetadata",
    "Placement",
    "PriorityPolicy",
    "PubAck",
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
