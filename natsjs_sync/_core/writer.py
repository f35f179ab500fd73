"""The write side of a connection: one buffer, one flusher thread, one send lock.

Publishes append to :attr:`Writer.buffer` and ask for a flush; the flusher
thread sends whatever gathered, so a loop of small publishes becomes a few
large writes. While connected a publish appends without the connection lock
(:meth:`Writer.append_connected`), which was a third of its cost: the buffer
is one bytearray that is never replaced while others may append to it, an
append (``+=``) and a take (copy, then delete that many bytes from the front)
are each one C call that the GIL makes atomic, so nothing is lost or
reordered; the flush flag is cleared before the buffer is looked at again
(see :meth:`Writer.send_held`), so no append is left without a flush.

Calls that wait for an answer (request, flush, respond) send from their own
thread instead, so a lone request pays no thread hop; when another thread is
sending at that moment they leave their bytes to it
(:meth:`Writer.claim_locked`), so many threads requesting at once share writes. The send lock keeps the wire in buffer
order; the transport's write deadline means a peer that stops reading costs
the writer at most ``write_timeout`` before the connection is declared lost.

Who waits how long for the socket: only the flusher (and the reconnect
thread's first send) and a back-pressured publisher wait up to
``write_timeout``. A call with a deadline of its own (request, flush, drain)
writes what the socket takes before that deadline; the transport keeps the
rest, in order, and the flusher sends it. The reader and timer threads never
wait for the socket at all (:meth:`Writer.back_pressure`): a reply they
publish past the threshold is left to the flusher. A caller whose own bytes
were in a write that failed hears of it (:meth:`Writer.send_held` raises):
stream offsets (``taken``, ``sent_to``, ``lost_from``/``lost_to``) tell whose bytes went
out, or were lost, in whichever thread's write.

A request whose deadline passes while its frame is still in the buffer (the
connection is away, or the frame waits behind a stalled write) takes it back
(:meth:`Writer.withdraw_locked`): nothing of it was handed to the socket, so
nothing was sent. Bytes already taken from the buffer (in a write, or kept by
the transport after a write's deadline) are never withdrawn: the frame may be
half on the wire. Stream offsets count every appended byte, withdrawn or not;
the rare shifts of buffer positions (a withdrawn frame, the subscriptions a
reconnect puts in front) are settled at the next take, so an append or a take
costs nothing more.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from .._timeout import Deadline
from ..errors import NatsConnectionError, NatsError
from ..protocol._compiled import speedups
from ..protocol.subjects import PUB_SUBJECTS
from .outlet import Outlet
from .reader import _threads_are_native

if TYPE_CHECKING:
    from collections.abc import Callable

    from .connection import Connection
    from .requests import Waiter
    from .transport import Transport

#: Appends without the connection lock rely on the GIL (see the module
#: docstring); a free-threaded interpreter takes the lock for every append.
APPEND_WITHOUT_LOCK: bool = getattr(sys, "_is_gil_enabled", lambda: True)()

#: Past this many buffered bytes a publisher sends the buffer itself: the
#: back-pressure that keeps a fast publisher from growing it without end.
FLUSH_THRESHOLD = 1024 * 1024


def flush_threshold(pending_size: int) -> int:
    """The buffered bytes past which a publisher sends the buffer itself:
    :data:`FLUSH_THRESHOLD`, or ``pending_size`` when that is smaller (nats-py
    flushes before a publish returns once ``pending_size`` is passed; ``0``
    turns that off there, and leaves the default here)."""
    return min(FLUSH_THRESHOLD, pending_size) if pending_size > 0 else FLUSH_THRESHOLD

#: Writes a sender makes for others' bytes (buffered while it wrote) before it
#: leaves the rest to the flusher: a lone request is not held up for long.
_SEND_ROUNDS = 4


class SendLock:
    """A lock that knows its holder (Python twin of ``_speedups.SendLock``): the
    send lock of a connection. Thread-safe.

    ``acquire`` records the calling thread in the very call that takes the lock
    (threading's ``RLock`` does), and ``release`` lets go only for that thread,
    raising ``RuntimeError`` for any other. A signal handler's exception (Ctrl-C,
    a SIGALRM timeout) is raised at the first bytecode after a call returns:
    with a plain lock it can come between the acquire and the ``try`` whose
    handler lets go, and then nobody knows the lock is held; a handler that lets
    go "if the lock is locked" may let go of another thread's. Here a handler
    just calls ``release()``: one call, no moment between a check and the release.

    Not reentrant: its holder's ``acquire`` returns False at once (a signal
    handler that publishes on the thread it interrupted mid-write must neither
    write into the middle of that write nor wait for itself).
    """

    __slots__ = ("_is_owned", "_rlock", "release")

    def __init__(self) -> None:
        rlock = threading.RLock()
        self._rlock = rlock
        # RLock's own: Condition relies on it for every lock; C in CPython's RLock.
        self._is_owned = rlock._is_owned  # type: ignore[attr-defined]
        self.release = rlock.release

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._is_owned():
            return False
        return bool(self._rlock.acquire(blocking, timeout))

    def locked(self) -> bool:
        """Whether any thread holds the lock."""
        if self._is_owned():
            return True
        try:
            return not self._rlock.acquire(False)
        finally:
            try:
                self.release()  # taken just now: let go (nothing if another thread holds it)
            except RuntimeError:
                pass

    def mine(self) -> bool:
        """Whether the calling thread holds the lock."""
        return bool(self._is_owned())


def new_send_lock() -> SendLock:
    """The compiled :class:`SendLock` where the extension is in use and threads are
    the operating system's (its wait would block every green thread of a gevent or
    eventlet program), else the Python twin (on the patched ``RLock`` there)."""
    if speedups is not None and _threads_are_native():
        compiled: SendLock = speedups.SendLock()  # the same methods
        return compiled
    return SendLock()


class Writer:
    """Buffer and flusher of one :class:`~natsjs_sync._core.connection.Connection`.

    ``buffer`` is appended to under the connection's lock (``lock``), or
    without it while connected (:meth:`append_connected`, :attr:`outlet`); it
    is taken from and the flush flag (``outlet.flush_requested``) is changed
    under the lock only. The buffer object is replaced only in a forked child.
    """

    def __init__(self, conn: Connection):
        self._conn = conn
        self.lock = conn.lock
        self.cond = threading.Condition(conn.lock)
        #: Owner-aware (see :class:`SendLock`): every handler lets go with one
        #: ``release()``, which fails (RuntimeError) unless this thread holds it.
        self.send_lock = new_send_lock()
        self.buffer = bytearray()
        #: A plain publish in one call (see :mod:`.outlet`); it also holds the
        #: flush flag and the publish counters.
        self.outlet = Outlet(self.buffer, PUB_SUBJECTS, flush_threshold(conn.options.pending_size),
                             self.wake_unlocked, self.back_pressure)
        self._thread: threading.Thread | None = None
        #: Stream offsets (bytes since the start): taken from the buffer (lock
        #: held), handed to the socket, and the range lost with the last failed
        #: write (send lock held): what it carried and what earlier writes left.
        self.taken = 0
        self.sent_to = 0
        self.lost_from = self.lost_to = 0
        self._lost: NatsError | None = None
        #: The transport that holds bytes a deadline-bounded write left unsent.
        self._behind: Transport | None = None
        #: The transport a write found lost, until its reader thread reports it (see :meth:`_lose`).
        self._broken: Transport | None = None
        #: Since the last take: bytes put in front of the buffer (a reconnect's
        #: subscriptions, outside the offsets) and the frames withdrawn from it
        #: (offset, length), which shift where later offsets sit in the buffer.
        self._front = 0
        self._holes: list[tuple[int, int]] = []
        #: A waiting caller's write past an idle writer, in one compiled call (see send_direct).
        self._sender: Callable[[bytes, int, Waiter | None], int] | None = self._new_sender()

    def _new_sender(self) -> Callable[[bytes, int, Waiter | None], int] | None:
        """The compiled ``Sender`` over this writer's lock, send lock, buffer and outlet, or
        None (no extension, green threads, no GIL): :meth:`send_direct` then does nothing."""
        if (speedups is None or not APPEND_WITHOUT_LOCK or not isinstance(self.send_lock, speedups.SendLock)
                or not isinstance(self.outlet, speedups.Outlet)):
            return None
        sender: Callable[[bytes, int, Waiter | None], int] = speedups.Sender(
            self, self._conn, self.lock, self.send_lock, self.buffer, self.outlet)
        return sender

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"natsjs-flusher-{self._conn.tag}", daemon=True)
            self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def wake(self) -> None:
        """Lock held: make sure the flusher will send the buffer soon."""
        outlet = self.outlet
        if not outlet.flush_requested:
            outlet.flush_requested = 1
            self.cond.notify()

    def wake_unlocked(self) -> None:
        """Lock not held: :meth:`wake`."""
        with self.lock:
            self.wake()

    def append_connected(self, frame: bytes) -> None:
        """Connected, lock not held: buffer ``frame`` and see that it is sent.

        :attr:`outlet` takes the same steps for a plain publish (its hot path).
        """
        buffer = self.buffer
        buffer += frame
        if len(buffer) > self.outlet.threshold:
            self.back_pressure()
        elif not self.outlet.flush_requested:
            with self.lock:
                self.wake()

    def back_pressure(self) -> None:
        """More than the threshold (:func:`flush_threshold`) buffered: this publisher sends the
        buffer itself, waiting up to ``write_timeout`` for the socket, so a fast
        publisher cannot grow the buffer without end.

        The reader and timer threads must never wait for the socket (the reader
        would stop delivering, the timer stop expiring): what they publish past
        the threshold (stall and flow-control replies, ack retries) is left to
        the flusher.
        """
        if self._conn.may_wait_for_socket():
            self.send_now()
        else:
            self.wake_unlocked()

    def mark_locked(self) -> int:
        """Lock held, just after buffering: the stream offset past this caller's
        bytes (for :meth:`send_held`'s ``mine``, and :meth:`withdraw_locked`)."""
        if self._front or self._holes:
            return self.taken + len(self.buffer) - self._front + sum(n for _, n in self._holes)
        return self.taken + len(self.buffer)

    def end_of_locked(self, frame: bytes, at: int) -> int:
        """Lock held, ``frame`` just buffered at position ``at`` or later: the stream
        offset past it, exactly (what :meth:`withdraw_locked` needs).

        While connected, plain publishes append without the lock: one may come
        between reading ``at`` and this frame's append, or after it, before this
        is called, and :meth:`mark_locked` would then point past the frame. A
        request's frame holds its own reply subject, so the first copy from
        ``at`` on is this one.
        """
        buffer = self.buffer
        if not buffer.startswith(frame, at):
            found = buffer.find(frame, at)
            at = found if found >= 0 else len(buffer) - len(frame)
        # Every withdrawn frame (a hole) was buffered before this one; what was put in
        # front holds no offsets.
        if self._front or self._holes:
            return self.taken - self._front + sum(n for _, n in self._holes) + at + len(frame)
        return self.taken + at + len(frame)

    def prepend_locked(self, data: bytes) -> None:
        """Lock held: put ``data`` in front of everything buffered (a reconnect's
        subscriptions). It takes no stream offsets: those of the buffered frames stay."""
        self.buffer[0:0] = data  # in place: the buffer object is never replaced
        self._front += len(data)

    def withdraw_locked(self, frame: bytes, end: int) -> bool:
        """Lock held: take ``frame`` (buffered with ``end`` from :meth:`mark_locked`)
        back out of the buffer, if none of it was taken for a write yet.

        Returns:
            True when it was withdrawn (none of it will ever be sent); False when it
            was taken for a write already (sent, being sent, or lost with a connection).
        """
        start = end - len(frame)
        if start < self.taken:
            return False
        pos = start - self.taken + self._front - sum(n for at, n in self._holes if at < start)
        if self.buffer[pos:pos + len(frame)] != frame:
            return False  # not where the offsets say: never cut what may be another frame
        del self.buffer[pos:pos + len(frame)]
        self._holes.append((start, len(frame)))
        return True

    def _take_locked(self) -> bytes:
        """Lock held: take everything buffered for a write; ``taken`` moves past it.

        Everything is worked out first; from the bytes' removal to the last
        record of it no call returns, so an exception raised into the thread (a
        signal handler's, at the first bytecode after a call) comes before the
        take or after all of it: ``taken`` always matches what left the buffer.
        """
        buffer = self.buffer
        data = bytes(buffer)  # what others append meanwhile (without the lock) stays
        size = len(data)
        taken = self.taken + size
        front = self._front
        holes = self._holes
        if front or holes:
            # What was put in front holds no offsets; what was withdrawn keeps its own.
            taken += sum(n for _, n in holes) - front
        del buffer[:size]
        self.taken = taken
        if front or holes:
            self._front = 0
            holes.clear()
        return data

    def send_now(self, deadline: Deadline | None = None, mine: int = 0) -> bool:
        """Send the whole buffer from this thread (nothing happens without a transport).

        With a ``deadline``, a caller that cannot get the send lock in time
        (another thread's write is stalled) leaves its bytes in the buffer for
        that writer and returns: it then waits for its answer within the same
        deadline instead of waiting behind the stall.

        Returns:
            See :meth:`send_held`; False too when the send lock was not had in time.

        Raises:
            NatsError: bytes up to ``mine`` were lost in a failed write (see :meth:`send_held`).
        """
        left = None if deadline is None else deadline.remaining()
        send_lock = self.send_lock
        if send_lock.mine():
            # Held further up this thread's stack (a signal handler's publish that interrupted a
            # write): that write sends these bytes before it lets go, or leaves them to the
            # flusher; the handler below must not let go of its hold.
            return False
        try:
            if not send_lock.acquire(True, -1 if left is None else left):
                with self.lock:
                    self.wake()  # the flusher sends it once the stalled write ends
                return False
            return self.send_held(deadline, mine)
        except BaseException:
            # Raised into this thread (a signal handler's exception) as the acquire returned,
            # or as send_held was entered, before its own handler took over.
            try:
                send_lock.release()  # this thread's only (see SendLock)
            except RuntimeError:
                pass  # not held here: never taken, or let go already
            else:
                self.wake_unlocked()  # bytes others left to this thread go out with the flusher
            raise

    def send_direct(self, frame: bytes, size: int, waiter: Waiter | None, deadline: Deadline | None) -> bool:
        """A caller that waits for an answer (a request, a responder's reply) sends ``frame``
        from its own thread past an idle writer: nothing buffered, nobody sending, a plain
        socket (:attr:`TcpTransport.direct <natsjs_sync._core.transport.TcpTransport.direct>`).
        The compiled sender takes the frame as the stream's next bytes and sends it in one
        call, which skips the buffer, the send lock's rounds and their Python steps (a third
        of a lone request's own time, and as much of a responder's reply).

        The offsets, counters and the request's ``waiter.end`` come out as if the frame had
        been buffered and taken by :meth:`send_held`. Bytes others buffered during the send
        go out from here, as the send lock's holder would send them (:meth:`send_held`),
        and so does the rest of a frame the socket took only in part (it is the transport's
        backlog, written first, within ``deadline``; on a thread that may not wait for the
        socket the flusher sends it). Without the compiled extension nothing is done.

        Returns:
            True when the frame went this way; False when the writer was not idle (nothing
            was done: :meth:`Connection.append <natsjs_sync._core.connection.Connection.append>`
            buffers it).

        Raises:
            NatsError: the write that carried the rest of the frame failed (see :meth:`send_held`).
        """
        sender = self._sender
        if sender is None:
            return False
        send_lock = self.send_lock
        try:
            status = sender(frame, size, waiter)
            if status < 2:
                return status == 1
            # Held here still: others' bytes buffered meanwhile (2), or the frame's rest (3).
            if deadline is None and not self._conn.may_wait_for_socket():
                with self.lock:
                    # The flusher asked first, as send_held does: an exception raised as the
                    # release returns would leave the rest with nobody to send it.
                    self.wake()
                    send_lock.release()  # under the lock, as send_held lets go
                return True
            # While this thread holds the send lock, nobody takes: ``taken`` ends at the frame.
            self.send_held(deadline, 0 if status == 2 else self.taken)
            return True
        except BaseException:
            # A signal handler's exception as the sender returned (it holds the lock for 2 and
            # 3), or send_held's own: this thread's hold only (see SendLock).
            try:
                send_lock.release()
            except RuntimeError:
                pass
            else:
                self.wake_unlocked()  # what is left goes out with the flusher
            raise

    def claim_locked(self) -> bool:
        """Lock held, bytes just buffered: True when this thread is to send them
        (it then calls :meth:`send_held` without the lock).

        False means another thread holds the send lock; it sends these bytes
        too before it lets go (:meth:`send_held` re-checks the buffer under the
        lock), so requests made by many threads at once share writes instead of
        queueing on the send lock for a write each.

        False too while the socket is backed up (a write left bytes with the
        transport): the flusher is pushing them and sends these after them. A
        caller's deadline-bounded write would only move the buffer behind them,
        where a request whose deadline passes can no longer be withdrawn.

        From this call on until :meth:`send_held` is entered, a caller covers
        itself with a handler that lets go (``send_lock.release()``, which
        fails unless this thread holds it): an exception raised into the thread
        meanwhile (a signal handler's) would leave the lock held for good.
        """
        if self._behind is not None and self._behind is self._conn.transport:
            self.wake()
            return False
        return self.send_lock.acquire(False)

    def _round_locked(self, rounds: int, deadline: Deadline | None, mine: int) -> Transport | None:
        """Lock held: the transport the next round of :meth:`send_held` writes to, or
        ``None`` when its rounds end (no connection, nothing to send, the rounds or the
        deadline spent, the caller's bytes settled); the flusher then takes what is left."""
        transport = self._conn.transport
        if transport is not None and transport is self._broken:
            # Lost, and its reader thread not yet told: nothing more to it. Lost
            # again (the abort is one more system call): the abort that wakes that
            # thread may itself have been cut short, by another exception raised into
            # the thread whose write was (a second signal); else only the keep-alive
            # would find the connection stale, minutes later.
            self._lose(transport, NatsConnectionError(
                f"connection to {self._conn.addr} lost: a write was cut short"))
            transport = None
        buffer = self.buffer
        behind = transport is not None and self._behind is transport
        if (transport is None or not (buffer or behind) or rounds == _SEND_ROUNDS
                or (rounds and deadline is not None and deadline.expired())
                or (not rounds and mine and self._settled(mine))):
            self.outlet.flush_requested = 0
            # Looked at again after the flag is down: bytes appended
            # without the lock before this are seen here, and an
            # append after it finds the flag down and wakes the flusher.
            if (buffer or behind) and transport is not None:
                self.wake()
            return None
        return transport

    def send_held(self, deadline: Deadline | None = None, mine: int = 0) -> bool:
        """Send lock held (this releases it): send the buffer, then what others
        added meanwhile, for a few rounds; what is left then is the flusher's.

        Args:
            deadline: the caller's own: each write sends what the socket takes
                before it and the transport keeps the rest for the flusher.
                ``None`` waits up to ``write_timeout`` (the flusher, back-pressure).
            mine: the stream offset past the caller's own bytes
                (:meth:`mark_locked`); 0 when it has none to account for.

        Returns:
            True when the bytes up to ``mine`` are written (always, when
            ``mine`` is 0); False when some are still buffered or kept by the
            transport (deadline passed, or reconnecting).

        Raises:
            NatsError: the write that carried bytes up to ``mine`` failed (this
                or an earlier holder's): they are lost with the connection,
                which is being replaced.
        """
        conn = self._conn
        lock = self.lock
        send_lock = self.send_lock
        rounds = 0
        #: Set from before a take to after its write: bytes may be half on the wire meanwhile.
        cut: Transport | None = None
        data = b""
        try:
            while True:
                with lock:
                    transport = self._round_locked(rounds, deadline, mine)
                    if transport is None:
                        # Released under the lock: a thread that buffered bytes
                        # and found the send lock taken is sure we saw them.
                        send_lock.release()
                        break
                    self.outlet.flush_requested = 0
                    cut = transport
                    data = b""  # this round's bytes (below), never an earlier round's
                    data = self._take_locked()
                    end = self.taken
                    conn.ledger.buffer_sent()
                rounds += 1
                try:
                    if transport.write(data, deadline):
                        self.sent_to = end
                        self._behind = None
                    else:
                        self._behind = transport  # the deadline passed: the loop ends, the flusher goes on
                except NatsError as exc:
                    self.lost_from, self.lost_to, self._lost = self.sent_to, end, exc
                    self._lose(transport, exc)
                cut = None
        except BaseException as exc:
            # A write's failure is handled above: this is an exception raised into the thread
            # (a signal handler's), at any point, perhaps after the release above (when
            # another thread may hold the lock already). Only this thread's hold is let go.
            try:
                if cut is not None:
                    # Marked first, with no call before it: should another exception be raised
                    # into the thread below, no later write goes on with the cut stream, and the
                    # next one cuts the connection (see above).
                    broken, self._broken = self._broken, cut
                    if data and getattr(cut, "written", None) is data:
                        # The write was done (the transport records it as the bytes leave, in
                        # the call that sends them): only its records were missed. A signal that
                        # came during the send syscall lands here, as the call returns.
                        self._broken = broken
                        self.sent_to = end
                        self._behind = None
                    else:
                        self._cut_short(cut, exc)
            finally:
                try:
                    send_lock.release()
                except RuntimeError:
                    pass
                else:
                    self.wake_unlocked()  # what is left, others' bytes too, goes out with the flusher
            raise
        lost = self._lost
        if self.lost_from < mine <= self.lost_to and lost is not None:
            # Looked at first: writes after a reconnect move sent_to past these lost bytes.
            # A new exception: the one reported to error_cb may be raised in other threads too.
            raise lost.__class__(f"{lost} (this call's bytes were lost with the connection)") from lost
        return mine <= self.sent_to

    def _cut_short(self, transport: Transport, exc: BaseException) -> None:
        """Send lock held: an exception raised into this thread (a signal handler's) came
        between a take and the end of its write. What was taken may be partly on the wire,
        or not at all: the stream is broken, and the connection lost as for a failed write.

        What is still buffered (others' publishes, requests and PINGs appended since the
        take) stays, and goes out on the next connection, as after a failed write. The
        exception may have come between the take and the PING ledger's record of it
        (``buffer_sent``): the loss settles the ledger by the stream offsets
        (``PingLedger.settle_taken``), so no PING taken here is counted as still to go out.
        """
        conn = self._conn
        lost = NatsConnectionError(f"connection to {conn.addr} lost: a write was cut short by {type(exc).__name__}")
        with self.lock:
            self.lost_from, self.lost_to, self._lost = self.sent_to, self.taken, lost
        self._lose(transport, lost)

    def _lose(self, transport: Transport, exc: NatsError) -> None:
        """Send lock held: the connection over ``transport`` is lost (a write failed, or
        was cut short). Nothing more is written to it; its reader thread reports the loss
        (``ReadSession.failure``) once the cut socket wakes it, as it reports a read's end.
        The many steps of a reconnect's start never run on a writing thread: an exception
        raised into it (a signal handler's, on the main thread) could stop them halfway
        and leave the client reconnecting with no thread to do it.
        """
        self._broken = transport
        self._behind = None
        session = self._conn.read_session
        if session is not None and session.transport is transport and session.failure is None:
            session.failure = exc
        transport.abort()

    def _settled(self, mine: int) -> bool:
        """Bytes up to ``mine`` were written, or lost, by an earlier holder of the
        send lock: a publish_now that waited for it has nothing left to send."""
        return mine <= self.sent_to or self.lost_from < mine <= self.lost_to

    def final_flush(self, transport: Transport, timeout: float) -> None:
        """Closing: send what is buffered if the socket takes it within ``timeout`` (best effort)."""
        send_lock = self.send_lock
        if send_lock.mine():
            # Held further up this thread's stack: a close in a signal handler that interrupted a
            # write. That write lets go (the handler below would let go of its hold) and its
            # bytes go with the connection: nothing is written into the middle of it.
            return
        try:
            if not send_lock.acquire(True, timeout):
                return  # a writer is stuck on a peer that does not read: do not join it
            with self.lock:
                data = self._take_locked()
            if data or self._behind is transport:
                transport.write(data, Deadline(timeout))
        except NatsError:
            pass
        finally:
            # Whether this thread holds it, the lock knows (an exception raised into the
            # thread as the acquire returned leaves no other trace).
            try:
                send_lock.release()
            except RuntimeError:
                pass

    def _loop(self) -> None:
        conn = self._conn
        cond = self.cond
        while True:
            with cond:
                while not self.outlet.flush_requested and not conn.is_closed:
                    cond.wait()
                if conn.is_closed or not conn.owns_process:
                    return
            self.send_now()

    def reset_after_fork(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.cond = threading.Condition(lock)
        self.send_lock = new_send_lock()
        self.buffer = self.outlet.buffer = bytearray()
        self.outlet.flush_requested = 0
        self._thread = None
        self.taken = self.sent_to = self.lost_from = self.lost_to = self._front = 0
        self._holes = []
        self._lost = self._behind = self._broken = None
        self._sender = self._new_sender()
