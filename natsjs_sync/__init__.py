"""natsjs_sync: a synchronous, thread-based client for NATS and JetStream.

>>> import natsjs_sync as nats
>>> nc = nats.connect("nats://127.0.0.1:4222")       # doctest: +SKIP
>>> nc.publish("greet", b"hello")                   # doctest: +SKIP
"""

import logging
from typing import TYPE_CHECKING

from ._connect import connect
from ._timeout import USE_DEFAULT
from ._version import __version__
from .client import Client, Stats
from .errors import (
    ApiLevelNotSupportedError,
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    BadSubscriptionError,
    BucketNotFoundError,
    ConnectionClosedError,
    ConnectionError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    DigestMismatchError,
    FeatureNotSupportedError,
    JetStreamError,
    JetStreamNotEnabledError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueError,
    MaxPayloadError,
    MsgNotFoundError,
    NatsError,
    NoHeartbeatError,
    NoMessagesError,
    NoRespondersError,
    NoServersError,
    NotSentError,
    ObjectNotFoundError,
    ObjectStoreError,
    OutboundBufferLimitError,
    PayloadDecodeError,
    PayloadEncodeError,
    PermissionsError,
    ProtocolError,
    SecureConnRequiredError,
    ServerError,
    SlowConsumerError,
    StaleConnectionError,
    StreamNameInUseError,
    StreamNotFoundError,
    TimeoutError,
    WrongLastSequenceError,
)
from .msg import Msg
from .protocol.headers import Headers
from .protocol.nuid import new_inbox
from .subscription import Subscription

# A library logs; the application decides where that goes (nothing reaches
# stderr unless it configures logging).
logging.getLogger("natsjs_sync").addHandler(logging.NullHandler())

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from .jetstream import (
        ConsumerConfig,
        JetStream,
        KeyValueConfig,
        ObjectMeta,
        ObjectStoreConfig,
        PubAck,
        StreamConfig,
    )

# The JetStream names users reach for first, importable from the top level
# too; loaded on first use so that core-only programs do not import JetStream.
_JETSTREAM_NAMES = frozenset({
    "JetStream", "StreamConfig", "ConsumerConfig", "KeyValueConfig", "ObjectStoreConfig", "ObjectMeta", "PubAck",
})


def __getattr__(name: str) -> object:
    if name in _JETSTREAM_NAMES:
        from . import jetstream

        return getattr(jetstream, name)
    raise AttributeError(f"module 'natsjs_sync' has no attribute {name!r}")


__all__ = [
    "USE_DEFAULT",
    "ApiLevelNotSupportedError",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "BadSubscriptionError",
    "BucketNotFoundError",
    "Client",
    "ConnectionClosedError",
    "ConnectionError",
    "ConsumerConfig",
    "ConsumerDeletedError",
    "ConsumerNotFoundError",
    "DigestMismatchError",
    "FeatureNotSupportedError",
    "Headers",
    "JetStream",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "KeyDeletedError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValueConfig",
    "KeyValueError",
    "MaxPayloadError",
    "Msg",
    "MsgNotFoundError",
    "NatsError",
    "NoHeartbeatError",
    "NoMessagesError",
    "NoRespondersError",
    "NoServersError",
    "NotSentError",
    "ObjectMeta",
    "ObjectNotFoundError",
    "ObjectStoreConfig",
    "ObjectStoreError",
    "OutboundBufferLimitError",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "PermissionsError",
    "ProtocolError",
    "PubAck",
    "SecureConnRequiredError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "Stats",
    "StreamConfig",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "Subscription",
    "TimeoutError",
    "WrongLastSequenceError",
    "__version__",
    "connect",
    "new_inbox",
]
