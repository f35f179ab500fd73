"""The message a subscription delivers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .protocol.headers import Headers, HeadersInput, parse_headers, status_of

if TYPE_CHECKING:
    from .client import Client


class Msg:
    """A received message. Immutable in practice; safe to pass between threads.

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject, or ``None``.
        data: the payload (``bytes``).
        sid: the id of the subscription that received it.
    """

    __slots__ = ("_client", "_hdr", "_headers", "data", "reply", "sid", "subject")

    def __init__(
        self,
        subject: str,
        sid: int = 0,
        reply: str | None = None,
        hdr: bytes | None = None,
        data: bytes = b"",
        client: Client | None = None,
    ):
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self._hdr = hdr
        self.data = data
        self._headers: Headers | None = None
        self._client = client

    # Headers are parsed on first access: most messages never have theirs read.
    @property
    def headers(self) -> Headers | None:
        """The headers (a :class:`~natsjs_sync.Headers` dict), or ``None``."""
        if self._hdr is None:
            return None
        if self._headers is None:
            self._headers = parse_headers(self._hdr)[2]
        return self._headers

    @property
    def status(self) -> int | None:
        """The status code from the header line (e.g. 503, 408), or ``None``."""
        return status_of(self._hdr)

    @property
    def description(self) -> str:
        """The status description from the header line, or ``""``."""
        if self._hdr is None:
            return ""
        return parse_headers(self._hdr)[1]

    @property
    def raw_headers(self) -> bytes | None:
        """The header block exactly as received."""
        return self._hdr

    def respond(self, data: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises:
            ValueError: the message has no reply subject.
        """
        if not self.reply:
            raise ValueError("message has no reply subject")
        if self._client is None:
            raise ValueError("message is not bound to a client")
        self._client.publish(self.reply, data, headers=headers)

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 64 else self.data[:64] + b"..."
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={data!r}>"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, Msg)
            and self.subject == other.subject
            and self.reply == other.reply
            and self.data == other.data
            and self._hdr == other._hdr
        )

    __hash__ = None  # type: ignore[assignment]
