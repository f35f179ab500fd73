"""The reader thread of a connection: bytes -> parser -> routes.

It reads the transport, feeds the sans-IO parser and hands each event on:
messages to their subscription's route (its inlet, which enqueues, or a mux
that settles a waiter in place; a run of messages goes in one call, see
:mod:`.inlet`), PING/PONG to the ledger, INFO and ``-ERR`` to the
connection. It never runs user code and never waits on a user; when the
transport fails it reports the loss once and ends.

A route that does its work better in bulk (settling many publish acks under
one lock) only collects its messages and registers a function with
``conn.after_read`` (see :meth:`.Connection.after_read`); the reader runs those
once every event of a socket read is routed, before it reads again.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import ProtocolError, UnexpectedEOF
from ..protocol.parser import OK, PING, PONG, Err, Info, Parser
from .inlet import route_run

if TYPE_CHECKING:
    from .connection import Connection
    from .transport import Transport


def start_reader(conn: Connection, transport: Transport, parser: Parser, leftover: list[Any]) -> threading.Thread:
    t = threading.Thread(target=read_loop, args=(conn, transport, parser, leftover),
                         name=f"natsjs-reader-{conn.tag}", daemon=True)
    t.start()
    return t


def read_loop(conn: Connection, transport: Transport, parser: Parser, leftover: list[Any]) -> None:
    routes = conn.registry.routes
    stats = conn.stats
    msg_cls = conn.msg_cls
    read = transport.read
    feed = parser.feed
    events: list[Any] = leftover
    pending = conn.read_end  # functions routes asked to run once this read's events are routed
    failure: ProtocolError | None = None
    try:
        while True:
            i, n = 0, len(events)
            while i < n:
                # Every message up to the next other event, counted and routed in one call
                # (compiled where built).
                i = route_run(events, i, routes, msg_cls, stats)
                if i == n:
                    break
                ev = events[i]
                i += 1
                if ev is PING:
                    conn.send_pong()
                elif ev is PONG:
                    conn.on_pong()
                elif ev is OK:
                    pass
                elif isinstance(ev, Info):
                    conn.on_info(ev.options, transport)
                elif isinstance(ev, Err):
                    conn.on_err(ev.text)
            if pending:
                _run_read_end(pending)
            if failure is not None:
                raise failure
            data = read()
            if not data:
                # nats-py's class for it, still a NatsConnectionError (via StaleConnectionError)
                raise UnexpectedEOF(f"the server closed the connection{conn.last_server_error_suffix()}")
            try:
                events = feed(data)
            except ProtocolError as exc:
                # The connection is lost, but the messages the read held before the
                # bad bytes are not: they are routed first, like any other read's.
                failure = exc
                events = parser.parsed_before_error()
    except Exception as exc:
        try:
            if pending:  # what was routed before the failure is still settled
                _run_read_end(pending)
        finally:
            conn.connection_lost(exc, transport)  # even if a settling function failed
    finally:
        transport.close()  # the reader owns the descriptor: nobody else closes it under its poll


def _run_read_end(pending: list[Any]) -> None:
    # Deleting only what was taken keeps a function another reader added
    # meanwhile (an old reader still ending while the new one starts).
    fns = pending[:]
    del pending[:len(fns)]
    for fn in fns:
        fn()
