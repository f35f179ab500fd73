"""nats-py's ``nats.js.errors`` names, as members of the one exception tree.

Each name is the native class of the same meaning (or an alias of it), so one
``except`` clause serves code written either way: ``except NotFoundError``
catches :class:`~natsjs_sync.errors.StreamNotFoundError` too.
"""

from __future__ import annotations

from ..errors import (
    APIError,
    BadBucketError,
    BadObjectMetaError,
    BadRequestError,
    BucketNotFoundError,
    ConsumerInvalidResetError,
    DigestMismatchError,
    InvalidBucketNameError,
    InvalidKeyError,
    InvalidObjectNameError,
    JetStreamError,
    JetStreamServerError,
    KeyDeletedError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyValueError,
    KeyWrongLastSequenceError,
    LinkIsABucketError,
    NoKeysError,
    NoStreamResponseError,
    NotFoundError,
    ObjectAlreadyExists,
    ObjectDeletedError,
    ObjectNotFoundError,
    ServiceUnavailableError,
    TooManyStalledMsgsError,
)
from ..errors import JetStreamTimeoutError as FetchTimeoutError

#: ``nats.js.errors.Error``: the base of every JetStream error.
Error = JetStreamError
#: ``nats.js.errors.ServerError``: the API answered 500.
ServerError = JetStreamServerError


class ConsumerSequenceMismatchError(JetStreamError):
    """An ordered consumer saw a gap in the consumer sequence."""

    def __init__(self, stream_resume_sequence: int | None = None, consumer_sequence: int | None = None,
                 last_consumer_sequence: int | None = None):
        self.stream_resume_sequence = stream_resume_sequence
        self.consumer_sequence = consumer_sequence
        self.last_consumer_sequence = last_consumer_sequence
        super().__init__(f"consumer sequence mismatch: {consumer_sequence} after {last_consumer_sequence}")


class KeyValueLimitMarkerTTLNotSupportedError(JetStreamError):
    """Limit marker TTLs need nats-server 2.11 or newer."""


__all__ = [
    "APIError",
    "BadBucketError",
    "BadObjectMetaError",
    "BadRequestError",
    "BucketNotFoundError",
    "ConsumerInvalidResetError",
    "ConsumerSequenceMismatchError",
    "DigestMismatchError",
    "Error",
    "FetchTimeoutError",
    "InvalidBucketNameError",
    "InvalidKeyError",
    "InvalidObjectNameError",
    "KeyDeletedError",
    "KeyHistoryTooLargeError",
    "KeyNotFoundError",
    "KeyValueError",
    "KeyValueLimitMarkerTTLNotSupportedError",
    "KeyWrongLastSequenceError",
    "LinkIsABucketError",
    "NoKeysError",
    "NoStreamResponseError",
    "NotFoundError",
    "ObjectAlreadyExists",
    "ObjectDeletedError",
    "ObjectNotFoundError",
    "ServerError",
    "ServiceUnavailableError",
    "TooManyStalledMsgsError",
]
