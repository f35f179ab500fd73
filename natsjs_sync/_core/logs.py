"""Log records that say which connection and which server they are about.

Every log call of the client where a connection is known goes through the
:class:`ConnectionLog` adapter of that connection (made once per connection and
logger, see :meth:`ConnectionLogs.to`). Each record it emits carries, as record
attributes (``extra``), read when the record is emitted so they follow a
reconnect:

==========================  =====================================================
``nats.connection.name``    the connection's ``name`` option
``messaging.client.id``     the id the server gave the connection
``server.address``          host of the current (or last) server
``server.port``             its port
==========================  =====================================================

A key is left out of a record while its value is not known (an unnamed
connection, a first connect still under way).

The keys are the OpenTelemetry semantic conventions' names where one exists
(``server.*``, ``messaging.client.id``), so OpenTelemetry's ``LoggingHandler``
turns them into log attributes of those names; a ``%``-style format string
reads them as ``%(server.address)s``.

Records are emitted on the thread of the event that caused them, so a handler
that reads the current span (OpenTelemetry's logging instrumentation) stamps
the right trace. An exception raised inside a span and logged after the span
was left (a callback's exception, reported by the dispatcher once the
callback returned) can carry that span's context: :func:`mark_raised_in`
records how to re-enter it, and a record about that exception is emitted
inside it. This module imports nothing of OpenTelemetry.

Log calls are never made per message: an adapter costs one ``isEnabledFor``
check when its level is off, and the fields are read only for records emitted.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import Connection

__all__ = [
    "CLIENT_ID_KEY",
    "NAME_KEY",
    "SERVER_ADDRESS_KEY",
    "SERVER_PORT_KEY",
    "ConnectionLog",
    "ConnectionLogs",
    "handshake_fields",
    "mark_raised_in",
    "of_msg",
]

#: The record attribute holding the connection's name.
NAME_KEY = "nats.connection.name"
#: The record attribute holding the server-given client id (semantic conventions' name).
CLIENT_ID_KEY = "messaging.client.id"
#: The record attribute holding the current server's host (semantic conventions' name).
SERVER_ADDRESS_KEY = "server.address"
#: The record attribute holding the current server's port (semantic conventions' name).
SERVER_PORT_KEY = "server.port"

#: The attribute of an exception holding the context it was raised in (see :func:`mark_raised_in`).
_RAISED_IN = "_natsjs_raised_in"

Enter = Callable[[], contextlib.AbstractContextManager[Any]]


def mark_raised_in(exc: BaseException, enter: Enter) -> None:
    """Let records about ``exc`` be emitted inside ``enter()`` (the span it was raised in).

    For code that wraps user code in a context and lets its exception leave it
    (the instrumentor's process spans): whoever logs the exception later on the
    same thread, through a :class:`ConnectionLog`, logs it as if still inside.

    Args:
        exc: the exception leaving the context.
        enter: makes a context manager that re-enters the context (it must not end anything).
    """
    try:
        setattr(exc, _RAISED_IN, enter)
    except AttributeError:  # an exception type that takes no attributes: logged as it is
        pass


def _raised_in(exc_info: Any) -> Enter | None:
    if exc_info is True:
        exc_info = sys.exc_info()[1]
    elif isinstance(exc_info, tuple):
        exc_info = exc_info[1]
    if not isinstance(exc_info, BaseException):
        return None
    enter: Enter | None = getattr(exc_info, _RAISED_IN, None)
    return enter


def handshake_fields(name: str | None, addr: Any, info: dict[str, Any]) -> dict[str, Any]:
    """The record attributes of a server being opened, before it is the connection's own.

    Args:
        name: the connection's name option.
        addr: the server being opened (host and port).
        info: its INFO.

    Returns:
        A new dict of the keys :meth:`ConnectionLogs.fields` gives that are known.
    """
    return _known(name, addr, info)


def _known(name: str | None, addr: Any, info: dict[str, Any]) -> dict[str, Any]:
    # A key with no value is left out rather than set to None: OpenTelemetry's handler
    # rejects None attributes (with a warning of its own for every record).
    fields: dict[str, Any] = {}
    if name:
        fields[NAME_KEY] = name
    client_id = info.get("client_id")
    if client_id is not None:
        fields[CLIENT_ID_KEY] = client_id
    if addr is not None:
        fields[SERVER_ADDRESS_KEY] = addr.host
        fields[SERVER_PORT_KEY] = addr.port
    return fields


def of_msg(msg: Any, logger: logging.Logger) -> logging.Logger | ConnectionLog:
    """``logger`` with the fields of the connection ``msg`` came in on (``logger`` itself for a
    message of no connection)."""
    conn = getattr(msg, "_conn", None)
    logs: ConnectionLogs | None = getattr(conn, "logs", None)
    return logger if logs is None else logs.to(logger)


class ConnectionLogs:
    """The log fields of one connection and its adapters, one per logger. Thread-safe.

    Args:
        conn: the connection (held weakly: the adapters live as long as it does).
    """

    __slots__ = ("__weakref__", "_adapters", "_conn", "_lock")

    def __init__(self, conn: Connection):
        self._conn = weakref.ref(conn)
        self._adapters: dict[str, ConnectionLog] = {}
        self._lock = threading.Lock()

    def fields(self) -> dict[str, Any]:
        """The record attributes as they are now (see the module docstring).

        Returns:
            A new dict of the keys that are known now.
        """
        conn = self._conn()
        if conn is None:
            return {}
        return _known(conn.name, conn.addr, conn.info)

    def to(self, logger: logging.Logger | str) -> ConnectionLog:
        """The adapter of ``logger`` for this connection (made once, then reused).

        Args:
            logger: a logger or its name (records keep the logger's name).

        Returns:
            The :class:`ConnectionLog` writing to ``logger``.
        """
        name = logger if isinstance(logger, str) else logger.name
        adapter = self._adapters.get(name)
        if adapter is None:
            with self._lock:
                adapter = self._adapters.get(name)
                if adapter is None:
                    target = logging.getLogger(name) if isinstance(logger, str) else logger
                    adapter = self._adapters[name] = ConnectionLog(target, self)
        return adapter

    def reset_after_fork(self) -> None:
        """In a forked child: a new lock (another thread of the parent may have held this one)."""
        self._lock = threading.Lock()


class ConnectionLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger whose records carry a connection's fields (see the module docstring). Thread-safe.

    A caller's own ``extra`` is kept and wins over the connection's fields.
    """

    def __init__(self, logger: logging.Logger, source: ConnectionLogs):
        super().__init__(logger, {})
        self._source = source

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        """Add the connection's fields, as they are now, to ``extra``."""
        extra = self._source.fields()
        given = kwargs.get("extra")
        if given:
            extra.update(given)
        kwargs["extra"] = extra
        return msg, kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        """Emit on this thread; a record about an exception marked by :func:`mark_raised_in`
        is emitted inside the context the exception was raised in.

        Never raises: the client logs from its reader, dispatcher and timer
        threads, often while handling another error, and logging's own failure
        (a handler or filter raising, the marked context failing to enter, a
        record emitted during interpreter shutdown) must lose that record only,
        not kill the thread (a dead dispatcher worker stalls its subscription
        for good). ``logging.raiseExceptions`` (the default) prints the failure
        to stderr, as logging's handlers do.
        """
        if not self.isEnabledFor(level):
            return
        try:
            self._emit(level, msg, args, kwargs)
        except Exception:
            _lost(msg)

    def _emit(self, level: int, msg: Any, args: tuple[Any, ...], kwargs: MutableMapping[str, Any]) -> None:
        msg, options = self.process(msg, kwargs)
        # These two frames are not logging's own: skip them, so the record names the real caller.
        options["stacklevel"] = options.get("stacklevel", 1) + 2
        enter = _raised_in(options.get("exc_info"))
        context: contextlib.AbstractContextManager[Any] | None = None
        if enter is not None:
            try:
                context = enter()
                context.__enter__()
            except Exception:  # a broken marker must not lose the record
                context = None
        try:
            self.logger.log(level, msg, *args, **options)
        finally:
            if context is not None:
                context.__exit__(None, None, None)


def _lost(msg: Any) -> None:
    """Say on stderr that a record could not be logged (when logging would say so), without raising."""
    if not logging.raiseExceptions:
        return
    try:
        sys.stderr.write(f"--- natsjs_sync: a log record could not be emitted ({msg!r}) ---\n")
        traceback.print_exc(file=sys.stderr)
    except Exception:  # stderr gone (interpreter shutdown, a closed pipe): nothing left to tell
        pass
