"""natsjs_sync: a synchronous, thread-based client for NATS and JetStream.

>>> import natsjs_sync as nats
>>> nc = nats.connect("nats://127.0.0.1:4222")       # doctest: +SKIP
>>> nc.publish("greet", b"hello")                   # doctest: +SKIP
"""

from ._timeout import USE_DEFAULT
from ._version import __version__
from .client import Client, Stats, connect
from .errors import (
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    BadSubscriptionError,
    BucketNotFoundError,
    ConnectionClosedError,
    ConnectionError,
    ConsumerNotFoundError,
    DigestMismatchError,
    JetStreamError,
    JetStreamNotEnabledError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueError,
    MaxPayloadError,
    MsgNotFoundError,
    NatsError,
    NoMessagesError,
    NoRespondersError,
    NoServersError,
    ObjectNotFoundError,
    ObjectStoreError,
    OutboundBufferLimitError,
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

__all__ = [
    "USE_DEFAULT",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "BadSubscriptionError",
    "BucketNotFoundError",
    "Client",
    "ConnectionClosedError",
    "ConnectionError",
    "ConsumerNotFoundError",
    "DigestMismatchError",
    "Headers",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "KeyDeletedError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValueError",
    "MaxPayloadError",
    "Msg",
    "MsgNotFoundError",
    "NatsError",
    "NoMessagesError",
    "NoRespondersError",
    "NoServersError",
    "ObjectNotFoundError",
    "ObjectStoreError",
    "OutboundBufferLimitError",
    "PermissionsError",
    "ProtocolError",
    "SecureConnRequiredError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "Stats",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "Subscription",
    "TimeoutError",
    "WrongLastSequenceError",
    "__version__",
    "connect",
    "new_inbox",
]
