"""Dead letters: messages that reached ``max_deliver`` or were terminated, copied into a stream of their own.

The server does not move such a message anywhere: it stays in its stream (or,
in a work-queue stream, a terminated one is gone) and an advisory says which
one it was. :class:`DeadLetters` reads the message by its stream sequence
(direct get when the stream allows it, else the message-get API) and publishes
it into the dead-letter stream on ``<prefix>.<stream>.<seq>`` with its body,
its headers, and where it came from and why in ``Dead-Letter-*`` headers.

Exactly once, whoever runs it and however often: the copy is published on
its own subject ``<prefix>.<stream>.<seq>`` with
``Nats-Expected-Last-Subject-Sequence: 0``, so the dead-letter stream refuses
it when that subject holds a copy already, whenever that copy was stored (a
check made by the server as it stores, not a look made before: a helper
stalled past the duplicate window between looking and publishing cannot add a
second copy); ``Nats-Msg-Id: deadletter:<stream>:<seq>`` makes a publish
repeated within the duplicate window a duplicate as well. A copy whose
``Dead-Letter-Time`` is not the message's is of another message that had its
sequence (the stream was deleted and made again): the message is copied after
it, once, the same way. Two helpers following
the same advisories, a restarted helper replaying stored advisories, and a run
repeated by hand each leave one copy.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Union

import msgspec

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import (
    InvalidResponseError,
    MsgNotFoundError,
    NoRespondersError,
    StreamNotFoundError,
    WrongLastSequenceError,
)
from ..jetstream._api import rfc3339
from ..protocol.headers import Headers
from .feed import DEFAULT_MAX_PENDING, AdvisoryFeed, advisory_subjects
from .models import Advisory, MaxDeliveriesAdvisory, TerminatedAdvisory, decode_advisory

if TYPE_CHECKING:
    from ..jetstream import Consumer, JetStream, Stream
    from ..jetstream.stream_config import RawStreamMsg

__all__ = [
    "DEFAULT_PREFIX",
    "HEADER_CONSUMER",
    "HEADER_DELIVERIES",
    "HEADER_MISSING",
    "HEADER_ORIGINAL_PREFIX",
    "HEADER_REASON",
    "HEADER_SEQUENCE",
    "HEADER_STREAM",
    "HEADER_SUBJECT",
    "HEADER_TERM_REASON",
    "HEADER_TIME",
    "DeadLetterAdvisory",
    "DeadLetterOutcome",
    "DeadLetterResult",
    "DeadLetters",
]

#: The default first token of dead-letter subjects: ``deadletter.<stream>.<seq>``.
DEFAULT_PREFIX = "deadletter"

#: The stream the message was in.
HEADER_STREAM = "Dead-Letter-Stream"
#: The subject it was published to.
HEADER_SUBJECT = "Dead-Letter-Subject"
#: Its sequence in that stream.
HEADER_SEQUENCE = "Dead-Letter-Sequence"
#: When that stream stored it (RFC 3339, UTC).
HEADER_TIME = "Dead-Letter-Time"
#: The consumer that gave up on it.
HEADER_CONSUMER = "Dead-Letter-Consumer"
#: Why: ``max_deliver`` or ``terminated``.
HEADER_REASON = "Dead-Letter-Reason"
#: The reason given with a term, when one was.
HEADER_TERM_REASON = "Dead-Letter-Term-Reason"
#: How many times it was delivered.
HEADER_DELIVERIES = "Dead-Letter-Deliveries"
#: Set (to why) on a record of a message already deleted when its advisory was handled: no body.
HEADER_MISSING = "Dead-Letter-Missing"
#: The original's ``Nats-*`` headers keep their values under this prefix (``Dead-Letter-Original-Nats-Msg-Id``):
#: as they were, the dead-letter stream would act on them (its own de-duplication, expectations, TTLs).
HEADER_ORIGINAL_PREFIX = "Dead-Letter-Original-"

#: The advisories a dead letter is made from.
DeadLetterAdvisory = Union[MaxDeliveriesAdvisory, TerminatedAdvisory]


class DeadLetterOutcome(str, enum.Enum):
    """What :meth:`DeadLetters.move` did."""

    #: Copied into the dead-letter stream now.
    MOVED = "moved"
    #: A copy was there already (an earlier run, another helper): nothing was added.
    ALREADY_MOVED = "already_moved"
    #: The message was deleted before it could be read: a record without body says so
    #: (:data:`~natsjs_sync.advisories.HEADER_MISSING`).
    MISSING = "missing"


class DeadLetterResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one dead letter.

    Attributes:
        outcome: what was done.
        stream: the stream the message was in.
        stream_seq: its sequence there.
        subject: the dead letter's subject (``<prefix>.<stream>.<seq>``).
        dead_letter_seq: the copy's sequence in the dead-letter stream (0 when unknown).
    """

    outcome: DeadLetterOutcome
    stream: str
    stream_seq: int
    subject: str
    dead_letter_seq: int = 0


def _last_copy(dlq: Stream, subject: str, deadline: Deadline) -> RawStreamMsg | None:
    """The copy the dead-letter stream holds on ``subject`` (the last one), or ``None``."""
    try:
        return dlq.get_last_msg_for_subject(subject, timeout=deadline)
    except MsgNotFoundError:
        return None


def _carry_headers(headers: Headers, original: RawStreamMsg | None) -> None:
    """Add the original's headers to ``headers``, its ``Nats-*`` ones under :data:`HEADER_ORIGINAL_PREFIX`."""
    for key, value in (original.headers.items_all() if original is not None and original.headers else ()):
        # The dead-letter stream would act on the original's Nats-* headers (de-duplication,
        # expectations, TTL, rollups): they are kept under a name of their own.
        headers.add(HEADER_ORIGINAL_PREFIX + key if key.lower().startswith("nats-") else key, value)


def _add_provenance(headers: Headers, stream: str, seq: int, original: RawStreamMsg | None, stored_at: str, *,
                    reason: str, consumer: str, deliveries: int, term_reason: str) -> None:
    """Add the ``Dead-Letter-*`` headers: where the message was, when it was stored, why it is dead."""
    headers[HEADER_STREAM] = stream
    headers[HEADER_SEQUENCE] = str(seq)
    headers[HEADER_REASON] = reason
    if original is not None:
        headers[HEADER_SUBJECT] = original.subject
        if stored_at:
            headers[HEADER_TIME] = stored_at
    if consumer:
        headers[HEADER_CONSUMER] = consumer
    if deliveries:
        headers[HEADER_DELIVERIES] = str(deliveries)
    if term_reason:
        headers[HEADER_TERM_REASON] = term_reason


class DeadLetters:
    """Copies dead messages into a dead-letter stream, exactly once each.

    Thread-safe: :meth:`move` may be called from several threads (each copy is
    made once however many call it).

    Example::

        dl = DeadLetters(js, "DLQ")
        dl.create_stream()                       # DLQ on deadletter.>, if it does not exist
        for result in dl.follow("ORDERS"):        # live advisories of every ORDERS consumer
            print(result.outcome.value, result.subject)
    """

    def __init__(self, js: JetStream, stream: str, *, prefix: str = DEFAULT_PREFIX,
                 timeout: TimeoutArg = USE_DEFAULT):
        """
        Args:
            js: the JetStream context of the account of both streams.
            stream: the dead-letter stream's name (it must capture ``<prefix>.>``; see :meth:`create_stream`).
            prefix: the first token(s) of dead-letter subjects.
            timeout: seconds each :meth:`move` may take (default: the context's timeout).
        """
        self._js = js
        self.stream = stream
        self.prefix = prefix
        self._timeout = timeout
        self._lock = threading.Lock()
        self._streams: dict[str, Stream] = {}

    def create_stream(self, **config: Any) -> Stream:
        """The dead-letter stream, created on ``<prefix>.>`` if it does not exist (file storage, limits
        retention, keyword arguments of :meth:`~natsjs_sync.jetstream.JetStream.create_stream` apply).

        Raises:
            JetStreamError: the server refused.
        """
        try:
            return self._js.stream(self.stream)
        except StreamNotFoundError:
            config.setdefault("subjects", [f"{self.prefix}.>"])
            return self._js.create_stream(name=self.stream, **config)

    def subject_for(self, stream: str, seq: int) -> str:
        """The dead-letter subject of ``stream``'s message ``seq``."""
        return f"{self.prefix}.{stream}.{seq}"

    @staticmethod
    def msg_id_for(stream: str, seq: int) -> str:
        """The ``Nats-Msg-Id`` of the dead letter of ``stream``'s message ``seq``."""
        return f"deadletter:{stream}:{seq}"

    def _stream(self, name: str, timeout: TimeoutArg) -> Stream:
        with self._lock:
            st = self._streams.get(name)
        if st is None:
            st = self._js.stream(name, timeout=timeout)
            with self._lock:
                self._streams[name] = st
        return st

    def _read(self, stream: str, seq: int, deadline: Deadline) -> RawStreamMsg:
        try:
            return self._stream(stream, deadline).get_msg(seq, timeout=deadline)
        except NoRespondersError:
            # A direct get of a stream known from before, deleted since (or no longer allowing direct
            # gets): looked up again, a missing stream is StreamNotFoundError.
            with self._lock:
                self._streams.pop(stream, None)
            return self._stream(stream, deadline).get_msg(seq, timeout=deadline)

    def move(self, advisory: DeadLetterAdvisory, timeout: TimeoutArg = USE_DEFAULT) -> DeadLetterResult:
        """Copy the message ``advisory`` is about into the dead-letter stream, unless a copy is there.

        Args:
            advisory: a max-deliveries or terminated advisory.
            timeout: seconds for the whole move (default: this helper's timeout).

        Returns:
            What was done.

        Raises:
            TypeError: another kind of advisory.
            StreamNotFoundError: the dead-letter stream does not exist (a message whose stream was
                deleted is recorded as missing).
            TimeoutError: the server did not answer in time.
            JetStreamError: the server refused the copy.
        """
        if isinstance(advisory, MaxDeliveriesAdvisory):
            reason, term_reason = "max_deliver", ""
        elif isinstance(advisory, TerminatedAdvisory):
            reason, term_reason = "terminated", advisory.reason
        else:
            raise TypeError(f"a dead letter is made from a max_deliver or terminated advisory, not {advisory!r}")
        return self.move_sequence(advisory.stream, advisory.stream_seq, reason=reason, consumer=advisory.consumer,
                                  deliveries=advisory.deliveries, term_reason=term_reason, timeout=timeout)

    def move_sequence(self, stream: str, seq: int, *, reason: str, consumer: str = "", deliveries: int = 0,
                      term_reason: str = "", timeout: TimeoutArg = USE_DEFAULT) -> DeadLetterResult:
        """:meth:`move` by stream and sequence (a dead letter found another way than by advisory).

        Args:
            stream, seq: the message.
            reason: why it is dead (``"max_deliver"``, ``"terminated"`` or your own word).
            consumer, deliveries, term_reason: recorded in the headers when given.
            timeout: seconds for the whole move.
        """
        deadline = Deadline.of(self._timeout if timeout is USE_DEFAULT else timeout, self._js.timeout)
        subject = self.subject_for(stream, seq)
        dlq = self._stream(self.stream, deadline)
        found = _last_copy(dlq, subject, deadline)
        # A copy older than the duplicate window, or any copy: never a second one, unless it is the copy of
        # another message (below).
        original, missing = self._original(stream, seq, deadline)
        stored_at = rfc3339(original.time) if original is not None and original.time is not None else ""
        msg_id, expected_last = self.msg_id_for(stream, seq), 0
        if found is not None:
            copied_at = found.header(HEADER_TIME)
            if not stored_at or not copied_at or copied_at == stored_at:
                return DeadLetterResult(outcome=DeadLetterOutcome.ALREADY_MOVED, stream=stream, stream_seq=seq,
                                        subject=subject, dead_letter_seq=found.seq)
            # The copy is of another message that had this sequence: the stream was deleted and made again
            # since (its sequences start over). This one is copied after it, once: the stream refuses it when
            # a copy came after the one found, and its message id is its own.
            msg_id, expected_last = f"{msg_id}@{stored_at}", found.seq
        headers = self._guard_headers(msg_id, expected_last)
        if missing:
            headers[HEADER_MISSING] = missing
        _carry_headers(headers, original)
        _add_provenance(headers, stream, seq, original, stored_at, reason=reason, consumer=consumer,
                        deliveries=deliveries, term_reason=term_reason)
        return self._store_copy(dlq, subject, original, headers, stream, seq, deadline)

    def _original(self, stream: str, seq: int, deadline: Deadline) -> tuple[RawStreamMsg | None, str]:
        """The message to copy, or ``None`` and why it is missing (recorded in :data:`HEADER_MISSING`).

        Raises:
            StreamNotFoundError: the dead-letter stream itself is missing.
        """
        try:
            return self._read(stream, seq, deadline), ""
        except MsgNotFoundError:
            return None, "deleted before it was copied"
        except StreamNotFoundError:
            if stream == self.stream:
                raise  # the dead-letter stream itself is missing: nothing could be recorded
            return None, "its stream was deleted before it was copied"

    def _guard_headers(self, msg_id: str, expected_last: int) -> Headers:
        """The headers the dead-letter stream acts on to keep one copy: the message id, the stream
        expected, and the subject's last sequence expected."""
        # The headers the dead-letter stream must act on come first: a server before 2.11 takes the first
        # occurrence of a header's name anywhere in the block (inside Dead-Letter-Original-Nats-Msg-Id too)
        # and ignores the header when that occurrence does not start a line.
        # Nats-Expected-Last-Subject-Sequence: stored only while the subject holds no other copy than the one
        # found (the look above may be stale by the time this is stored).
        return Headers({"Nats-Msg-Id": msg_id, "Nats-Expected-Stream": self.stream,
                        "Nats-Expected-Last-Subject-Sequence": str(expected_last)})

    def _store_copy(self, dlq: Stream, subject: str, original: RawStreamMsg | None, headers: Headers,
                    stream: str, seq: int, deadline: Deadline) -> DeadLetterResult:
        """Publish the copy (the original's body, or none when it is missing) and say what happened."""
        data = original.data if original is not None else b""
        try:
            ack = self._js.publish(subject, data, headers=headers, timeout=deadline)
        except WrongLastSequenceError:  # another helper stored a copy since the look above
            try:
                copy_seq = dlq.get_last_msg_for_subject(subject, timeout=deadline).seq
            except MsgNotFoundError:
                copy_seq = 0  # and it was deleted since: it was there, which is what counts
            return DeadLetterResult(outcome=DeadLetterOutcome.ALREADY_MOVED, stream=stream, stream_seq=seq,
                                    subject=subject, dead_letter_seq=copy_seq)
        if ack.duplicate:
            outcome = DeadLetterOutcome.ALREADY_MOVED
        else:
            outcome = DeadLetterOutcome.MISSING if original is None else DeadLetterOutcome.MOVED
        return DeadLetterResult(outcome=outcome, stream=stream, stream_seq=seq, subject=subject,
                                dead_letter_seq=ack.seq)

    def feed(self, stream: str = "*", consumer: str = "*", *, max_pending: int = DEFAULT_MAX_PENDING) -> AdvisoryFeed:
        """A feed of the max-deliveries and terminated advisories of ``stream``'s ``consumer``
        (``"*"``: every one), subscribed when this returns."""
        return AdvisoryFeed(self._js.nc, advisory_subjects(("max_deliver", "terminated"), stream, consumer),
                            max_pending=max_pending)

    def move_all(self, advisories: Iterable[Advisory]) -> Iterator[DeadLetterResult]:
        """:meth:`move` each max-deliveries or terminated advisory of ``advisories`` (others are
        skipped), yielding each result."""
        for adv in advisories:
            if isinstance(adv, (MaxDeliveriesAdvisory, TerminatedAdvisory)):
                yield self.move(adv)

    def follow(self, stream: str = "*", consumer: str = "*", *, idle: float | None = None,
               total: float | None = None, max_pending: int = DEFAULT_MAX_PENDING) -> Iterator[DeadLetterResult]:
        """Move dead letters as their advisories arrive, yielding each result.

        Advisories are not stored: a message that dies while nothing follows is
        not seen (store the advisories in a stream and use :meth:`drain_stored`
        to survive restarts).

        Args:
            stream, consumer: whose dead letters (``"*"``: every one).
            idle: stop after this many seconds without an advisory (``None``: never).
            total: stop after this many seconds in all (``None``: never).
            max_pending: advisories held while moves are under way.
        """
        with self.feed(stream, consumer, max_pending=max_pending) as feed:
            source = feed if idle is None and total is None else feed.until_idle(
                idle if idle is not None else float(total or 0), total)
            yield from self.move_all(source)

    def drain_stored(self, consumer: Consumer, *, batch: int = 100, max_wait: float = 1.0,
                     limit: int | None = None, stream: str = "*", consumer_name: str = "*"
                     ) -> Iterator[DeadLetterResult]:
        """Move the dead letters of advisories stored in a stream, read through ``consumer``
        (a durable consumer with explicit acks on that stream), acknowledging each advisory once
        its dead letter is stored. Ends when a fetch of ``max_wait`` seconds finds nothing.
        A stored message that does not decode as an advisory is acknowledged and skipped.

        A helper that stops midway and starts again with the same consumer redoes
        only what was not acknowledged; :meth:`move` keeps that to one copy.

        Args:
            consumer: the advisory stream's consumer.
            batch: advisories fetched at a time.
            max_wait: seconds a fetch waits for advisories.
            limit: stop after this many advisories (``None``: until none are left).
            stream, consumer_name: move only the dead letters of this stream and consumer (``"*"``: any);
                the other advisories are acknowledged and left.
        """
        done = 0
        while limit is None or done < limit:
            want = batch if limit is None else min(batch, limit - done)
            got = 0
            for msg in consumer.fetch(want, max_wait=max_wait):
                got += 1
                try:
                    adv: Advisory | None = decode_advisory(msg.data, msg.subject)
                except InvalidResponseError:
                    # Not an advisory (anyone allowed to publish on the captured subjects can store one):
                    # unacknowledged it would come back for ever and stop every run at the same place.
                    adv = None
                result = None
                if (isinstance(adv, (MaxDeliveriesAdvisory, TerminatedAdvisory)) and stream in ("*", adv.stream)
                        and consumer_name in ("*", adv.consumer)):
                    result = self.move(adv)
                # Acknowledged before the result is handed over: a caller that stops iterating at it has it
                # moved, and must not see its advisory again.
                msg.ack_sync()
                if result is not None:
                    yield result
            done += got
            if got == 0:
                return
