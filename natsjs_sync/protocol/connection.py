"""The connection's protocol state, without I/O: states, handshake, PING ledger, replay.

This is what a NATS connection *is*, apart from moving bytes and waking
threads (which the I/O layer in ``natsjs_sync._core`` does):

- :class:`ConnState` and :data:`TRANSITIONS`: the life cycle, as one table;
  :class:`StateMachine` refuses any move the table does not allow.
- :class:`Handshake`: INFO -> [TLS] -> CONNECT + PING -> PONG, fed parser events.
- :class:`PingLedger`: which PONG answers which PING, what a lost connection
  takes with it, and when unanswered keep-alives make the connection stale.
- :func:`replay_frames`: the SUB/UNSUB bytes that restore subscriptions on a
  new connection.
- :func:`server_error`: the one mapping of ``-ERR`` texts to exceptions.

Nothing here reads a clock, opens a socket or starts a thread.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import AuthorizationError, PermissionsError, ProtocolError, ServerError
from . import commands
from .parser import OK, PING, PONG, Err, Info

W = TypeVar("W")


class ConnState(enum.Enum):
    """Where a connection is in its life."""

    CONNECTING = "connecting"  #: the first connect is under way
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"  #: the socket was lost; trying the pool
    DRAINING_SUBS = "draining"  #: drain(): subscriptions are finishing
    DRAINING_PUBS = "draining publishes"  #: drain(): the last publishes are flushed
    CLOSED = "closed"
    FORKED = "forked"  #: a copy inherited by a forked child; connects afresh on first use


_S = ConnState

#: Every allowed move. A connection lost while draining closes (there is no
#: server left to drain against); a forked child's copy may be revived.
TRANSITIONS: dict[ConnState, frozenset[ConnState]] = {
    _S.CONNECTING: frozenset({_S.CONNECTED, _S.RECONNECTING, _S.CLOSED, _S.FORKED}),
    _S.CONNECTED: frozenset({_S.RECONNECTING, _S.DRAINING_SUBS, _S.CLOSED, _S.FORKED}),
    _S.RECONNECTING: frozenset({_S.CONNECTED, _S.DRAINING_SUBS, _S.CLOSED, _S.FORKED}),
    _S.DRAINING_SUBS: frozenset({_S.DRAINING_PUBS, _S.CLOSED, _S.FORKED}),
    _S.DRAINING_PUBS: frozenset({_S.CLOSED, _S.FORKED}),
    _S.FORKED: frozenset({_S.CONNECTING, _S.CLOSED, _S.FORKED}),
    _S.CLOSED: frozenset({_S.FORKED}),
}

#: States in which a publish may be written to the buffer.
WRITABLE = frozenset({_S.CONNECTED, _S.RECONNECTING, _S.DRAINING_SUBS, _S.CONNECTING})
#: States in which the connection is up (a socket is attached).
UP = frozenset({_S.CONNECTED, _S.DRAINING_SUBS, _S.DRAINING_PUBS})


class IllegalTransition(RuntimeError):
    """A move the state table does not allow: a bug in natsjs_sync, never the user's."""


class StateMachine:
    """The current :class:`ConnState`. Not locked: its owner moves it under its own lock.

    ``state`` may be read without the lock (a single attribute read).
    ``on_change``, when set, is called with the new state after every move
    (its owner mirrors the state where a hot path reads it).
    """

    __slots__ = ("on_change", "state")

    def __init__(self, state: ConnState = ConnState.CONNECTING):
        self.state = state
        self.on_change: Callable[[ConnState], None] | None = None

    def to(self, new: ConnState) -> None:
        """Move to ``new``. Raises IllegalTransition when the table forbids it."""
        if new is not self.state and new not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"connection cannot go from {self.state.value} to {new.value}")
        self.state = new
        if self.on_change is not None:
            self.on_change(new)

    def move(self, allowed_from: Iterable[ConnState], new: ConnState) -> bool:
        """Move to ``new`` if the current state is one of ``allowed_from``; True if it moved."""
        if self.state in allowed_from:
            self.to(new)
            return True
        return False


# --------------------------------------------------------------------- errors


def server_error(text: str) -> ServerError | AuthorizationError:
    """The exception a ``-ERR`` text means (during the handshake or after it)."""
    low = text.lower()
    if low.startswith("permissions violation"):
        # nats-py's text, which programs match on: its parser lower-cases the line.
        return PermissionsError(f"nats: {low}")
    if "authorization" in low or "authentication" in low or "expired" in low:
        return AuthorizationError(f"server refused the connection: {text}")
    return ServerError(text)


# --------------------------------------------------------------------- handshake


@dataclass(frozen=True)
class Established:
    """The handshake is done: the server's INFO and events that came after its PONG."""

    info: dict[str, Any]
    leftover: list[Any]


class Handshake:
    """The client side of the NATS handshake, fed parser events.

    Use::

        hs = Handshake()
        info = None
        while info is None:
            info = hs.receive(events_from_socket())        # the server's INFO
        send(hs.connect(connect_fields))                  # CONNECT + PING
        done = None
        while done is None:
            done = hs.receive(events_from_socket())       # ... until PONG
            send(hs.data_to_send())                       # PONGs to the server's PINGs

    Raises (from :meth:`receive`): ProtocolError for anything out of order,
    AuthorizationError / ServerError for a ``-ERR``.
    """

    def __init__(self) -> None:
        self._step = "info"
        self._info: dict[str, Any] = {}
        self._held: list[Any] = []
        self._out = bytearray()

    @property
    def info(self) -> dict[str, Any]:
        return self._info

    def receive(self, events: Iterable[Any]) -> dict[str, Any] | Established | None:
        """Take events; returns the INFO options once (step one), then
        :class:`Established` on the PONG, else None (need more events)."""
        pending = [*self._held, *events]
        self._held = []
        while pending:
            ev = pending.pop(0)
            if self._step == "info":
                if not isinstance(ev, Info):
                    raise ProtocolError(f"expected INFO from the server, got {ev!r}")
                self._info = dict(ev.options)
                self._step = "options"
                self._held = pending
                return self._info
            if self._step == "options":
                self._held.append(ev)  # the caller has not sent CONNECT yet
                continue
            if ev is PONG:
                self._step = "done"
                return Established(self._info, pending)
            if ev is OK:
                continue
            if ev is PING:
                self._out += commands.PONG
                continue
            if isinstance(ev, Info):
                self._info = {**self._info, **ev.options}
                continue
            if isinstance(ev, Err):
                raise server_error(ev.text)
            raise ProtocolError(f"unexpected {ev!r} during the handshake")
        return None

    def connect(self, fields: dict[str, Any]) -> bytes:
        """The CONNECT and PING to send after the INFO (and any TLS upgrade)."""
        if self._step != "options":
            raise ProtocolError("CONNECT is sent once, after the server's INFO")
        self._step = "pong"
        return commands.connect(fields) + commands.PING

    def resume(self) -> dict[str, Any] | Established | None:
        """Process events held back while CONNECT was being prepared."""
        return self.receive(())

    def data_to_send(self) -> bytes:
        """Bytes owed to the server (PONGs), once."""
        out, self._out = bytes(self._out), bytearray()
        return out


# --------------------------------------------------------------------- PING ledger


class PingLedger(Generic[W]):
    """PINGs in the order they go out, who waits for each PONG, and what a PONG vouches for.

    A PING is first *buffered* (in the write buffer, not yet on the wire), then
    *sent* when the buffer goes out. The server answers PINGs in order, so a
    PONG belongs to the oldest sent PING. Keep-alive PINGs have no waiter; when
    ``max_outstanding`` of them go unanswered the connection is stale. Not
    locked: the owner locks.

    A flush's PONG tells its caller that everything published before it reached
    the server. When a connection is lost with message bytes written since the
    last confirmation (they may never have arrived), that no longer holds for any flush
    asked for before the next flush's PONG: those on the wire fail at once (as
    every PING's waiter does, the connection being gone), the
    buffered ones too (their PINGs still go out, so the PONGs keep pairing),
    and one asked for after the loss fails when its PONG comes, as the first
    PONG on the new connection vouches only for what was sent there. A
    keep-alive's PONG ends nothing: it tells nobody of the loss, nor does
    the PONG of a PING asked for as a barrier only (``vouches=False``: the
    library's own flushes before it stops a subscription or a pull). nats.go fails the flushes pending at a
    disconnect; this also covers a flush asked for during the outage (or after
    it), after a publish that the outage swallowed.

    Only message bytes count: PINGs, PONGs and the SUB/UNSUB frames the owner
    reports with :meth:`control_out` (a reconnect restores subscriptions) are
    not messages, and a withdrawn frame (:meth:`not_sent`) never went out;
    a reply to a request confirms what went before the request as a PONG does
    (the owner passes the furthest such point to :meth:`lost`).

    Positions are write-stream offsets (bytes since the start, as the owner
    counts them): ``at`` is where a frame ends, ``taken`` how far the stream
    went to the socket.
    """

    __slots__ = ("_confirmed_to", "_control", "_entries", "_keepalives", "_lossy", "_unsent", "max_outstanding")

    #: Control frames remembered past the confirmed point, at most (older ones are forgotten:
    #: a loss then counts them as message bytes, which can only fail a flush, never pass one).
    CONTROL_REMEMBERED = 1024

    def __init__(self, max_outstanding: int = 2):
        #: [waiter, end offset, asked for after a lossy loss and before a flush's PONG, vouches]
        self._entries: deque[list[Any]] = deque()
        self._unsent = 0
        self._keepalives = 0
        self._confirmed_to = 0
        self._lossy = False
        self._control: deque[tuple[int, int]] = deque()  # (end offset, length) of control frames
        self.max_outstanding = max_outstanding

    def __len__(self) -> int:
        return len(self._entries)

    def ping(self, waiter: W | None = None, at: int = 0, vouches: bool = True,
             out: bytearray | None = None) -> bytes:
        """Record a PING appended to the write buffer, ending at stream offset ``at``; returns its bytes.

        ``vouches=False``: its waiter only needs the PONG as a barrier (what the server
        sent before it has arrived, an UNSUB took effect), not as word that messages
        arrived: a loss neither fails it nor is reported (and so used up) through it.

        ``out``: the write buffer, which this appends the PING to. From that append to the
        record no call returns, so an exception raised into the thread (a signal handler's,
        at the first bytecode after a call) leaves both or neither: a PING recorded without
        its bytes would take the PONG of the next, and every later flush would wait a PING
        too long."""
        vouches = vouches and waiter is not None
        entry = [waiter, at, self._lossy and vouches, vouches]
        if out is not None:
            out += commands.PING
        self._unsent += 1
        self._entries.append(entry)
        return commands.PING

    def keepalive(self, at: int = 0) -> bytes | None:
        """A keep-alive PING's bytes (ending at ``at``), or None when the connection is stale."""
        if self._keepalives >= self.max_outstanding:
            return None
        self._keepalives += 1
        return self.ping(None, at)

    def control_out(self, data: bytes, at: int) -> bytes:
        """Record control frames (a PONG answering the server, SUB, UNSUB) appended and
        ending at ``at``: no message is lost if only they are; returns ``data``."""
        self._control.append((at, len(data)))
        if len(self._control) > self.CONTROL_REMEMBERED:
            self._control.popleft()
        return data

    def not_sent(self, at: int, length: int) -> None:
        """Record that the ``length`` bytes ending at stream offset ``at`` were taken back
        out of the buffer (a withdrawn request): they keep their offsets, but no loss can
        have swallowed them."""
        self._control.append((at, length))
        if len(self._control) > self.CONTROL_REMEMBERED:
            self._control.popleft()

    def buffer_sent(self) -> None:
        """The write buffer (with every buffered PING) went to the socket."""
        self._unsent = 0

    def settle_taken(self, taken: int) -> None:
        """The write stream was taken for the socket up to offset ``taken``: a PING that
        ends there or before is not buffered any more, whether or not :meth:`buffer_sent`
        heard of it (an exception raised into a writing thread, a signal handler's, can
        come between the take and that call). The owner calls it as a loss is reported,
        before :meth:`lost`, which fails what went out and keeps what is still buffered."""
        entries = self._entries
        unsent = 0
        while unsent < self._unsent and entries[len(entries) - 1 - unsent][1] > taken:
            unsent += 1
        self._unsent = unsent

    def pong(self) -> tuple[W | None, bool]:
        """A PONG came: the waiter of the oldest sent PING (None for a keep-alive),
        and whether it vouches for what its caller published (False: a loss came first)."""
        self._keepalives = 0
        if len(self._entries) <= self._unsent:
            return None, True
        waiter, at, tainted, vouches = self._entries.popleft()
        self._confirmed_to = max(self._confirmed_to, at)
        if vouches:  # its caller was told of the loss (or asked before it): a keep-alive told nobody
            self._lossy = False
        while self._control and self._control[0][0] <= self._confirmed_to:
            self._control.popleft()
        return waiter, not tainted

    def lost(self, taken: int = 0, replied_to: int = 0) -> list[W]:
        """The connection broke after the stream went to the socket up to ``taken``
        (and replies confirmed it up to ``replied_to``): the waiters that will not be
        told their messages arrived (see the class)."""
        self._confirmed_to = max(self._confirmed_to, min(replied_to, taken))
        failed: list[W] = []
        control = 0
        for _ in range(len(self._entries) - self._unsent):
            waiter = self._entries.popleft()[0]
            control += len(commands.PING)
            if waiter is not None:
                failed.append(waiter)
        control += sum(n for at, n in self._control if self._confirmed_to < at <= taken)
        if taken - self._confirmed_to > control:
            self._lossy = True  # message bytes went out unconfirmed: maybe lost
            for entry in self._entries:
                if entry[0] is not None and entry[3]:
                    failed.append(entry[0])
                    entry[0] = None
        self._confirmed_to = max(self._confirmed_to, taken)
        # What is still buffered goes out on the next connection: its records still count there.
        while self._control and self._control[0][0] <= taken:
            self._control.popleft()
        if any(at <= taken for at, _ in self._control):  # a withdrawn frame's, recorded out of order
            self._control = deque(c for c in self._control if c[0] > taken)
        self._keepalives = 0
        return failed

    def clear(self) -> list[W]:
        """Closing or forking: every waiter, sent or not. The stream offsets start
        again from 0 (a forked child's writer counts its own stream), and nothing
        of the parent's was lost in the child."""
        waiters = [e[0] for e in self._entries if e[0] is not None]
        self._entries.clear()
        self._control.clear()
        self._confirmed_to = 0
        self._lossy = False
        self._unsent = 0
        self._keepalives = 0
        return waiters


# --------------------------------------------------------------------- replay


@dataclass(frozen=True)
class SubRecord:
    """What a new connection needs to know of a live subscription."""

    sid: int
    subject: str
    queue: str | None = None
    remaining: int | None = None  #: messages left before an auto-unsubscribe, if any


def replay_frames(subs: Iterable[SubRecord]) -> bytes:
    """SUB (and UNSUB with the remaining count) for every subscription, in order."""
    out = bytearray()
    for s in subs:
        out += commands.sub(s.subject.encode(), s.sid, s.queue.encode() if s.queue else None)
        if s.remaining is not None:
            out += commands.unsub(s.sid, s.remaining)
    return bytes(out)


# --------------------------------------------------------------------- limits


#: The server's default ``max_control_line``: a longer PUB/SUB line makes it
#: close the connection for every user of the client.
DEFAULT_MAX_CONTROL_LINE = 4096


def control_line_room(info: dict[str, Any]) -> int:
    """The longest protocol line the server accepts (its INFO may say; else 4096)."""
    value = info.get("max_control_line")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_CONTROL_LINE


EventSink = Callable[[Any], None]
