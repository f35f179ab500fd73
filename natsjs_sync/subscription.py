"""Subscriptions: a bounded queue per subscription, read by an iterator or a callback."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ._timeout import USE_DEFAULT, TimeoutArg, resolve
from .errors import BadSubscriptionError, ConnectionClosedError, SlowConsumerError, TimeoutError
from .msg import Msg

if TYPE_CHECKING:
    from .client import Client

MsgHandler = Callable[[Msg], None]

DEFAULT_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_PENDING_BYTES_LIMIT = 128 * 1024 * 1024

# Placed in a subscription's queue to wake readers when it ends.
_END = object()
_WAKE = object()  # wakes one next_msg() waiter with a TimeoutError (internal use)



class Control:
    """An action queued among a subscription's messages, run by the reader of
    the queue when it gets there (e.g. a flow-control reply sent once the
    messages before it were handed to the user)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn

    def run(self) -> None:
        try:
            self.fn()
        except Exception:
            pass  # a failed control reply must not break reading


_OPEN, _DRAINING, _DRAINED, _UNSUBSCRIBED, _CLOSED = range(5)


class Subscription:
    """An interest in a subject. Thread-safe.

    Messages wait in a bounded queue. Read them with :meth:`next_msg` or by
    iterating; or pass ``cb=`` to :meth:`Client.subscribe` and a thread of the
    subscription's own calls it for each message in order. The client's reader
    thread only ever enqueues: when the queue is over its pending limits the
    message is dropped for this subscription, counted in :attr:`dropped`, and a
    :class:`SlowConsumerError` is reported once to the client's ``error_cb``.
    """

    def __init__(
        self,
        client: Client,
        sid: int,
        subject: str,
        queue_group: str | None = None,
        cb: MsgHandler | None = None,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    ):
        self._client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue_group
        self._cb = cb
        self._q: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._pending_msgs_limit = pending_msgs_limit
        self._pending_bytes_limit = pending_bytes_limit
        # Written by the reader thread only.
        self._received = 0
        self._bytes_in = 0
        self._dropped = 0
        self._slow_reported = False
        # Written by the consuming side only (bytes_in - bytes_out = pending bytes).
        self._bytes_out = 0
        self._max: int | None = None
        self._forked = False
        self._state = _OPEN
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if cb is not None:
            self._thread = threading.Thread(
                target=self._dispatch_loop,
                name=f"natsjs-sub{sid}-{client.name or 'client'}",
                daemon=True,
            )
            self._thread.start()

    # ---------------------------------------------------------------- reader side

    def _deliver(self, msg: Msg) -> None:
        """Called on the reader thread: enqueue or drop. Never blocks, never runs user code."""
        if self._state >= _DRAINED:
            return
        self._received += 1
        size = len(msg.data)
        q = self._q
        if (
            q.qsize() >= self._pending_msgs_limit
            or self._bytes_in - self._bytes_out + size > self._pending_bytes_limit
        ):
            self._dropped += 1
            if not self._slow_reported:
                self._slow_reported = True
                self._client._report_error(
                    SlowConsumerError(
                        f"slow consumer on subject {self.subject!r} (sid {self.sid}): dropping messages",
                        subject=self.subject,
                        sid=self.sid,
                        dropped=self._dropped,
                    )
                )
        else:
            self._bytes_in += size
            q.put(msg)
        if self._max is not None and self._received >= self._max:
            self._client._remove_sub(self)
            self._finish(_DRAINED)

    def _finish(self, state: int) -> None:
        """End the subscription: readers see ``state`` once the queue is read (drain) or at once."""
        if self._state in (_DRAINED, _UNSUBSCRIBED, _CLOSED):
            return
        self._state = state
        self._q.put(_END)
        if self._thread is None:
            self._done.set()

    def _disown_after_fork(self) -> None:
        """In a forked child: this subscription belongs to the parent. Its queue
        and thread are not ours (a parent thread may have held the queue's lock),
        so both are replaced and every read ends at once."""
        self._q = queue.SimpleQueue()
        self._q.put(_END)
        self._state = _UNSUBSCRIBED
        self._forked = True
        self._thread = None
        self._done = threading.Event()
        self._done.set()

    # ---------------------------------------------------------------- user side

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed to the user."""
        return max(0, self._q.qsize() - (1 if self._state >= _DRAINED else 0))

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet handed to the user."""
        return max(0, self._bytes_in - self._bytes_out)

    @property
    def delivered(self) -> int:
        """Messages received from the server (dropped ones included)."""
        return self._received

    @property
    def dropped(self) -> int:
        """Messages dropped because the pending limits were reached."""
        return self._dropped

    @property
    def is_valid(self) -> bool:
        """False once the subscription is unsubscribed, drained or closed."""
        return self._state in (_OPEN, _DRAINING)

    def set_pending_limits(self, msgs: int, bytes_: int) -> None:
        """Change the pending limits (messages, bytes); ``-1`` or ``0`` means no limit."""
        self._pending_msgs_limit = msgs if msgs > 0 else 1 << 62
        self._pending_bytes_limit = bytes_ if bytes_ > 0 else 1 << 62

    def next_msg(self, timeout: TimeoutArg = 1.0) -> Msg:
        """Wait for the next message.

        Args:
            timeout: seconds to wait; ``None`` waits for ever.

        Raises:
            TimeoutError: no message in time.
            BadSubscriptionError: the subscription ended (unsubscribed or drained and empty).
            ConnectionClosedError: the client closed.
        """
        if self._cb is not None:
            raise BadSubscriptionError("next_msg() cannot be used on a subscription with a callback")
        t = resolve(timeout, 1.0)
        if self._state == _UNSUBSCRIBED:
            if self._forked:
                raise BadSubscriptionError(
                    f"subscription to {self.subject!r} was made in the parent process before fork(); "
                    "subscribe again in this process"
                )
            raise BadSubscriptionError(f"subscription to {self.subject!r} is unsubscribed")
        try:
            msg = self._unwrap(self._q.get(timeout=t))
            while msg is None:
                msg = self._unwrap(self._q.get(timeout=t))  # rare (flow control): a fresh wait is fine
        except queue.Empty:
            raise TimeoutError(f"no message on {self.subject!r} within {t} s") from None
        return msg

    def _unwrap(self, item: object) -> Msg | None:
        """A queue item -> the message, or None after running a control item."""
        if item is _END:
            self._q.put(_END)  # every other waiting reader must wake too
            if self._state == _CLOSED:
                raise ConnectionClosedError("the connection is closed")
            raise BadSubscriptionError(f"subscription to {self.subject!r} has ended")
        if item is _WAKE:
            raise TimeoutError(f"woken while waiting on {self.subject!r}")
        if type(item) is Control:
            item.run()
            return None
        msg: Msg = item  # type: ignore[assignment]
        self._bytes_out += len(msg.data)
        return msg

    def _poll(self) -> Msg | None:
        """A message already queued, else None at once (for iterators built on this)."""
        try:
            item = self._q.get_nowait()
        except queue.Empty:
            return None
        return self._unwrap(item)

    def _wake(self) -> None:
        """Make one waiting (or the next) ``next_msg`` raise TimeoutError after the
        messages already queued: lets an iterator built on this see a state change."""
        self._q.put(_WAKE)

    def __iter__(self) -> Iterator[Msg]:
        """Yield messages until the subscription ends (no timeout)."""
        while True:
            try:
                yield self.next_msg(timeout=None)
            except (BadSubscriptionError, ConnectionClosedError):
                return

    @property
    def messages(self) -> Iterator[Msg]:
        """The same as iterating the subscription (nats-py's ``sub.messages``)."""
        return iter(self)

    def unsubscribe(self, limit: int | None = None) -> None:
        """Stop receiving.

        Args:
            limit: when given, stop after that many messages in all (the server
                is told, so nothing more is sent), else stop now and discard the queue.
        """
        self._client._unsubscribe(self, limit)

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stop interest, then let queued messages be read or handled before ending.

        Blocks until the callback has handled everything queued (callback
        subscriptions) or until the queue is read to the end (iterators), or
        for ``timeout`` (default: the client's drain timeout).

        Raises:
            TimeoutError: not drained in time.
        """
        self._client._drain_sub(self, resolve(timeout, self._client._options.drain_timeout))

    def _wait_done(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    # ---------------------------------------------------------------- callback thread

    def _dispatch_loop(self) -> None:
        cb = self._cb
        assert cb is not None
        get = self._q.get
        try:
            while True:
                item = get()
                if item is _END:
                    return
                if self._state == _UNSUBSCRIBED or self._state == _CLOSED:
                    return
                if type(item) is Control:
                    item.run()
                    continue
                msg: Msg = item  # type: ignore[assignment]
                self._bytes_out += len(msg.data)
                try:
                    cb(msg)
                except Exception as exc:  # a user's bug must not kill the subscription
                    self._client._report_error(exc)
        finally:
            self._done.set()

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription sid={self.sid} subject={self.subject!r}{q}>"


class InternalSubscription(Subscription):
    """A library-owned inbox (pull requests, fetches): no pending limits to
    check and no max, so delivery is a count and a put."""

    def _deliver(self, msg: Msg) -> None:
        if self._state >= _DRAINED:
            return
        self._received += 1
        self._bytes_in += len(msg.data)
        self._q.put(msg)
