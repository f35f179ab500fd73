"""Publishing to a stream and waiting for its PubAck; the PubAck and its decoding.

Sync publish is a request: the stream's leader answers with a PubAck once the
message is stored. A 503 (no responders) right after a leader change is
retried a few times before giving up (ADR-22).

The PubAck decoding here is shared by every way of publishing: pipelined
publishing (:mod:`.publish_async`, whose futures are in :mod:`.pub_futures`)
and the batch publishers. The options of a publish, as headers, are in
:mod:`.publish_options`.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from .._backoff import Backoff
from .._core.spi import CoreLink
from .._timeout import Deadline
from ..errors import (
    InvalidResponseError,
    NoRespondersError,
    NoStreamResponseError,
    NotSentError,
    TimeoutError,
    jetstream_error,
)
from ..msg import Msg
from ..protocol.headers import HeadersInput
from ..protocol.jetstream.status import is_no_responders
from .stream_config import _Model

_decode = msgspec.json.decode


class PubAck(_Model, frozen=True, kw_only=True, gc=False):  # type: ignore[misc]  # msgspec allows it
    """The stream's receipt for a stored message.

    Attributes:
        stream: the stream that stored the message.
        seq: the message's sequence in that stream.
        duplicate: the stream had a message with this ``msg_id`` already and
            stored nothing (``seq`` is the first one's).
        domain: the JetStream domain of the stream, if the server has one.
        value: on a counter stream (``allow_msg_counter``), the counter's new
            total as a decimal string (the server's ``val``).
        batch_id: for the commit of an atomic batch, its id (the server's ``batch``).
        batch_size: for the commit of an atomic batch, how many messages it
            stored (the server's ``count``).
    """

    # gc=False: one is made per publish and it only holds str/int/bool, so it
    # can never be part of a reference cycle; untracked, it does not feed the
    # garbage collector's generation counts.

    stream: str
    seq: int
    duplicate: bool = False
    domain: str | None = None
    value: str | None = msgspec.field(default=None, name="val")
    batch_id: str | None = msgspec.field(default=None, name="batch")
    batch_size: int | None = msgspec.field(default=None, name="count")



class _PubAckWire(msgspec.Struct, gc=False):
    """A PubAck or an error reply (which may carry ``stream`` too), decoded in one C call.

    Untracked by the garbage collector like PubAck: it holds only decoded JSON.
    """

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str | None = None
    value: str | None = msgspec.field(default=None, name="val")
    batch: str | None = None
    count: int | None = None
    error: dict[str, Any] | None = None


_pub_ack_wire = msgspec.json.Decoder(_PubAckWire)


def _fast_pub_ack(data: bytes) -> PubAck | None:
    """The PubAck in ``data``, or None when it is anything else (error, garbage)."""
    try:
        w = _pub_ack_wire.decode(data)
    except msgspec.DecodeError:
        return None
    if w.error is not None or not w.stream:
        return None
    return PubAck(stream=w.stream, seq=w.seq, duplicate=w.duplicate, domain=w.domain, value=w.value,
                  batch_id=w.batch, batch_size=w.count)


def parse_pub_ack(msg: Msg, subject: str) -> PubAck:
    """Decode a PubAck, raising the mapped error for a JetStream error reply."""
    if msg.raw_headers is None:
        ack = _fast_pub_ack(msg.data)
        if ack is not None:
            return ack
    if is_no_responders(msg.raw_headers, msg.data):
        raise NoStreamResponseError(f"no stream answered a publish to {subject!r}", code=503)
    try:
        resp = _decode(msg.data)
    except msgspec.DecodeError as exc:
        raise NoStreamResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}") from exc
    if not isinstance(resp, dict):
        raise NoStreamResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}")
    err = resp.get("error")
    if err:
        if not isinstance(err, dict):
            raise InvalidResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}")
        raise jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""))
    try:
        return msgspec.convert(resp, PubAck, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}") from exc


#: Waits between retries of a publish nobody answered (ADR-22: 250 ms, as nats.go).
RETRY_BACKOFF = Backoff(0.25, 0.25, factor=1.0)


def publish_sync(
    core: CoreLink,
    subject: str,
    payload: bytes,
    headers: HeadersInput | None,
    deadline: Deadline,
    retry_attempts: int = 2,
    backoff: Backoff = RETRY_BACKOFF,
) -> PubAck:
    """A publish that waits for its PubAck, all tries within ``deadline``.

    Right after a stream leader election nobody answers for a moment (ADR-22):
    a "no responders" is retried ``retry_attempts`` times after ``backoff``.
    """
    attempt = 0
    while True:
        try:
            msg = core.request(subject, payload, deadline, headers)
        except NotSentError:
            raise  # withdrawn unsent: nothing can be stored, a retry is safe
        except TimeoutError as exc:
            raise TimeoutError(f"no PubAck for {subject!r} in time: the message was sent and may be stored;"
                               f" publish it again with the same msg_id to have it stored once") from exc
        except NoRespondersError:
            attempt += 1
            wait = backoff.delay(attempt)
            remaining = deadline.remaining()
            if attempt > retry_attempts or (remaining is not None and remaining <= wait):
                raise NoStreamResponseError(
                    f"no stream answered a publish to {subject!r} (is there a stream for it?)", code=503
                ) from None
            time.sleep(wait)  # the caller's own thread, and never past its deadline
            continue
        return parse_pub_ack(msg, subject)
