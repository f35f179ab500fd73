"""The request a service handler receives, and how it answers (nats-py's ``nats.micro.request``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ..codecs import Codec
from ..errors import PayloadDecodeError, ServiceError
from ..msg import Msg
from ..protocol.headers import Headers, HeadersInput

ERROR_HEADER = "Nats-Service-Error"
"""The header holding an error reply's description."""

ERROR_CODE_HEADER = "Nats-Service-Error-Code"
"""The header holding an error reply's code (a number, as text)."""

_json_encoder = msgspec.json.Encoder()

T = TypeVar("T")


class Request:
    """One request to an endpoint, as its handler receives it.

    A handler answers with :meth:`respond`, :meth:`respond_json` or
    :meth:`respond_error`, or by raising: a :class:`~natsjs_sync.errors.ServiceError`
    becomes that error reply, any other exception a ``500`` error reply. Safe
    to hand to another thread that answers later.
    """

    __slots__ = ("_error", "_msg", "_on_reply", "_responded")

    def __init__(self, msg: Msg, on_reply: Callable[[ServiceError | None], None] | None = None) -> None:
        self._msg = msg
        self._responded = False
        self._error: ServiceError | None = None
        # The service counts the request just before its first reply leaves, so
        # whoever has the reply also sees the request in the endpoint's stats.
        self._on_reply = on_reply

    @property
    def msg(self) -> Msg:
        """The underlying message."""
        return self._msg

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self._msg.subject

    @property
    def reply(self) -> str | None:
        """The reply subject (``""`` when the sender expects no answer)."""
        return self._msg.reply

    @property
    def headers(self) -> Headers | None:
        """The request headers, or ``None``."""
        return self._msg.headers

    @property
    def data(self) -> bytes:
        """The request payload."""
        return self._msg.data

    def json(self) -> Any:
        """The payload decoded as JSON.

        Raises:
            ServiceError: code ``400``: the payload is not valid JSON (uncaught,
                it answers the request with that error).
        """
        try:
            return msgspec.json.decode(self._msg.data)
        except msgspec.DecodeError as exc:
            raise ServiceError("400", f"request body is not valid JSON: {exc}") from None

    def decode(self, type_: type[T], codec: Codec | None = None) -> T:
        """The payload as a ``type_`` (see :meth:`Msg.decode <natsjs_sync.Msg.decode>`).

        Raises:
            ServiceError: code ``400``: the payload does not decode (uncaught, it
                answers the request with that error, naming the field).
        """
        try:
            return self._msg.decode(type_, codec)
        except PayloadDecodeError as exc:
            where = f" at {exc.field}" if exc.field else ""
            raise ServiceError("400", f"request does not decode{where}: {exc.reason}") from None

    def respond(self, data: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Send ``data`` (and optional headers) as the reply.

        Raises:
            ValueError: the request has no reply subject.
            BadHeaderError: headers that cannot be sent.
            MaxPayloadError: the reply is larger than the server's max_payload.
            ConnectionClosedError: the client is closed.
        """
        self._send(data, headers, None)

    def _send(self, data: bytes, headers: HeadersInput | None, error: ServiceError | None) -> None:
        if not self._msg.reply:
            raise ValueError(f"the request on {self._msg.subject!r} has no reply subject")
        if error is not None:
            self._error = error
        on_reply, self._on_reply = self._on_reply, None
        if on_reply is not None:
            on_reply(error)
        # A service's answer carries the headers given and nothing of the request (nats-py's
        # Request.respond, nats.go's micro), where a plain Msg.respond echoes the request's.
        self._msg.respond(data, headers=headers if headers is not None else {})
        self._responded = True

    def respond_json(self, value: Any, headers: HeadersInput | None = None) -> None:
        """Send ``value`` encoded as JSON as the reply.

        Raises:
            TypeError: ``value`` cannot be encoded as JSON.
            ValueError: the request has no reply subject.
        """
        try:
            data = _json_encoder.encode(value)
        except msgspec.EncodeError as exc:  # e.g. an int too large for JSON
            raise TypeError(f"cannot encode the reply as JSON: {exc}") from None
        self.respond(data, headers=headers)

    def respond_error(
        self,
        code: str | int,
        description: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
    ) -> None:
        """Send an error reply: ``Nats-Service-Error-Code: code`` and
        ``Nats-Service-Error: description`` headers, plus ``data``.

        The endpoint counts it in its ``num_errors`` and ``last_error``.

        Args:
            code: the error code, a number (``400``, ``"404"``).
            description: the error text for the caller (one line).
            data: an optional payload.
            headers: more headers to send with it.

        Raises:
            ValueError: empty code or description, or no reply subject.
            BadHeaderError: the description (or a header) holds a line break.
        """
        if isinstance(code, bool) or not isinstance(code, (str, int)) or str(code) == "":
            raise ValueError(f"error code must be a non-empty str or an int, got {code!r}")
        if not isinstance(description, str) or not description:
            raise ValueError("error description must be a non-empty str")
        error_headers = Headers()
        if headers:
            pairs = headers.items_all() if isinstance(headers, Headers) else headers.items()
            for key, value in pairs:
                for v in [value] if isinstance(value, str) else value:
                    error_headers.add(key, v)
        error_headers[ERROR_HEADER] = description
        error_headers[ERROR_CODE_HEADER] = str(code)
        self._send(data, error_headers, ServiceError(code, description))

    def __repr__(self) -> str:
        return f"<Request subject={self.subject!r} reply={self.reply!r} {len(self.data)} bytes>"


Handler = Callable[[Request], object]
"""A request handler: a plain function of one :class:`Request` (its return value is ignored)."""

__all__ = ["ERROR_CODE_HEADER", "ERROR_HEADER", "Handler", "Request", "ServiceError"]
