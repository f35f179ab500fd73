"""The ``$JS.ACK`` reply subject of a consumed message: the one parser.

The server puts a message's metadata into its reply subject (ADR-15):

- ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` (9 tokens), or
- ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]``
  (11 or 12 tokens; domain ``_`` means none).

:func:`parse_metadata` reads all of it; :func:`sequences` reads only the
consumer name and the two sequences, for code that runs for every message
(the ordered consumer, Spark readers).
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

from ...errors import NotJSMessageError
from .._compiled import twin

ACK_PREFIX = "$JS.ACK."

#: Acknowledgement bodies.
ACK = b"+ACK"
NAK = b"-NAK"
WPI = b"+WPI"
TERM = b"+TERM"
NEXT = b"+NXT"

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class SequencePair(NamedTuple):
    """Consumer and stream sequence of a delivered message."""

    consumer: int
    stream: int


class MsgMetadata(NamedTuple):
    """What the server says about a message delivered by a consumer."""

    sequence: SequencePair
    num_delivered: int
    num_pending: int
    timestamp: datetime.datetime
    stream: str
    consumer: str
    domain: str | None = None
    timestamp_ns: int = 0


class Sequences(NamedTuple):
    """The fields a per-message check needs: who delivered it, its sequences, time and backlog."""

    stream: str
    consumer: str
    stream_seq: int
    consumer_seq: int
    timestamp_ns: int
    pending: int


def is_ack_reply(reply: str | None) -> bool:
    """True for a ``$JS.ACK`` reply subject."""
    return bool(reply) and reply.startswith(ACK_PREFIX)  # type: ignore[union-attr]


def _base(n: int) -> int:
    """Index of the stream token for a reply of ``n`` tokens, or -1."""
    if n == 9:
        return 2
    if n in (11, 12):
        return 4
    return -1


def sequences(reply: str | None) -> Sequences | None:
    """The stream, consumer and sequences of an ack reply subject; None for anything else."""
    if not reply or not reply.startswith(ACK_PREFIX):
        return None
    tokens = reply.split(".")
    base = _base(len(tokens))
    if base < 0:
        return None
    try:
        return Sequences(tokens[base], tokens[base + 1], int(tokens[base + 3]), int(tokens[base + 4]),
                         int(tokens[base + 5]), int(tokens[base + 6]))
    except ValueError:
        return None


def _seq_text(token: str) -> bool:
    return len(token) <= 18 and token.isascii() and token.isdigit()


def ack_tail_py(reply: str, prefix: str) -> tuple[int, int] | None:
    """``(stream_seq, consumer_seq)`` of ``<prefix>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``.

    ``prefix`` is ``$JS.ACK.<stream>.<consumer>`` of one consumer: a check run
    for every message of that consumer (the ordered consumer's) costs one
    comparison and two small parses. None for any other subject (another
    consumer's, the domain form, a malformed one). The compiled twin in
    ``_speedups.c``, used where it was built, gives the same answers.
    """
    tokens = reply.rsplit(".", 5)
    if len(tokens) != 6 or tokens[0] != prefix or not all(tokens):
        return None
    sseq, cseq = tokens[2], tokens[3]
    if not (_seq_text(sseq) and _seq_text(cseq)):
        return None
    return int(sseq), int(cseq)


#: :func:`ack_tail_py`, or its compiled twin where the extension was built.
ack_tail = twin("ack_tail", ack_tail_py)


def parse_metadata(reply: str | None) -> MsgMetadata:
    """Parse a ``$JS.ACK`` reply subject.

    Raises:
        NotJSMessageError: the subject is not a JetStream ack subject.
    """
    if not reply or not reply.startswith(ACK_PREFIX):
        raise NotJSMessageError(f"not a JetStream message (reply subject {reply!r})")
    tokens = reply.split(".")
    base = _base(len(tokens))
    if base < 0:
        raise NotJSMessageError(f"malformed JetStream ack subject {reply!r}")
    domain = None if base == 2 or tokens[2] == "_" else tokens[2]
    stream, consumer, delivered, sseq, cseq, ts, pending = tokens[base : base + 7]
    try:
        ts_ns = int(ts)
        return MsgMetadata(
            sequence=SequencePair(consumer=int(cseq), stream=int(sseq)),
            num_delivered=int(delivered),
            num_pending=int(pending),
            timestamp=_EPOCH + datetime.timedelta(microseconds=ts_ns // 1000),  # exact, no float rounding
            stream=stream,
            consumer=consumer,
            domain=domain,
            timestamp_ns=ts_ns,
        )
    except ValueError:
        raise NotJSMessageError(f"malformed JetStream ack subject {reply!r}") from None
