"""The message a subscription delivers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .errors import BadHeaderError, MsgAlreadyAckdError, NotJSMessageError, ProtocolError
from .protocol import _compiled
from .protocol.headers import Headers, HeadersInput, parse_headers, sendable, status_of
from .protocol.jetstream.ackreply import ACK, ACK_PREFIX, NAK, TERM, WPI, MsgMetadata, parse_metadata

if TYPE_CHECKING:
    from ._core.spi import CoreLink
    from .codecs import Codec

T = TypeVar("T")


class Msg:
    """A received message. Immutable in practice; safe to pass between threads.

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject, or ``""`` when the sender expects no answer
            (as in nats-py and nats.go; test it with ``if msg.reply:``).
        data: the payload (``bytes``).
        raw_headers: the header block exactly as received (``bytes``), or ``None``.
        sid: the id of the subscription that received it.
    """

    # ``_headers`` stays unset until first read; ``_conn`` is a class attribute
    # of the per-client subclass made by :func:`bound_msg_class`, so building a
    # message on the reader thread sets five slots and nothing more.
    __slots__ = ("_ackd", "_headers", "data", "raw_headers", "reply", "sid", "subject")

    _conn: CoreLink | None = None  # only what the declared interface offers

    def __init__(
        self,
        subject: str,
        sid: int = 0,
        reply: str | None = "",
        hdr: bytes | None = None,
        data: bytes = b"",
    ):
        self.subject = subject
        self.sid = sid
        self.reply: str = reply or ""
        self.raw_headers = hdr
        self.data = data

    @property
    def headers(self) -> Headers | None:
        """The headers (a :class:`~natsjs_sync.Headers` dict), or ``None``: also for a
        header block that holds neither a header nor a status (``NATS/1.0`` alone, as
        a publisher sends an empty set of headers), as nats-py reads it.

        Raises:
            ProtocolError: the header block is malformed. The server passes on
                whatever block a publisher sent; the message itself is delivered.
        """
        if self.raw_headers is None:
            return None
        try:
            return self._headers
        except AttributeError:
            status, _, parsed = parse_headers(self.raw_headers)
            self._headers: Headers | None = parsed if parsed or status is not None else None
            return self._headers

    @property
    def header(self) -> Headers | None:
        """nats-py's name for :attr:`headers`."""
        return self.headers

    @property
    def status(self) -> int | None:
        """The status code from the header line (e.g. 503, 408), or ``None``."""
        return status_of(self.raw_headers)

    @property
    def description(self) -> str:
        """The status description from the header line, or ``""``."""
        if self.raw_headers is None:
            return ""
        return parse_headers(self.raw_headers)[1]

    def decode(self, type_: type[T], codec: Codec | None = None) -> T:
        """The payload as a ``type_``: a msgspec Struct, a dataclass, a TypedDict, a
        plain type (``dict[str, int]``) or a pydantic model.

        The ``content-type`` header says which codec reads it; without one,
        ``codec`` does (default :data:`~natsjs_sync.codecs.JSON`). See :doc:`codecs`.

        Raises:
            PayloadDecodeError: the payload does not decode; it names the
                subject, the stream sequence of a JetStream message, the type and the field.
        """
        from .codecs.typed import decode_msg

        return decode_msg(self, type_, codec)

    def respond(self, data: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Publish ``data`` to this message's reply subject, sent at once.

        The reply skips the write buffer's flusher thread: somebody is waiting for it.

        Args:
            data: the reply's payload.
            headers: the reply's headers. When not given, the reply carries this
                message's own :attr:`headers`, changes made to them included, as
                nats-py's ``respond()`` does (none when the message had none or
                its header block cannot be read; a header this client cannot send,
                such as a key with a blank inside from another client, is left
                out); ``{}`` sends none.

        Raises:
            ValueError: the message has no reply subject.
        """
        if not self.reply:
            raise ValueError("message has no reply subject")
        if self._conn is None:
            raise ValueError("message is not bound to a client")
        echoed = headers is None and self.raw_headers is not None
        if echoed:
            try:
                headers = self.headers
            except ProtocolError:
                headers = None  # a malformed block is not passed on; the answer still goes
        # The reply subject is the server's, sent back byte for byte (one that
        # was not UTF-8 on the wire included); only the headers are checked.
        try:
            self._conn.publish_now(self.reply, data, headers=headers or None, trusted=True)
        except BadHeaderError:
            if not echoed or not headers:
                raise
            # Another client's header that this one refuses to send: the answer still goes,
            # with the rest (checked only here, so a reply that encodes pays nothing).
            self._conn.publish_now(self.reply, data, headers=sendable(headers) or None, trusted=True)

    # ------------------------------------------------------------ JetStream

    @property
    def metadata(self) -> MsgMetadata:
        """Stream, consumer, sequences, delivery count and time of a JetStream message.

        Raises:
            NotJSMessageError: the message did not come from a JetStream consumer.
        """
        return parse_metadata(self.reply)

    @property
    def is_acked(self) -> bool:
        """True once ack, nak or term was sent for this message."""
        return getattr(self, "_ackd", False)

    def _ack_reply(self) -> str:
        reply = self.reply
        if not reply or not reply.startswith(ACK_PREFIX):
            raise NotJSMessageError(f"not a JetStream message (reply subject {reply!r})")
        if getattr(self, "_ackd", False):
            raise MsgAlreadyAckdError(f"message {reply} was already acknowledged")
        if self._conn is None:
            raise ValueError("message is not bound to a client")
        return reply

    def _send_ack(self, body: bytes, final: bool = True) -> None:
        reply = self._ack_reply()
        self._conn.publish_trusted(reply, body)  # type: ignore[union-attr]
        if final:
            self._ackd = True

    def ack(self) -> None:
        """Acknowledge: the message is processed. Sent with the next write, not waited for.

        Raises:
            MsgAlreadyAckdError: ack, nak or term was already sent.
            NotJSMessageError: the message did not come from a JetStream consumer.
        """
        self._send_ack(ACK)

    def ack_sync(self, timeout: float | None = 5.0) -> Msg:
        """Acknowledge and wait until the server confirms it (double ack).

        Returns:
            The server's confirmation (an empty message on the request's inbox), as
            nats-py returns it: code written for either client may keep it.

        Raises:
            TimeoutError: no confirmation within ``timeout`` seconds.
            MsgAlreadyAckdError: ack, nak or term was already sent.
            NotJSMessageError: the message did not come from a JetStream consumer.
        """
        from ._timeout import Deadline

        reply = self._ack_reply()
        confirmation: Msg = self._conn.request(reply, ACK, Deadline.of(timeout, 5.0))  # type: ignore[union-attr]
        self._ackd = True
        return confirmation

    def nak(self, delay: float | None = None) -> None:
        """Negative acknowledgement: redeliver, after ``delay`` seconds when given."""
        if delay is None:
            self._send_ack(NAK)
        else:
            self._send_ack(NAK + b' {"delay":%d}' % int(delay * 1_000_000_000))

    def in_progress(self) -> None:
        """Tell the server work is still going on: resets the ack wait. Can be repeated."""
        self._send_ack(WPI, final=False)

    def term(self, reason: str | None = None) -> None:
        """Stop redelivery of this message for good (with an optional reason)."""
        self._send_ack(TERM + (b" " + reason.encode() if reason else b""))

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 64 else self.data[:64] + b"..."
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={data!r}>"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, Msg)
            and self.subject == other.subject
            and self.reply == other.reply
            and self.data == other.data
            and self.raw_headers == other.raw_headers
        )

    __hash__ = None  # type: ignore[assignment]


if _compiled.speedups is not None:  # the compiled parser fills Msg's slots itself: tell it where they are
    _compiled.speedups.setup(Msg)


def bound_msg_class(conn: CoreLink) -> type[Msg]:
    """A subclass of :class:`Msg` whose instances belong to ``conn`` (for ``respond`` and acks)."""
    return type("Msg", (Msg,), {"__slots__": (), "_conn": conn, "__module__": Msg.__module__})
