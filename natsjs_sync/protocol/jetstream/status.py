"""What a JetStream status message means: the one classifier for every consumer path.

A pull request's inbox, a push consumer's deliver subject and an ordered
consumer's inbox all receive, besides stream messages, header-only *status*
messages (``NATS/1.0 <code> <description>``). :func:`classify` turns the raw
header block of such a message into a :class:`Status` whose :class:`Kind`
says what to do; each consumer applies its own policy to that kind (a fetch
ends, ``messages()`` asks again, an ordered consumer re-creates itself), but
none of them reads status codes or descriptions itself.

Outside a consumer, one status matters to every request: the server's "no
responders" answer (503 with no payload), sent when nobody is subscribed to a
request's subject. :func:`is_no_responders` is its one test, used by the core
request, ``request_many``, the asyncio facade and the JetStream publishers.

The kinds follow the server and nats.go's ``checkMsg``:

====================  =========================================================
HEARTBEAT             100 Idle Heartbeat (``stalled``: a push consumer asks to be un-stalled)
FLOW_CONTROL          100 FlowControl Request (answer on the reply subject)
REQUEST_ENDED         404 No Messages, 408 Request Timeout, 409 Batch Completed /
                      Message Size Exceeds MaxBytes: that pull request is over,
                      ``pending_msgs``/``pending_bytes`` of it will never come
LIMIT                 409 Exceeded Max* (waiting, batch, expires, bytes) and other
                      409s: the request was refused; an error to report, not to stop on
RESET                 409 Leadership Change / Server Shutdown, 423 pin id mismatch:
                      outstanding requests are gone, ask again
NO_RESPONDERS         503: nobody serves the consumer (deleted, or the server is away)
CONSUMER_DELETED      409 Consumer Deleted: terminal for this consumer
TERMINAL              400 (e.g. a priority group missing), any other 4xx/5xx:
                      the requests cannot work; stop and raise
====================  =========================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import ConsumerDeletedError, JetStreamError
from ..headers import STATUS_NO_RESPONDERS, parse_headers, status_of


class Kind(enum.Enum):
    MESSAGE = "message"
    HEARTBEAT = "heartbeat"
    FLOW_CONTROL = "flow control"
    REQUEST_ENDED = "request ended"
    LIMIT = "limit"
    RESET = "reset"
    NO_RESPONDERS = "no responders"
    CONSUMER_DELETED = "consumer deleted"
    TERMINAL = "terminal"


@dataclass(frozen=True)
class Status:
    """A classified status message."""

    kind: Kind
    code: int = 0
    description: str = ""
    pending_msgs: int = 0
    pending_bytes: int = 0
    stalled: str | None = None  #: subject to publish to un-stall a push consumer
    pin_id_reset: bool = False  #: 423: forget the pin id before asking again
    #: 409 Message Size Exceeds MaxBytes: the next message is larger than what is
    #: left of the request's ``max_bytes`` (``pending_bytes``). Ends a request that
    #: was served in part normally; one that could take nothing says the message is
    #: larger than any request of that size (a pull that asks the same way again
    #: gets the same answer at once).
    too_large: bool = False

    def error(self) -> JetStreamError | None:
        """The exception this status stands for, if it is an error at all."""
        if self.kind is Kind.CONSUMER_DELETED:
            return ConsumerDeletedError(self.description or "consumer deleted", code=self.code)
        if self.kind in (Kind.TERMINAL, Kind.LIMIT):
            text = self.description or f"pull request failed with status {self.code}"
            return JetStreamError(text, code=self.code)
        if self.kind is Kind.NO_RESPONDERS:
            return JetStreamError("no responders: the consumer is gone or the server is away", code=503)
        return None


MESSAGE = Status(Kind.MESSAGE)

_TOO_LARGE = "message size exceeds maxbytes"
_ENDS_REQUEST = ("batch completed", _TOO_LARGE)
_RESETS = ("leadership change", "server shutdown")


def _pending(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def is_no_responders(raw_headers: bytes | None, data: bytes) -> bool:
    """Whether a reply is the server's "no responders" answer to a request.

    The server sends it (when the client's CONNECT asked for it, as ours
    does) instead of letting a request to a subject nobody serves run into
    its timeout: a header block with status 503 and no payload. A 503 that
    carries a payload is somebody's answer, not the server's.

    Args:
        raw_headers: the reply's header block as received, or ``None``.
        data: the reply's payload.

    Returns:
        True for the no-responders status, False for anything else.
    """
    # raw_headers first: the common reply has no headers, and this is on every request's path.
    return raw_headers is not None and not data and status_of(raw_headers) == STATUS_NO_RESPONDERS


def classify(raw_headers: bytes | None, reply: str | None = None) -> Status:
    """Classify a message by its raw header block (and reply subject, for flow control).

    A message without a status line is :data:`MESSAGE` (a stream message),
    whatever headers it carries.
    """
    if raw_headers is None or len(raw_headers) < 12 or raw_headers[8:9] != b" ":
        return MESSAGE
    code_b = raw_headers[9:12]
    if not code_b.isdigit():
        return MESSAGE
    code, description, headers = parse_headers(raw_headers)
    if code is None:  # "NATS/1.0 123x": not a status line after all
        return MESSAGE
    low = description.lower()
    if code == 100:
        if reply or "flowcontrol" in low.replace(" ", ""):
            return Status(Kind.FLOW_CONTROL, code, description)
        return Status(Kind.HEARTBEAT, code, description, stalled=headers.get("Nats-Consumer-Stalled"))
    pend_m = _pending(headers.get("Nats-Pending-Messages"))
    pend_b = _pending(headers.get("Nats-Pending-Bytes"))
    if code in (404, 408):
        return Status(Kind.REQUEST_ENDED, code, description, pend_m, pend_b)
    if code == 409:
        if "consumer deleted" in low:
            return Status(Kind.CONSUMER_DELETED, code, description, pend_m, pend_b)
        if any(s in low for s in _ENDS_REQUEST):
            return Status(Kind.REQUEST_ENDED, code, description, pend_m, pend_b, too_large=_TOO_LARGE in low)
        if any(s in low for s in _RESETS):
            return Status(Kind.RESET, code, description, pend_m, pend_b)
        return Status(Kind.LIMIT, code, description, pend_m, pend_b)
    if code == 423:
        return Status(Kind.RESET, code, description, pend_m, pend_b, pin_id_reset=True)
    if code == STATUS_NO_RESPONDERS:
        return Status(Kind.NO_RESPONDERS, code, description)
    return Status(Kind.TERMINAL, code, description, pend_m, pend_b)
