"""Atomic batch publish (ADR-50, server 2.12+): many messages, stored all or none.

Each message of a batch carries ``Nats-Batch-Id`` and ``Nats-Batch-Sequence``
(1, 2, 3 ...). The first is a request: the stream answers with an empty
message once it has staged the batch (or with an error, e.g. a stream without
``allow_atomic``). The middle ones are plain publishes; the stream keeps them
staged. The last one adds ``Nats-Batch-Commit: 1`` and gets the PubAck of the
whole batch, with its id and size. With ``Nats-Batch-Commit: eob`` (2.14+) the
batch is committed without storing that last message.

A batch with a gap, one left without a commit for 10 seconds, or one with a
failed expectation is abandoned by the server: nothing of it is stored, and
the commit fails with :class:`~natsjs_sync.errors.BatchPublishError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._timeout import USE_DEFAULT, TimeoutArg
from ..errors import (
    BatchPublishError,
    BatchWrongLastSequenceError,
    JetStreamError,
    NoRespondersError,
    NoStreamResponseError,
    WrongLastSequenceError,
)
from ..protocol.headers import Headers, HeadersInput
from ..protocol.nuid import next_nuid
from .publish import PubAck, parse_pub_ack
from .publish_options import copy_headers, publish_headers

if TYPE_CHECKING:
    from types import TracebackType

    from .context import JetStream

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"

#: The server's default limit of messages in one atomic batch (the commit included).
MAX_BATCH_MESSAGES = 1000
_MAX_ID_LENGTH = 64


def batch_id_or_new(batch_id: str | None, forbidden: str = " \t\r\n") -> str:
    """``batch_id`` checked (1 to 64 characters, none of ``forbidden``), or a new unique one."""
    if batch_id is None:
        return next_nuid()
    if not isinstance(batch_id, str) or not batch_id or len(batch_id) > _MAX_ID_LENGTH \
            or any(c in batch_id for c in forbidden):
        shown = ", ".join(repr(c) for c in forbidden if not c.isspace())
        raise ValueError(f"batch_id must be 1 to {_MAX_ID_LENGTH} characters without whitespace"
                         f"{' or ' + shown if shown else ''}, got {batch_id!r}")
    return batch_id


def as_batch_error(exc: JetStreamError, prefix: str = "") -> BatchPublishError:
    """The batch error for a server's refusal of a batch (atomic or fast).

    A failed expectation stays a :class:`~natsjs_sync.errors.WrongLastSequenceError`
    too (:class:`~natsjs_sync.errors.BatchWrongLastSequenceError`), so a batch
    fails with the class its docs promise and the one a single publish's check
    raises; the server's ``code`` and ``err_code`` stay on it.

    Args:
        exc: the error the server's answer mapped to.
        prefix: what to put before the server's text (which batch).

    Returns:
        ``exc`` itself when it is a batch error already, else a new one (raise it ``from exc``).
    """
    if isinstance(exc, BatchPublishError):
        return exc
    cls = BatchWrongLastSequenceError if isinstance(exc, WrongLastSequenceError) else BatchPublishError
    return cls(f"{prefix}{exc.description or exc}", code=exc.code, err_code=exc.err_code)


def parse_batch_ack(msg: Any, subject: str, batch_id: str) -> PubAck:
    """:func:`parse_pub_ack` for an answer to a batch message: a failed expectation
    raises :class:`~natsjs_sync.errors.BatchWrongLastSequenceError`.

    Raises:
        BatchWrongLastSequenceError: an expectation of the batch failed (nothing stored).
        JetStreamError: any other refusal, as :func:`parse_pub_ack` maps it.
    """
    try:
        return parse_pub_ack(msg, subject)
    except WrongLastSequenceError as exc:
        raise as_batch_error(exc, f"batch {batch_id!r}: ") from exc


class BatchPublisher:
    """One atomic batch. Not thread-safe: add and commit from one thread.

    Make it with :meth:`JetStream.atomic_batch`. Used as a context manager, a
    batch left without :meth:`commit` (and without an exception) raises
    :class:`~natsjs_sync.errors.BatchPublishError`: nothing of it was stored.
    """

    def __init__(self, js: JetStream, batch_id: str | None, timeout: TimeoutArg):
        self._js = js
        self.batch_id = batch_id_or_new(batch_id)
        self._timeout = timeout
        self._seq = 0
        self._last_subject: str | None = None
        self._done = False

    @property
    def size(self) -> int:
        """Messages added so far (not counting the commit)."""
        return self._seq

    @property
    def done(self) -> bool:
        """Whether the batch was committed, failed or discarded."""
        return self._done

    def _headers(self, headers: HeadersInput | None, seq: int, commit: str | None) -> Headers:
        merged = copy_headers(headers)
        merged[BATCH_ID] = self.batch_id
        merged[BATCH_SEQUENCE] = str(seq)
        if commit is not None:
            merged[BATCH_COMMIT] = commit
        return merged

    def _next_seq(self) -> int:
        if self._done:
            raise BatchPublishError(f"batch {self.batch_id!r} is over (committed, failed or discarded)")
        if self._seq + 1 > MAX_BATCH_MESSAGES:
            raise BatchPublishError(f"an atomic batch holds at most {MAX_BATCH_MESSAGES} messages")
        return self._seq + 1

    def add(self, subject: str, payload: bytes = b"", headers: HeadersInput | None = None, *,
            msg_id: str | None = None, expected_stream: str | None = None, expected_last_seq: int | None = None,
            expected_last_subject_seq: int | None = None, expected_last_subject_seq_subject: str | None = None,
            ttl: float | str | None = None, ack: bool = False, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stage one message of the batch (stored only at :meth:`commit`).

        The first message waits for the stream to accept the batch; later ones
        are sent without waiting unless ``ack`` is set (then the stream's
        confirmation that it staged the message is awaited too).

        Args:
            msg_id, expected_*: as for :meth:`JetStream.publish`; the server
                checks them at commit (``expected_last_seq`` only on the first message).
            ttl: per-message TTL (streams with allow_msg_ttl).

        Raises:
            BatchPublishError: the batch is over, full, or the stream refused it.
            NoStreamResponseError: no stream captures ``subject``.
            TimeoutError: no answer to a message that waits for one.
        """
        seq = self._next_seq()
        features: list[str] = []
        hdrs = publish_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, None,
                               ttl, expected_last_subject_seq_subject=expected_last_subject_seq_subject,
                               features=features)
        self._js._require(*features)
        merged = self._headers(hdrs, seq, None)
        if seq == 1 or ack:
            msg = self._request(subject, payload, merged, timeout)
            if msg.data or msg.status is not None:
                # Anything but the empty "staged" answer is an error: the batch is over.
                self._done = True
                parse_batch_ack(msg, subject, self.batch_id)
                raise BatchPublishError(f"batch {self.batch_id!r}: unexpected answer {msg.data[:80]!r}")
        else:
            self._js._core.publish(subject, payload, headers=merged)
        self._seq = seq
        self._last_subject = subject

    def commit(self, subject: str | None = None, payload: bytes = b"", headers: HeadersInput | None = None, *,
               msg_id: str | None = None, expected_stream: str | None = None,
               expected_last_subject_seq: int | None = None, expected_last_subject_seq_subject: str | None = None,
               ttl: float | str | None = None, timeout: TimeoutArg = USE_DEFAULT) -> PubAck:
        """Store the whole batch: with ``subject``, this last message too; without,
        only the messages added (``eob`` commit, server 2.14+).

        Returns:
            The PubAck of the batch's last message, with ``batch_id`` and ``batch_size``.

        Raises:
            BatchPublishError: the stream abandoned the batch (a gap, a failed
                expectation, a timeout) or it is over already: nothing was stored.
                A failed expectation raises BatchWrongLastSequenceError, also a
                WrongLastSequenceError.
            FeatureNotSupportedError: a commit without a message on a server older than 2.14.
            TimeoutError: no PubAck within ``timeout``; the batch's fate is unknown.
        """
        seq = self._next_seq()
        if subject is None:
            if self._seq == 0 or self._last_subject is None:
                raise BatchPublishError("a commit without a message needs at least one message added")
            if payload or headers or msg_id is not None or expected_stream is not None \
                    or expected_last_subject_seq is not None or ttl is not None:
                raise ValueError("a commit without a subject carries no message: give no payload or options")
            self._js._require("atomic_batch_eob")
            target, merged = self._last_subject, self._headers(None, seq, "eob")
        else:
            features: list[str] = []
            hdrs = publish_headers(headers, msg_id, expected_stream, None, expected_last_subject_seq, None, ttl,
                                   expected_last_subject_seq_subject=expected_last_subject_seq_subject,
                                   features=features)
            self._js._require(*features)
            target, merged = subject, self._headers(hdrs, seq, "1")
        self._done = True
        msg = self._request(target, payload, merged, timeout)
        if not msg.data and msg.status is None:
            raise BatchPublishError(f"batch {self.batch_id!r}: the commit got no PubAck")
        return parse_batch_ack(msg, target, self.batch_id)

    def _request(self, subject: str, payload: bytes, headers: Headers, timeout: TimeoutArg) -> Any:
        api = self._js._api
        deadline = api.deadline(self._timeout if timeout is USE_DEFAULT else timeout)
        try:
            return api.core.request(subject, payload, deadline, headers)
        except NoRespondersError:
            self._done = True
            raise NoStreamResponseError(f"no stream answered a batch publish to {subject!r}", code=503) from None

    def discard(self) -> None:
        """Give the batch up: nothing more is sent, and the server drops what it
        staged (after its 10 s batch timeout)."""
        self._done = True

    def __enter__(self) -> BatchPublisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._done:
            return
        self._done = True
        if exc_type is None:
            raise BatchPublishError(f"batch {self.batch_id!r} ended without commit(): nothing of it was stored")

    def __repr__(self) -> str:
        return f"<BatchPublisher {self.batch_id} size={self._seq}{' done' if self._done else ''}>"

