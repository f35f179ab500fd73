"""The one exception tree of natsjs_sync.

::

    NatsError                         (nats-py: nats.errors.Error)
    ├── ProtocolError                 malformed bytes from the peer
    ├── ConnectionError               (alias: NatsConnectionError; also a builtin ConnectionError)
    │   ├── ConnectionClosedError     the client is closed, or closed while you waited
    │   │   └── ConnectionDrainingError   the client is draining (no new subscriptions)
    │   ├── NoServersError            no server in the pool could be reached; raised as
    │   │       NoServersTimeoutError (also a TimeoutError), NoServersRefusedError,
    │   │       NoServersTlsError or NoServersTlsCertificateError after such a last error
    │   ├── ConnectRefusedError       also a builtin ConnectionRefusedError
    │   ├── AuthorizationError        the server refused our credentials
    │   │   └── InvalidUserCredentialsError  a credentials file without a user JWT and seed
    │   ├── SecureConnRequiredError, SecureConnWantedError, SecureConnFailedError
    │   │   └── TlsHandshakeError     also an ssl.SSLError
    │   │       └── TlsCertificateError  also an ssl.SSLCertVerificationError
    │   ├── StaleConnectionError      too many PINGs went unanswered
    │   │   └── UnexpectedEOF         the server closed the connection
    │   ├── ConnectionReconnectingError
    │   └── OutboundBufferLimitError  reconnecting, and the reconnect buffer is full
    ├── TimeoutError                  also a builtin (and asyncio's) TimeoutError
    │   ├── NotSentError              the request was withdrawn unsent at its deadline: safe to retry
    │   ├── FlushTimeoutError, DrainTimeoutError
    │   ├── PubAckTimeoutError        also concurrent.futures' TimeoutError
    ├── NoRespondersError             a request found nobody subscribed (status 503)
    ├── BadSubjectError               also a ValueError
    ├── BadHeaderError                also a ValueError
    ├── MaxPayloadError               also a ValueError
    ├── PayloadDecodeError            a payload that does not decode to the type asked for; also a ValueError
    ├── PayloadEncodeError            a value a codec cannot encode; also a TypeError
    ├── BadTimeoutError, InvalidCallbackTypeError, JsonParseError, ServerNotInPoolError
    ├── InvalidServerUrlError         also a ValueError
    ├── SlowConsumerError             a subscription dropped messages
    ├── BadSubscriptionError          the subscription was unsubscribed or closed
    ├── ServerError                   a -ERR line the server sent
    │   └── PermissionsError          a permissions violation
    ├── ServiceError                  a service's error reply (.code, .description, .data)
    └── JetStreamError                .code, .err_code, .description (nats-py: nats.js.errors.Error)
        ├── APIError                  an error answer of the API, by err_code, else by status:
        │   ├── NotFoundError (404): StreamNotFoundError, ConsumerNotFoundError, MsgNotFoundError,
        │   │       BucketNotFoundError, KeyNotFoundError (KeyDeletedError), ObjectNotFoundError
        │   ├── BadRequestError (400): StreamNameInUseError, ConsumerExistsError,
        │   │       WrongLastSequenceError, KeyExistsError, ConsumerInvalidResetError
        │   │       (KeyWrongLastSequenceError is both a KeyExistsError and a WrongLastSequenceError)
        │   ├── ServiceUnavailableError (503): JetStreamNotEnabledError
        │   ├── JetStreamServerError (500; nats-py: nats.js.errors.ServerError)
        │   ├── KeyValueError: NoKeysError, ... ; BadBucketError
        ├── JetStreamTimeoutError     also a TimeoutError (nats-py: FetchTimeoutError)
        │   └── TooManyStalledMsgsError
        ├── FeatureNotSupportedError  the connected server is too old (raised before sending)
        │   └── ApiLevelNotSupportedError  the answering server is below the API level asked for
        ├── InvalidResponseError      a reply this client cannot decode
        ├── NoMessagesError, NoStreamResponseError
        ├── ConsumerDeletedError, MsgAlreadyAckdError, NotJSMessageError, NoHeartbeatError
        ├── JetStreamPublisherClosedError  the context was released before the PubAck came
        ├── BatchPublishError         an atomic batch was refused or left incomplete
        │   └── BatchWrongLastSequenceError  also a WrongLastSequenceError
        └── ObjectStoreError: ObjectNotFoundError, ObjectDeletedError, DigestMismatchError, ...

The names nats-py uses are all here (and in ``natsjs_sync.js.errors``), with
nats-py's bases, so an ``except`` written for either client catches the same errors.

Lower-level exceptions (``OSError``, ``ssl.SSLError``) are translated at the
connection boundary with ``raise ... from exc`` so the cause stays visible.
JetStream API errors are matched by the server's ``err_code``, never by text
(see :data:`JS_ERR_CODES`).
"""

from __future__ import annotations

import builtins
import ssl
import sys

if sys.version_info < (3, 11):  # asyncio's TimeoutError became the builtin one in 3.11
    from asyncio.exceptions import TimeoutError as _AsyncioOnlyTimeoutError

    class _AsyncioTimeoutError(_AsyncioOnlyTimeoutError, builtins.TimeoutError):
        """Before 3.11 asyncio's TimeoutError and the builtin one are two classes:
        natsjs_sync's TimeoutError is both, as it is on later versions."""

else:
    _AsyncioTimeoutError = builtins.TimeoutError


class NatsError(Exception):
    """Base class of every exception natsjs_sync raises on purpose."""


#: nats-py's name for the base class (``nats.errors.Error``).
Error = NatsError


class ProtocolError(NatsError):
    """The peer sent bytes that are not valid NATS protocol."""


class NatsConnectionError(NatsError, builtins.ConnectionError):
    """Base class for problems with the connection to the server.

    Also a builtin :class:`ConnectionError` (so an ``except ConnectionError``
    written for sockets catches it too), as :class:`TimeoutError` is also the
    builtin one.
    """


ConnectionError = NatsConnectionError  # noqa: A001 - the documented public name


class ConnectionClosedError(NatsConnectionError):
    """The client is closed (or was closed while the caller waited)."""


class NoServersError(NatsConnectionError):
    """No server in the pool could be reached."""


class AuthorizationError(NatsConnectionError):
    """The server rejected the credentials (its text is in the message)."""


class InvalidUserCredentialsError(AuthorizationError, ValueError):
    """Credentials (a ``.creds`` file or its content) that hold no user JWT and nkey seed.

    Its text starts as nats-py's (``nats: invalid user credentials``); an
    :class:`AuthorizationError` too, which this client raised for it before.
    """


class SecureConnRequiredError(NatsConnectionError):
    """The server requires TLS but the client was told not to use it."""


class StaleConnectionError(NatsConnectionError):
    """The server stopped answering PINGs."""


class UnexpectedEOF(StaleConnectionError):
    """The server closed the connection (nats-py's name)."""


class SecureConnWantedError(NatsConnectionError):
    """TLS was asked for but the server does not offer it."""


class SecureConnFailedError(NatsConnectionError):
    """The TLS handshake failed."""


class ConnectionDrainingError(ConnectionClosedError):
    """The client is draining: no new subscriptions or requests.

    A :class:`ConnectionClosedError` too: a draining client is on its way to closed,
    and code written before this class was raised catches it there.
    """


class ConnectionReconnectingError(NatsConnectionError):
    """The client is reconnecting."""




class InvalidServerUrlError(NatsError, ValueError):
    """A server URL that is not a NATS URL, or a server list nats-py refuses (also a
    :class:`ValueError`; nats-py raises ``nats.errors.Error``)."""


class ServerNotInPoolError(NatsError):
    """The server to reconnect to is not in the server pool."""


class OutboundBufferLimitError(NatsConnectionError):
    """Publishing while reconnecting, and ``pending_size`` bytes are already held."""


# A failed connect is both ours and the lower-level error nats-py lets through
# (it raises ssl.SSLError, ConnectionRefusedError or TimeoutError as they come):
# an ``except`` written for either client catches it.


class ConnectRefusedError(NatsConnectionError, builtins.ConnectionRefusedError):
    """Nobody listens at a server's address (also a builtin :class:`ConnectionRefusedError`)."""

    __str__ = Exception.__str__  # the message, not OSError's "[Errno ...]" from the copied fields


class TlsHandshakeError(SecureConnFailedError, ssl.SSLError):
    """The TLS handshake with a server failed (also an :class:`ssl.SSLError`)."""

    __str__ = Exception.__str__  # ssl.SSLError's would show the args tuple


class TlsCertificateError(TlsHandshakeError, ssl.SSLCertVerificationError):
    """A server's certificate failed verification (also an :class:`ssl.SSLCertVerificationError`)."""


class TimeoutError(NatsError, _AsyncioTimeoutError):  # noqa: A001
    """A blocking call ran out of time. Also a builtin :class:`TimeoutError`
    (and :class:`asyncio.TimeoutError`, the same class since Python 3.11)."""


class FlushTimeoutError(TimeoutError):
    """A flush got no PONG in time."""


class NotSentError(TimeoutError):
    """A request ran out of time before any of it left the client: it was withdrawn.

    Its bytes were still waiting in the client's write buffer (the connection
    was away, reconnecting, or behind a write the server did not take in
    time); at the deadline they were taken back out, so the server never saw
    the request and nothing will act on it later. Retrying it is safe, even
    without a message id. Raised by :meth:`Client.request
    <natsjs_sync.Client.request>`, JetStream publishes and every JetStream API
    call. A plain :class:`TimeoutError` from those calls means the opposite:
    the request was sent, and may have been (or yet be) acted on; retry a
    JetStream publish with the same ``msg_id`` so it is stored once.
    """


class NoServersTimeoutError(NoServersError, TimeoutError):
    """No server could be reached, the last one for want of time (also a :class:`TimeoutError`)."""

    __str__ = Exception.__str__  # the message, not OSError's "[Errno ...]" from the copied fields


class NoServersRefusedError(NoServersError, ConnectRefusedError):
    """No server could be reached, the last one refusing the TCP connection."""


class NoServersTlsError(NoServersError, TlsHandshakeError):
    """No server could be reached, the last one failing the TLS handshake."""


class NoServersTlsCertificateError(NoServersError, TlsCertificateError):
    """No server could be reached, the last one's certificate failing verification."""


class DrainTimeoutError(TimeoutError):
    """Draining took longer than its timeout; the client was closed anyway."""


class BadTimeoutError(NatsError, ValueError):
    """A timeout that is not a number of seconds."""


class JsonParseError(NatsError):
    """A JSON payload the client could not parse."""


class InvalidCallbackTypeError(NatsError, TypeError):
    """A callback that is not a plain function (an ``async def`` is refused)."""


class NoRespondersError(NatsError):
    """A request was sent to a subject nobody is subscribed to."""


class BadSubjectError(NatsError, ValueError):
    """A subject or queue name is not valid."""


class BadHeaderError(NatsError, ValueError):
    """A header key or value cannot be sent."""


class MaxPayloadError(NatsError, ValueError):
    """The message is larger than the server's ``max_payload``."""


class PayloadDecodeError(NatsError, ValueError):
    """A payload that does not decode to the type asked for (see :doc:`codecs`).

    Also a :class:`ValueError`, as msgspec's and pydantic's validation errors are.

    Attributes:
        subject: the message's subject (``""`` when the bytes came from no message).
        stream_sequence: its stream sequence (a JetStream message, a KV entry), else ``None``.
        type: the type asked for.
        field: where decoding failed, as a path (``"$.items[0].qty"``), or ``None``
            when the payload was not valid JSON/MessagePack at all.
        content_type: the content type the payload was read as.
        reason: what the codec said.
    """

    def __init__(self, reason: str, *, type: object = None, field: str | None = None,  # noqa: A002
                 content_type: str = "", subject: str = "", stream_sequence: int | None = None):
        self.reason = reason
        self.type = type
        self.field = field
        self.content_type = content_type
        self.subject = subject
        self.stream_sequence = stream_sequence
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" on {self.subject!r}" if self.subject else ""
        if self.stream_sequence is not None:
            where += f" (stream sequence {self.stream_sequence})"
        name = getattr(self.type, "__name__", None) or repr(self.type)
        at = f" at {self.field}" if self.field else ""
        return f"payload{where} does not decode to {name} as {self.content_type or 'an unknown format'}{at}: " \
               f"{self.reason}"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_decode_error, (self.reason, self.type, self.field, self.content_type, self.subject,
                                        self.stream_sequence))


def _rebuild_decode_error(reason: str, type: object, field: str | None, content_type: str,  # noqa: A002
                          subject: str, stream_sequence: int | None) -> PayloadDecodeError:
    return PayloadDecodeError(reason, type=type, field=field, content_type=content_type, subject=subject,
                              stream_sequence=stream_sequence)


class PayloadEncodeError(NatsError, TypeError):
    """A value a codec cannot encode (an unsupported type, an int too large for JSON).

    Also a :class:`TypeError`, as ``json.dumps`` raises for such values.
    """


class SlowConsumerError(NatsError):
    """A subscription could not keep up and messages were dropped for it.

    Attributes:
        subject: the subscription's subject.
        sid: the subscription id.
        dropped: how many messages this subscription has dropped so far.
    """

    def __init__(self, message: str, subject: str = "", sid: int = 0, dropped: int = 0):
        super().__init__(message)
        self.subject = subject
        self.sid = sid
        self.dropped = dropped


class BadSubscriptionError(NatsError):
    """The subscription is unsubscribed, drained or its client closed."""


class ServerError(NatsError):
    """The server sent ``-ERR``; the text is the message."""


class PermissionsError(ServerError):
    """The server refused a publish or subscribe for lack of permission."""


class ServiceError(NatsError):
    """A service error (ADR-32): the reply carried ``Nats-Service-Error-Code`` and
    ``Nats-Service-Error`` headers, or a service handler raised it to answer with them.

    Attributes:
        code: the error code, a string holding a number (``"400"``, ``"500"``).
        description: the text for the user.
        data: the payload of the error reply (often empty).
    """

    def __init__(self, code: str | int, description: str, data: bytes = b""):
        if isinstance(code, bool) or not isinstance(code, (str, int)) or str(code) == "":
            raise ValueError(f"ServiceError code must be a non-empty str or an int, got {code!r}")
        if not isinstance(description, str):
            raise TypeError(f"ServiceError description must be a str, not {type(description).__name__}")
        self.code = str(code)
        self.description = description
        self.data = bytes(data)
        super().__init__(f"{self.code}:{self.description}")

    def __repr__(self) -> str:
        # The form nats-py and nats.go put in an endpoint's ``last_error``.
        return f"{self.code}:{self.description}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServiceError):
            return NotImplemented
        return (self.code, self.description, self.data) == (other.code, other.description, other.data)

    def __hash__(self) -> int:
        return hash((self.code, self.description))

    def __reduce__(self) -> tuple[type[ServiceError], tuple[str, str, bytes]]:
        return (type(self), (self.code, self.description, self.data))

    def to_dict(self) -> dict[str, str]:
        """``{"code": ..., "description": ...}`` (nats-py's form)."""
        return {"code": self.code, "description": self.description}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> ServiceError:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: no code in ``data``.
        """
        return cls(code=data.get("code", ""), description=data.get("description", ""))


# --------------------------------------------------------------------- JetStream


class JetStreamError(NatsError):
    """An error answered by the JetStream API.

    Attributes:
        code: the HTTP-like status code (e.g. 404, 400, 503).
        err_code: the JetStream error code, stable across server versions.
        description: the server's text.
        stream: the stream the failed call named, if any.
        consumer: the consumer the failed call named, if any.
    """

    def __init__(
        self,
        description: str = "",
        code: int | None = None,
        err_code: int | None = None,
        stream: str | None = None,
        consumer: str | None = None,
    ):
        self.code = code
        self.err_code = err_code
        self.description = description
        self.stream = stream
        self.consumer = consumer
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.description or type(self).__name__
        stream, consumer = self.stream, self.consumer
        # The server's "stream not found" names no stream: say which one.
        if consumer and text.startswith("consumer not found"):
            text = f"consumer {consumer!r}" + (f" of stream {stream!r}" if stream else "") + text[8:]
            stream = consumer = None
        elif stream and text.startswith("stream not found"):
            text = f"stream {stream!r}" + text[6:]
            stream = None
        where = [f"{kind} {name!r}" for kind, name in (("stream", stream), ("consumer", consumer)) if name]
        if self.code is not None or self.err_code is not None:
            where.append(f"code={self.code}, err_code={self.err_code}")
        return f"{text} ({', '.join(where)})" if where else text


class APIError(JetStreamError):
    """An error answer of the JetStream API (nats-py's ``nats.js.errors.APIError``)."""


class NotFoundError(APIError):
    """The API answered 404: what was asked for does not exist."""


class BadRequestError(APIError):
    """The API answered 400: the request was refused."""


class ServiceUnavailableError(APIError):
    """The API answered 503: JetStream is not available."""


class JetStreamServerError(APIError):
    """The API answered 500 (``nats.js.errors.ServerError`` in nats-py)."""


class JetStreamNotEnabledError(ServiceUnavailableError):
    """JetStream is not enabled on the server or for this account."""


class FeatureNotSupportedError(JetStreamError):
    """The connected server cannot honour an option or call; nothing was sent.

    Attributes:
        feature: what was asked for (e.g. ``"per-message TTL"``).
        required: the server version it needs (e.g. ``"2.11.0"``).
        server_version: the connected server's version.
    """

    def __init__(self, feature: str, required: str, server_version: str):
        self.feature = feature
        self.required = required
        self.server_version = server_version
        super().__init__(f"{feature} needs nats-server {required} or newer; the connected server is "
                         f"{server_version or 'of an unknown version'}")


class ApiLevelNotSupportedError(FeatureNotSupportedError):
    """The server that answered an API request is below the JetStream API level
    it needs (ADR-44: ``Nats-Required-Api-Level``), e.g. an older server in a
    cluster under a rolling upgrade. Nothing was changed."""

    def __init__(self, description: str = "", code: int | None = None, err_code: int | None = None,
                 stream: str | None = None, consumer: str | None = None):
        JetStreamError.__init__(self, description, code=code, err_code=err_code, stream=stream, consumer=consumer)
        self.feature = "the requested JetStream API level"
        self.required = ""
        self.server_version = ""


class InvalidResponseError(JetStreamError):
    """A reply (API response, stored JSON) that this client cannot decode."""


class StreamNotFoundError(NotFoundError):
    """The stream does not exist."""


class ConsumerNotFoundError(NotFoundError):
    """The consumer does not exist."""


class StreamNameInUseError(BadRequestError):
    """A stream of that name exists with a different configuration."""


class MsgNotFoundError(NotFoundError):
    """No message at that sequence or for that subject."""


class NoMessagesError(JetStreamError):
    """A pull request found no messages."""


class NoStreamResponseError(JetStreamError):
    """A JetStream publish got no answer: no stream captures the subject."""


class ConsumerExistsError(BadRequestError):
    """A consumer of that name exists with a different configuration."""


class ConsumerDeletedError(JetStreamError):
    """The consumer was deleted while messages were being pulled."""


class NoHeartbeatError(JetStreamError):
    """A pull consumer's idle heartbeats stopped coming: the server is away, or the
    consumer is gone. The pull requests are sent again; the iteration may go on."""


class MsgAlreadyAckdError(JetStreamError):
    """The message was already acknowledged (or nak'ed, or terminated)."""


class NotJSMessageError(JetStreamError):
    """The message did not come from a JetStream consumer, so it cannot be acked."""


class WrongLastSequenceError(BadRequestError):
    """An expected-last-sequence condition failed."""


class JetStreamTimeoutError(JetStreamError, TimeoutError):
    """A JetStream wait ran out of time (``nats.js.errors.FetchTimeoutError``)."""


class TooManyStalledMsgsError(JetStreamTimeoutError):
    """``publish_async`` waited its stall time for room among the pending acks."""


if sys.version_info < (3, 11):
    import concurrent.futures

    class PubAckTimeoutError(TimeoutError, concurrent.futures.TimeoutError, builtins.TimeoutError):
        """No PubAck in time: an async publish's ack timeout passed, or a wait on
        its future (``result(timeout)``, ``exception(timeout)``) ended first.

        Also :class:`concurrent.futures.TimeoutError` and the builtin
        :class:`TimeoutError`, which before Python 3.11 are two other classes,
        so an ``except`` written for plain futures still catches it.
        """

else:

    class PubAckTimeoutError(TimeoutError):
        """No PubAck in time: an async publish's ack timeout passed, or a wait on
        its future (``result(timeout)``, ``exception(timeout)``) ended first.

        (:class:`concurrent.futures.TimeoutError` is the builtin one since
        Python 3.11, so an ``except`` written for plain futures catches it too.)
        """


class JetStreamPublisherClosedError(JetStreamError):
    """The JetStream context's publishing side was released (``js.cleanup_publisher()``,
    or leaving ``with nc.jetstream() as js:``) before this async publish got its
    PubAck (nats.go's ``ErrJetStreamPublisherClosed``). Whether the stream stored
    the message is unknown."""


class BatchPublishError(JetStreamError):
    """An atomic batch publish was refused, abandoned or left incomplete: nothing of it was stored."""


class BatchWrongLastSequenceError(BatchPublishError, WrongLastSequenceError):
    """A batch's expectation failed (``expected_last_seq`` ...): the stream abandoned the
    batch, so it is a :class:`BatchPublishError` as the batch docs promise, and a
    :class:`WrongLastSequenceError` as the same check of a single publish is."""


class ConsumerInvalidResetError(BadRequestError):
    """A consumer reset to a sequence that its deliver policy does not allow."""


class KeyValueError(APIError):
    """Base for key-value store errors."""


class BucketNotFoundError(KeyValueError, NotFoundError):
    """The key-value or object store bucket does not exist."""


class KeyNotFoundError(KeyValueError, NotFoundError):
    """The key does not exist.

    Attributes:
        entry: the entry of a delete or purge marker, when one was found.
        op: its operation (``"DEL"`` or ``"PURGE"``), else ``None``.
    """

    entry: object = None
    op: str | None = None


class KeyDeletedError(KeyNotFoundError):
    """The key was deleted or purged."""


class NoKeysError(KeyValueError):
    """The bucket holds no keys (``keys()``, ``history()``)."""


class KeyHistoryNotFoundError(KeyNotFoundError, NoKeysError):
    """``history()`` of a key with no revision: KeyNotFoundError (nats.go) and NoKeysError (nats-py)."""


class KeyHistoryTooLargeError(KeyValueError, ValueError):
    """A bucket history over 64 values."""


class BadBucketError(APIError):
    """A stream of a bucket's name that is not a bucket."""


class KeyExistsError(KeyValueError, BadRequestError):
    """The key exists (create) or its revision moved on (update)."""


class KeyWrongLastSequenceError(KeyExistsError, WrongLastSequenceError):
    """A key-value write whose revision condition failed: ``create`` of a key with a
    value, ``update`` (or ``delete``/``purge`` with ``last=``) after the key moved on.

    ``description`` is the server's (``wrong last sequence: 3``) and the text is
    nats-py's, ``nats:`` before it (programs compare it); ``key`` and
    ``bucket`` say which write failed.
    """

    #: The key written, and its bucket (None when not known).
    key: str | None = None
    bucket: str | None = None

    def __str__(self) -> str:
        return f"nats: {self.description}"


class InvalidKeyError(KeyValueError, ValueError):
    """A key (or key filter) that the key-value store cannot hold."""


class KvCodecError(KeyValueError, ValueError):
    """A key or value codec (:mod:`natsjs_sync.kvcodec`) could not encode or decode."""


class KeyEncodeError(KvCodecError):
    """A key codec could not encode a key (nothing was sent)."""


class KeyDecodeError(KvCodecError):
    """A stored key is not what the bucket's key codec reads back (written without it?)."""


class ValueEncodeError(KvCodecError):
    """A value codec could not encode a value (nothing was sent)."""


class ValueDecodeError(KvCodecError):
    """A stored value is not what the bucket's value codec reads back."""


class WildcardNotSupportedError(KvCodecError):
    """A filter with ``*`` or ``>`` given to a key codec that cannot encode filters."""


class NoCodecsError(KvCodecError):
    """A chain codec made of no codecs."""


class InvalidBucketNameError(JetStreamError, ValueError):
    """A bucket name with characters other than letters, digits, ``_`` and ``-``."""


class BucketExistsError(KeyValueError, BadRequestError):
    """A bucket of that name exists with a different configuration."""


class ObjectStoreError(JetStreamError):
    """Base for object store errors."""


class ObjectNotFoundError(ObjectStoreError, NotFoundError):
    """The object does not exist."""


class ObjectDeletedError(ObjectNotFoundError):
    """The object was deleted."""


class ObjectBucketNotFoundError(BucketNotFoundError, ObjectNotFoundError):
    """An object read from a store whose bucket is gone (deleted): BucketNotFoundError
    (what is missing) and ObjectNotFoundError (what nats-py raises for it)."""


class ObjectAlreadyExists(ObjectStoreError):
    """An object of that name exists."""


class InvalidObjectNameError(ObjectStoreError, ValueError):
    """An object name the object store cannot hold."""


class BadObjectMetaError(ObjectStoreError, ValueError):
    """Object metadata the object store cannot hold."""


class LinkIsABucketError(ObjectStoreError):
    """The object is a link to a whole bucket, which has no data of its own."""


class DigestMismatchError(ObjectStoreError):
    """The object's SHA-256 digest does not match its data."""


#: JetStream ``err_code`` -> exception class (codes from the server's errors.json).
JS_ERR_CODES: dict[int, type[JetStreamError]] = {
    10039: JetStreamNotEnabledError,  # JSNotEnabledForAccountErr
    10076: JetStreamNotEnabledError,  # JSNotEnabledErr
    10059: StreamNotFoundError,  # JSStreamNotFoundErr
    10014: ConsumerNotFoundError,  # JSConsumerNotFoundErr
    10058: StreamNameInUseError,  # JSStreamNameExistErr
    10037: MsgNotFoundError,  # JSNoMessageFoundErr
    10071: WrongLastSequenceError,  # JSStreamWrongLastSequenceErr
    10070: WrongLastSequenceError,  # JSStreamWrongLastMsgIDErr
    10164: WrongLastSequenceError,  # JSStreamWrongLastSequenceConstantErr
    10148: ConsumerExistsError,  # JSConsumerAlreadyExists
    10013: ConsumerExistsError,  # JSConsumerNameExistErr
    10149: ConsumerNotFoundError,  # JSConsumerDoesNotExist (update of a missing one)
    10174: BatchPublishError,  # JSAtomicPublishDisabledErr
    10175: BatchPublishError,  # JSAtomicPublishMissingSeqErr
    10176: BatchPublishError,  # JSAtomicPublishIncompleteBatchErr
    10177: BatchPublishError,  # JSAtomicPublishUnsupportedHeaderBatchErr
    10179: BatchPublishError,  # JSAtomicPublishInvalidBatchIDErr
    10199: BatchPublishError,  # JSAtomicPublishTooLargeBatchErr
    10200: BatchPublishError,  # JSAtomicPublishInvalidBatchCommitErr
    10201: BatchPublishError,  # JSAtomicPublishContainsDuplicateMessageErr
    10204: ConsumerInvalidResetError,  # JSConsumerInvalidResetErr
    10185: ApiLevelNotSupportedError,  # JSRequiredApiLevelErr
    10205: BatchPublishError,  # JSBatchPublishDisabledErr (fast batch)
    10206: BatchPublishError,  # JSBatchPublishInvalidPatternErr
    10207: BatchPublishError,  # JSBatchPublishInvalidBatchIDErr
    10208: BatchPublishError,  # JSBatchPublishUnknownBatchIDErr
}


#: API status code -> exception class, for err_codes without a class of their own.
JS_STATUS_CODES: dict[int, type[APIError]] = {
    400: BadRequestError,
    404: NotFoundError,
    500: JetStreamServerError,
    503: ServiceUnavailableError,
}


def jetstream_error(code: int | None, err_code: int | None, description: str, stream: str | None = None,
                    consumer: str | None = None) -> JetStreamError:
    """Build the most specific :class:`JetStreamError` for a server error about ``stream``/``consumer``
    (by ``err_code``, else by the status ``code``, as nats-py's classes)."""
    cls = JS_ERR_CODES.get(err_code or 0) or JS_STATUS_CODES.get(code or 0, APIError)
    return cls(description, code=code, err_code=err_code, stream=stream, consumer=consumer)


#: A connect failure's lower-level cause -> the class that is both ours and it
#: (most specific first).
_CONNECT_FAILURES: tuple[tuple[type[BaseException], type[NatsConnectionError]], ...] = (
    (ssl.SSLCertVerificationError, TlsCertificateError),
    (ssl.SSLError, TlsHandshakeError),
    (builtins.ConnectionRefusedError, ConnectRefusedError),
)
#: The connect error of one server -> the NoServersError that also is its class.
_NO_SERVERS: tuple[tuple[type[BaseException], type[NoServersError]], ...] = (
    (TlsCertificateError, NoServersTlsCertificateError),
    (TlsHandshakeError, NoServersTlsError),
    (ConnectRefusedError, NoServersRefusedError),
    (builtins.TimeoutError, NoServersTimeoutError),
)


def _copy_os_fields(err: BaseException, cause: BaseException) -> None:
    """Give ``err`` the ``errno``/``strerror`` (and TLS ``reason``, ``library``,
    ``verify_code``, ``verify_message``) its builtin half promises."""
    for name in ("errno", "strerror", "reason", "library", "verify_code", "verify_message"):
        value = getattr(cause, name, None)
        if value is not None:
            setattr(err, name, value)


def connect_error(exc: NatsError) -> NatsError:
    """The error of one connect attempt as the class that is also its lower-level cause.

    A plain :class:`NatsConnectionError` raised ``from`` a refused TCP connect or
    a failed TLS handshake becomes :class:`ConnectRefusedError`,
    :class:`TlsHandshakeError` or :class:`TlsCertificateError` (same message, same
    cause); any other error is returned as it is.
    """
    cause = exc.__cause__
    if type(exc) is not NatsConnectionError or cause is None:
        return exc
    for low, cls in _CONNECT_FAILURES:
        if isinstance(cause, low):
            err = cls(str(exc))
            _copy_os_fields(err, cause)
            err.__cause__ = cause
            return err
    return exc


def no_servers_error(message: str, last: BaseException | None) -> NoServersError:
    """The :class:`NoServersError` of a failed first connect, ``from`` the last server's error.

    It is also that error's lower-level class (a :class:`TimeoutError`, a
    :class:`ConnectionRefusedError`, an :class:`ssl.SSLError` ...), as nats-py
    lets those through.
    """
    cls: type[NoServersError] = NoServersError
    for low, candidate in _NO_SERVERS:
        if isinstance(last, low):
            cls = candidate
            break
    err = cls(message)
    if last is not None:
        if cls is not NoServersError:
            _copy_os_fields(err, last)
        err.__cause__ = last
    return err
