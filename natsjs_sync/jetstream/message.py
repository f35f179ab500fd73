"""JetStream message metadata and acknowledgements.

The metadata rides in the reply subject the server gives each message:

- ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` (9 tokens), or
- ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]``
  (11 or 12 tokens; domain ``_`` means none), per ADR-15.
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

from ..errors import NotJSMessageError

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


def parse_metadata(reply: str | None) -> MsgMetadata:
    """Parse a ``$JS.ACK`` reply subject.

    Raises:
        NotJSMessageError: the subject is not a JetStream ack subject.
    """
    if not reply or not reply.startswith("$JS.ACK."):
        raise NotJSMessageError(f"not a JetStream message (reply subject {reply!r})")
    tokens = reply.split(".")
    n = len(tokens)
    try:
        if n == 9:
            domain = None
            stream, consumer, delivered, sseq, cseq, ts, pending = tokens[2:9]
        elif n in (11, 12):
            domain = None if tokens[2] == "_" else tokens[2]
            stream, consumer, delivered, sseq, cseq, ts, pending = tokens[4:11]
        else:
            raise ValueError(n)
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
