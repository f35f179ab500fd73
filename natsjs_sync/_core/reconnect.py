"""Losing a connection and getting it back.

:meth:`Reconnector.lost` runs once per lost transport (from whichever thread
noticed): it fails what can no longer be answered (PINGs and requests that
were on the wire; those still buffered wait for the next connection), tells
the user, and starts the reconnect thread, which walks the server pool with
its back-off.

:meth:`Reconnector.resume` attaches a new connection in **one critical
section** under the connection lock: snapshot the subscriptions, put their
SUBs in front of everything buffered, attach the transport and go CONNECTED.
A subscribe that comes before it is in the snapshot; one that comes after it
writes its SUB behind the replay. None falls in between.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ..errors import NatsConnectionError, NatsError, NoServersError, ServerNotInPoolError
from ..protocol.connection import ConnState, replay_frames
from .opener import Opened
from .pool import PoolEntry

if TYPE_CHECKING:
    from .connection import Connection
    from .transport import Transport

log = logging.getLogger("natsjs_sync.reconnect")


class Reconnector:
    """Loss handling and the reconnect thread of one connection."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._thread: threading.Thread | None = None
        self.stop = threading.Event()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def lost(self, exc: BaseException, transport: Transport) -> None:
        """``transport`` failed (any thread; only the first report per transport counts)."""
        conn = self._conn
        if isinstance(exc, NatsError):
            err: Exception = exc
        else:
            err = NatsConnectionError(f"connection lost: {exc}")
            err.__cause__ = exc
        waiting_lost = NatsConnectionError(f"connection lost while waiting: {err}")
        with conn.lock:
            state = conn.machine.state
            if conn.transport is not transport or state in (ConnState.CLOSED, ConnState.FORKED):
                return
            conn.transport = None
            conn.connected_event.clear()
            reconnect = conn.options.allow_reconnect and state is ConnState.CONNECTED
            if reconnect:
                conn.machine.to(ConnState.RECONNECTING)
            # PINGs on the wire will never be answered; buffered ones go out after the
            # reconnect, but their PONGs vouch for nothing the lost connection swallowed.
            conn.ledger.settle_taken(conn.writer.taken)  # a write cut short may have missed telling it
            failed = conn.ledger.lost(conn.writer.taken, conn.requests.replied_to)
            # Likewise requests: a reply to one in flight may be lost with the connection,
            # one still buffered is sent on the next (or withdrawn at its deadline).
            failed += conn.requests.take_sent(conn.writer.taken)
        for w in failed:
            w.set(waiting_lost)
        transport.abort()
        if not getattr(exc, "forced", False):  # a reconnect the user asked for is no error (nats-py)
            conn.report_error(err)
        conn.logs.to(log).info("disconnected from %s: %s", conn.addr, err)
        conn.emit(conn.options.disconnected_cb)
        if not reconnect:
            conn.close(flush=False)
            return
        conn.pool.disconnected()
        self.start()

    def start(self) -> None:
        """Make sure a reconnect thread runs (the state is RECONNECTING).

        Called on the reconnect thread itself (its new connection broke at
        once), it does nothing: that thread's loop carries on.
        """
        if threading.current_thread() is self._thread:
            return
        t = threading.Thread(target=self._loop, name=f"natsjs-reconnect-{self._conn.tag}", daemon=True)
        self._thread = t  # an older loop sees it was superseded and ends
        t.start()

    def _loop(self) -> None:
        conn = self._conn
        pool = conn.pool
        me = threading.current_thread()
        attempt = 0
        while conn.machine.state is ConnState.RECONNECTING and self._thread is me:
            choice = self._next_attempt()
            if choice is None:
                conn.report_error(NoServersError("no server left to reconnect to"))
                conn.close(flush=False)
                return
            entry, wait = choice
            if wait > 0 and self.stop.wait(wait):
                return
            if conn.machine.state is not ConnState.RECONNECTING:
                return
            attempt += 1
            conn.logs.to(log).info("reconnecting to %s (attempt %d)", entry.addr, attempt)
            try:
                opened = conn.open(entry)
            except NatsError as exc:
                pool.failed(entry)
                conn.report_error(exc)
                continue
            self.resume(opened, entry)  # if it broke again at once, the loop goes on

    def _next_attempt(self) -> tuple[PoolEntry, float] | None:
        """The server to try next and the wait before it: the pool's choice, or the user's
        (``choose_server``, nats-py's ``reconnect_to_server_handler``) when one is set."""
        conn = self._conn
        pool = conn.pool
        choose = conn.options.choose_server
        if choose is None:
            return pool.next_attempt(time.monotonic())
        entries = pool.candidates()
        if not entries:
            return None
        try:
            picked, delay = choose(entries, dict(conn.info))
        except Exception as exc:  # the user's code: reported, and the pool decides this time
            conn.report_error(exc)
            return pool.next_attempt(time.monotonic())
        if picked is not None and not any(picked is e for e in entries):
            conn.report_error(ServerNotInPoolError("the server chosen to reconnect to is not in the pool"))
            picked = None
        return (picked if picked is not None else entries[0]), max(0.0, float(delay or 0.0))

    def resume(self, opened: Opened, entry: PoolEntry) -> bool:
        """Attach ``opened`` and restore everything (see the module docstring).

        Returns False if the new connection broke at once (the state is then
        RECONNECTING again).
        """
        conn = self._conn
        with conn.lock:
            if conn.machine.state is not ConnState.RECONNECTING:
                opened.transport.close()  # it never got a reader
                return True
            used_up = conn.registry.used_up()
            for e in used_up:
                conn.registry.remove(e.sid)
            replay = replay_frames(conn.registry.snapshot())
            conn.writer.prepend_locked(replay)
            conn.attach_locked(opened, entry)
        for e in used_up:
            if e.owner is not None:
                e.owner.finish_drained()
        conn.start_reader(opened)
        conn.writer.send_now()
        if not conn.is_connected:
            return False
        conn.stats.reconnects += 1
        conn.logs.to(log).info("reconnected to %s", entry.addr)
        conn.after_attach(opened.info)
        conn.reconnect_hooks.run()
        conn.emit(conn.options.reconnected_cb)
        return True

    def reset_after_fork(self) -> None:
        self._thread = None
        self.stop = threading.Event()
