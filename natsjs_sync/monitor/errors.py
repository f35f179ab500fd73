"""The exceptions of the monitoring client, in natsjs_sync's one tree.

::

    NatsError
    ├── ServerError
    │   └── PermissionsError
    │       └── SystemAccountRequiredError   the user is not in the system account
    └── MonitorError                         a server's error answer (.code, .description, .server)
        └── MonitorResponseError             an answer this client cannot decode
"""

from __future__ import annotations

from ..errors import NatsError, PermissionsError


class SystemAccountRequiredError(PermissionsError):
    """Nobody answers a ``$SYS.REQ.SERVER`` request: the connection's user is not
    in the system account (the only account the servers answer those requests in).
    """


class MonitorError(NatsError):
    """A server answered a monitoring request with an error (bad options, for one).

    Attributes:
        code: the HTTP-like status the server gave (400 for bad options), or ``None``.
        description: the server's explanation.
        server: the name of the server that answered, when known.
    """

    def __init__(self, description: str, code: int | None = None, server: str | None = None):
        where = f" (server {server})" if server else ""
        super().__init__(f"{description}{where}" if code is None else f"{description} [{code}]{where}")
        self.code = code
        self.description = description
        self.server = server


class MonitorResponseError(MonitorError):
    """An answer that is not the JSON this client expects."""
