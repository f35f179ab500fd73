"""The calling side of services: discovery (PING, INFO, STATS) and requests that
turn service error replies into :class:`~natsjs_sync.errors.ServiceError`.

Discovery is a request to many (see :mod:`natsjs_sync.request_many`): every
instance that matches answers, and the answers are collected until none came
for ``stall`` seconds, or ``timeout`` passed, or ``max_results`` arrived.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from .._timeout import USE_DEFAULT, TimeoutArg, check_seconds, resolve
from ..client import Client
from ..errors import NoRespondersError, ProtocolError, ServiceError
from ..msg import Msg
from ..protocol.headers import HeadersInput
from ..request_many import request_many
from .models import DEFAULT_PREFIX, ServiceInfo, ServicePing, ServiceStats, ServiceVerb, _Model
from .request import ERROR_CODE_HEADER, ERROR_HEADER
from .service import control_subject

log = logging.getLogger("natsjs_sync.micro")

M = TypeVar("M", bound=_Model)

#: Seconds to wait for the first answer to a discovery request.
DEFAULT_DISCOVERY_TIMEOUT = 2.0
#: Seconds without a further answer after which discovery is complete.
DEFAULT_STALL = 0.5
#: Seconds :meth:`ServiceClient.request` waits for the reply.
DEFAULT_REQUEST_TIMEOUT = 5.0


def service_error(msg: Msg) -> ServiceError | None:
    """The :class:`~natsjs_sync.errors.ServiceError` a reply carries, or ``None`` for a normal reply."""
    headers = msg.headers
    if not headers:
        return None
    code = headers.get(ERROR_CODE_HEADER)
    description = headers.get(ERROR_HEADER)
    if code is None and description is None:
        return None
    return ServiceError(code or "500", description or "", msg.data)


class ServiceClient:
    """Finds services and calls them. Thread-safe (it holds no state but its settings).

    Args:
        client: the connected client.
        timeout: default seconds for a discovery call (the wait for the first answer).
        stall: default seconds without another answer that end a discovery call.
        prefix: the discovery prefix (``$SRV``; another one when services are
            imported from another account under a prefix).
    """

    def __init__(self, client: Client, *, timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
                 stall: float = DEFAULT_STALL, prefix: str = DEFAULT_PREFIX):
        if not isinstance(client, Client):
            raise TypeError(f"client must be a natsjs_sync Client, not {type(client).__name__}")
        for what, value in (("timeout", timeout), ("stall", stall)):
            seconds = check_seconds(value, what)
            if seconds is None or seconds <= 0:
                raise ValueError(f"{what} must be a finite number of seconds > 0, got {value!r}")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty str")
        self.client = client
        self.timeout = float(timeout)
        self.stall = float(stall)
        self.prefix = prefix

    def ping(self, name: str | None = None, id: str | None = None, *,  # noqa: A002 - the protocol's word
             timeout: TimeoutArg = USE_DEFAULT, max_results: int | None = None) -> list[ServicePing]:
        """PING every service, those called ``name``, or the one instance ``name``/``id``.

        Args:
            name: only services of this name.
            id: only this instance (needs ``name``).
            timeout: seconds to wait for the answers (default: the client's ``timeout``).
            max_results: stop once this many answered (``1`` when ``id`` is given).

        Returns:
            The answers, in arrival order (fastest first); empty when no service answered.

        Raises:
            ValueError: invalid name or id.
            ProtocolError: an answer that is not a PING reply.
        """
        return self._discover(ServiceVerb.PING, ServicePing, name, id, timeout, max_results)

    def info(self, name: str | None = None, id: str | None = None, *,  # noqa: A002
             timeout: TimeoutArg = USE_DEFAULT, max_results: int | None = None) -> list[ServiceInfo]:
        """INFO of every service, those called ``name``, or one instance (see :meth:`ping`)."""
        return self._discover(ServiceVerb.INFO, ServiceInfo, name, id, timeout, max_results)

    def stats(self, name: str | None = None, id: str | None = None, *,  # noqa: A002
              timeout: TimeoutArg = USE_DEFAULT, max_results: int | None = None) -> list[ServiceStats]:
        """STATS of every service, those called ``name``, or one instance (see :meth:`ping`)."""
        return self._discover(ServiceVerb.STATS, ServiceStats, name, id, timeout, max_results)

    def _discover(self, verb: ServiceVerb, model: type[M], name: str | None, id: str | None,  # noqa: A002
                  timeout: TimeoutArg, max_results: int | None, none_listening_raises: bool = False) -> list[M]:
        """The answers to ``verb``; ``none_listening_raises``: NoRespondersError when the server
        said at once that nobody listens (the command line tells that apart from a silence)."""
        subject = control_subject(verb, name, id, prefix=self.prefix)
        if id and max_results is None:
            max_results = 1
        found: list[M] = []
        try:
            with request_many(self.client, subject, timeout=resolve(timeout, self.timeout), stall=self.stall,
                              max_messages=max_results) as replies:
                for msg in replies:
                    found.append(model.from_json(msg.data))
        except NoRespondersError:
            if none_listening_raises:
                raise
            return []
        except ProtocolError as exc:
            raise ProtocolError(f"a service answered {subject} with something else: {exc}") from None
        return found

    def request(self, subject: str, payload: bytes | bytearray | memoryview = b"", *,
                headers: HeadersInput | None = None, timeout: TimeoutArg = USE_DEFAULT) -> Msg:
        """Call an endpoint; an error reply raises instead of returning.

        Raises:
            ServiceError: the service answered with an error (``.code``, ``.description``, ``.data``).
            NoRespondersError: no service listens on ``subject``.
            TimeoutError: no answer within ``timeout`` (default 5 s).
        """
        reply = self.client.request(subject, payload, timeout=resolve(timeout, DEFAULT_REQUEST_TIMEOUT),
                                    headers=headers)
        error = service_error(reply)
        if error is not None:
            raise error
        return reply

    def __repr__(self) -> str:
        return f"<ServiceClient prefix={self.prefix!r} timeout={self.timeout} stall={self.stall}>"
