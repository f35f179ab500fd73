"""Pull consumption: one-shot fetches and continuous pulling.

A pull request (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) asks for up
to ``batch`` messages or ``max_bytes`` bytes, delivered to an inbox, until it
``expires``. Status messages on that inbox are bookkeeping, never shown to the
user: 100 idle heartbeat, 404 no messages, 408 request expired, 409 (limits
hit, consumer deleted, leadership changed), 423 (pinned elsewhere). 408 and
409 carry ``Nats-Pending-Messages``/``Nats-Pending-Bytes``: what the request
will no longer deliver.

The server's ``expires`` is set a little shorter than the client's wait, so
the request is over on the server before the client stops listening: a fetch
that times out leaves no pull request behind.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from .._timeout import Deadline
from ..errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    JetStreamError,
    NatsError,
    TimeoutError,
)
from ..msg import Msg

if TYPE_CHECKING:
    from ..subscription import Subscription
    from .consumer import Consumer

_NS = 1_000_000_000
_encode = msgspec.json.encode

ErrorHandler = Callable[[Exception], None]


def server_expiry(wait: float) -> float:
    """The ``expires`` to send for a client wait of ``wait`` seconds."""
    return max(0.001, wait - min(0.5, wait * 0.1))


def pull_request(
    batch: int,
    expires: float | None = None,
    no_wait: bool = False,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    group: str | None = None,
    min_pending: int | None = None,
    min_ack_pending: int | None = None,
    priority: int | None = None,
    pin_id: str | None = None,
) -> bytes:
    body: dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = int(expires * _NS)
    if no_wait:
        body["no_wait"] = True
    if max_bytes:
        body["max_bytes"] = max_bytes
    if heartbeat:
        body["idle_heartbeat"] = int(heartbeat * _NS)
    if group is not None:
        body["group"] = group
    if min_pending is not None:
        body["min_pending"] = min_pending
    if min_ack_pending is not None:
        body["min_ack_pending"] = min_ack_pending
    if priority is not None:
        body["priority"] = priority
    if pin_id:
        body["id"] = pin_id
    return _encode(body)


def _status_error(msg: Msg) -> JetStreamError | None:
    """The error a terminal 409/423/4xx status means, or None when it only ends a request."""
    status = msg.status
    desc = msg.description
    if status == 409:
        low = desc.lower()
        if "consumer deleted" in low:
            return ConsumerDeletedError(desc, code=409)
        if "exceeds maxbytes" in low or "batch completed" in low or "leadership change" in low:
            return None
        return JetStreamError(desc or "pull request failed", code=409)
    if status is not None and status not in (404, 408) and status >= 400:
        return JetStreamError(desc or f"pull request failed with status {status}", code=status)
    return None


def _pending_counts(msg: Msg) -> tuple[int, int]:
    h: dict[str, str] = msg.headers or {}
    try:
        return int(h.get("Nats-Pending-Messages", 0)), int(h.get("Nats-Pending-Bytes", 0))
    except ValueError:
        return 0, 0


class MessageBatch:
    """The messages of one fetch, yielded as they arrive.

    Iterate it (once through; a second iteration repeats what was received);
    after the iteration ends, :attr:`error` holds why the fetch ended early, if
    it was an error (an expired request or no messages is not an error: that
    batch is just short or empty). Use it as a context manager or read it to the
    end so its inbox is released at once; otherwise it is released when the
    batch is garbage collected.
    """

    def __init__(self, sub: Subscription, batch: int, max_bytes: int | None, wait: float | None,
                 heartbeat: float | None = None, pin_cb: Callable[[Msg], None] | None = None):
        self._sub = sub
        self._batch = batch
        self._max_bytes = max_bytes
        self._deadline = Deadline(wait)
        self._heartbeat = heartbeat
        self._pin_cb = pin_cb
        self._received: list[Msg] = []
        self._done = False
        self.error: Exception | None = None
        self._finalizer = weakref.finalize(self, _release, sub)

    def __iter__(self) -> Iterator[Msg]:
        yield from list(self._received)
        if self._done:
            return
        yield from self._stream()

    def _stream(self) -> Iterator[Msg]:
        size = sum(len(m.data) for m in self._received)
        last_activity = time.monotonic()
        try:
            while len(self._received) < self._batch and not self._done:
                remaining = self._deadline.remaining()
                if remaining is not None and remaining <= 0:
                    return
                wait = remaining
                if self._heartbeat:
                    hb_left = last_activity + 2 * self._heartbeat - time.monotonic()
                    if hb_left <= 0:
                        self.error = TimeoutError("missed idle heartbeats from the server during fetch")
                        return
                    wait = hb_left if wait is None else min(wait, hb_left)
                try:
                    msg = self._sub.next_msg(timeout=wait)
                except TimeoutError:
                    continue
                except (BadSubscriptionError, ConnectionClosedError) as exc:
                    self.error = exc
                    return
                last_activity = time.monotonic()
                status = msg.status
                if status is None:
                    if self._pin_cb is not None:
                        self._pin_cb(msg)
                    self._received.append(msg)
                    size += len(msg.data)
                    yield msg
                    if self._max_bytes and size >= self._max_bytes:
                        return
                    continue
                if status == 100:
                    continue
                self.error = _status_error(msg)
                return
        finally:
            self._done = True
            self._finalizer()

    def __len__(self) -> int:
        """Messages received so far (all of them once iterated)."""
        return len(self._received)

    def close(self) -> None:
        """Stop listening (messages not yet received will be redelivered after ack_wait)."""
        self._done = True
        self._finalizer()

    def __enter__(self) -> MessageBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _release(sub: Subscription) -> None:
    try:
        if sub.is_valid:
            sub.unsubscribe()
    except NatsError:
        pass


_DRAIN_QUIET = 0.05  # seconds without a message after which a drain ends

class MessagesContext:
    """Continuous pulling: iterate messages as they come. Thread-safe to stop.

    Keeps up to ``max_messages`` (or ``max_bytes``) requested; when fewer than
    the threshold are outstanding it asks for more. With idle heartbeats, two
    missed heartbeats mean the requests were lost (server restart, network
    trouble): they are forgotten and asked again. After a reconnect the same
    happens at once. :meth:`stop` ends the iteration; :meth:`drain` ends it once
    the messages already received are read.
    """

    def __init__(
        self,
        consumer: Consumer,
        max_messages: int = 500,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_cb: ErrorHandler | None = None,
        on_message: Callable[[Msg], bool] | None = None,
        on_reset: Callable[[], None] | None = None,
    ):
        if max_messages < 1:
            raise ValueError("max_messages must be >= 1")
        if expires < 0.001:
            raise ValueError("expires must be at least 1 ms")
        self._consumer = consumer
        self._nc = consumer._js._api.nc
        self._max_messages = max_messages if not max_bytes else 1_000_000
        self._max_bytes = max_bytes
        self._expires = expires
        if heartbeat is None:
            heartbeat = min(30.0, expires / 2) if expires >= 2 else None
        if heartbeat is not None and heartbeat >= expires:
            raise ValueError("heartbeat must be shorter than expires")
        self._heartbeat = heartbeat
        self._threshold_msgs = threshold_messages if threshold_messages is not None else self._max_messages // 2
        self._threshold_bytes = threshold_bytes if threshold_bytes is not None else (max_bytes or 0) // 2
        self._error_cb = error_cb
        self._on_message = on_message
        self._on_reset = on_reset
        self._inbox = self._nc.new_inbox()
        self._sub = self._nc._subscribe_internal(self._inbox)
        self._pending_msgs = 0
        self._pending_bytes = 0
        self._needs_reset = False
        self._last_activity = time.monotonic()
        self._stopped = False
        self._draining = False
        self._pulls_stopped = False
        self._held: Msg | None = None
        self._lock = threading.Lock()
        self._nc._on_reconnect(self._after_reconnect)

    # -- bookkeeping ---------------------------------------------------------------

    def _after_reconnect(self) -> None:
        # Pull requests do not survive a reconnect: ask again.
        self._needs_reset = True

    def _report(self, exc: Exception) -> None:
        if self._error_cb is not None:
            try:
                self._error_cb(exc)
            except Exception:
                pass

    def _reset_pending(self) -> None:
        self._pending_msgs = 0
        self._pending_bytes = 0
        if self._on_reset is not None:
            self._on_reset()

    def _check_consumer_exists(self) -> None:
        """After missed heartbeats: a consumer deleted while no request was
        waiting sends no 409, so ask. The ordered consumer re-creates its own."""
        if self._on_reset is not None:
            return
        try:
            self._consumer.info(timeout=2.0)
        except ConsumerNotFoundError:
            self.stop()
            err = ConsumerDeletedError(f"consumer {self._consumer.name!r} was deleted", code=409)
            self._report(err)
            raise err from None
        except NatsError:
            pass  # the server is away: keep pulling, it may come back

    def _pull(self) -> None:
        if self._max_bytes:
            want_bytes = self._max_bytes - self._pending_bytes
            body = pull_request(self._max_messages, self._expires, max_bytes=want_bytes, heartbeat=self._heartbeat)
            self._pending_msgs += self._max_messages
            self._pending_bytes += want_bytes
        else:
            batch = self._max_messages - self._pending_msgs
            body = pull_request(batch, self._expires, heartbeat=self._heartbeat)
            self._pending_msgs += batch
        self._nc.publish(self._consumer._next_subject, body, reply=self._inbox)
        self._last_activity = time.monotonic()

    def _wants_more(self) -> bool:
        if self._pulls_stopped:
            return False
        if self._max_bytes:
            return self._pending_bytes <= self._threshold_bytes
        return self._pending_msgs <= self._threshold_msgs

    # -- reading -------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> Msg:
        """The next message.

        Raises:
            TimeoutError: none within ``timeout`` (``None``: wait for ever).
            BadSubscriptionError: the iterator was stopped or drained.
            ConsumerDeletedError: the consumer was deleted.
        """
        if self._held is not None:
            msg, self._held = self._held, None
            return msg
        deadline: Deadline | None = None
        while True:
            if self._stopped:
                raise BadSubscriptionError("the messages iterator is stopped")
            if self._needs_reset:
                self._needs_reset = False
                self._reset_pending()
            if self._wants_more():
                try:
                    self._pull()
                except NatsError as exc:
                    self._report(exc)
            try:
                # Under load a message is already waiting: no deadline, no clock.
                msg = self._sub._poll()  # type: ignore[assignment]
                if msg is None:
                    if deadline is None:
                        deadline = Deadline(timeout)
                    wait = deadline.remaining()
                    if self._draining and self._sub.pending_msgs == 0:
                        quiet = self._drain_quiet_left()
                        wait = quiet if wait is None else min(wait, quiet)
                    if self._heartbeat:
                        hb_left = max(0.0, self._last_activity + 2 * self._heartbeat - time.monotonic())
                        wait = hb_left if wait is None else min(wait, hb_left)
                    msg = self._sub.next_msg(timeout=wait)
            except TimeoutError:
                if self._draining:
                    if self._sub.pending_msgs == 0 and self._drain_quiet_left() == 0.0:
                        self.stop()
                        raise BadSubscriptionError("the messages iterator is drained") from None
                    continue
                if self._heartbeat and time.monotonic() - self._last_activity >= 2 * self._heartbeat:
                    self._report(TimeoutError("missed idle heartbeats: pulling again"))
                    self._check_consumer_exists()
                    self._reset_pending()
                    continue
                if deadline is not None and deadline.expired():
                    raise TimeoutError("no message in time") from None
                continue
            except (BadSubscriptionError, ConnectionClosedError):
                self._stopped = True
                raise BadSubscriptionError("the messages iterator is stopped") from None
            self._last_activity = time.monotonic()
            status = msg.status
            if status is None:
                self._pending_msgs -= 1
                self._pending_bytes -= len(msg.data)
                if self._on_message is not None and not self._on_message(msg):
                    continue
                return msg
            if status == 100:
                if msg.reply:  # flow control (push consumers only, but harmless)
                    self._nc.publish(msg.reply, b"")
                continue
            if status in (408, 409):
                msgs, nbytes = _pending_counts(msg)
                self._pending_msgs = max(0, self._pending_msgs - msgs)
                self._pending_bytes = max(0, self._pending_bytes - nbytes)
            if status == 503:
                # No responders on the consumer's pull subject: it is gone (or
                # its stream is moving). Ordered consumers make a new one.
                if self._on_reset is not None:
                    self._reset_pending()
                    continue
                self._check_consumer_exists()
                self._reset_pending()
            err = _status_error(msg)
            if isinstance(err, ConsumerDeletedError):
                self._report(err)
                if self._on_reset is not None and not self._stopped:
                    self._reset_pending()  # an ordered consumer recreates itself
                    continue
                self.stop()
                raise err
            if err is not None:
                self._report(err)
            if status == 409 and "leadership" in msg.description.lower():
                self._reset_pending()

    def start(self, hold_first: float | None = None) -> None:
        """Send the first pull request now rather than on the first read.

        With ``hold_first`` (seconds) also wait for the first message and keep
        it for the first read: once it is here the server has read it, so a
        write made after this call cannot replace it first (a key watcher must
        show the value present when it was made, even in a history-1 bucket).
        """
        if not self._stopped and self._wants_more():
            self._pull()
        if hold_first is not None:
            try:
                self._held = self.next(timeout=hold_first)
            except TimeoutError:
                pass

    def _drain_quiet_left(self) -> float:
        """How much longer a drain waits for messages still owed by pull
        requests the server is serving: they come within moments, so after a
        quiet spell none are coming."""
        if self._pending_msgs <= 0:
            return 0.0
        return max(0.0, self._last_activity + _DRAIN_QUIET - time.monotonic())

    def __iter__(self) -> Iterator[Msg]:
        while True:
            try:
                yield self.next()
            except BadSubscriptionError:
                return

    def stop(self) -> None:
        """End the iteration now; messages received but not read are dropped."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._nc._reconnect_hooks.remove(self._after_reconnect)
        except ValueError:
            pass
        _release(self._sub)

    def drain(self, timeout: float = 5.0) -> None:
        """Ask for no more; the iteration ends once what was received is read.

        Messages the server already sent for outstanding pull requests are
        waited for (one round trip, bounded by ``timeout``), so they are read
        rather than left unacknowledged until their ack wait runs out.
        """
        self._pulls_stopped = True
        if threading.current_thread() is not self._nc._reader:  # there a flush could not be answered
            try:
                # The PONG comes after every message the server had sent us.
                self._nc.flush(timeout)
            except NatsError:
                pass
        self._last_activity = time.monotonic()
        self._draining = True
        self._sub._wake()  # a reader waiting for more must notice

    def __enter__(self) -> MessagesContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConsumeContext:
    """``consume(handler)``: a thread of its own calls the handler for each message."""

    def __init__(self, messages: MessagesContext, handler: Callable[[Msg], None],
                 error_cb: ErrorHandler | None, name: str):
        self._messages = messages
        self._handler = handler
        self._error_cb = error_cb
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"natsjs-consume-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    msg = self._messages.next()
                except BadSubscriptionError:
                    return
                except Exception as exc:
                    if self._error_cb is not None:
                        self._error_cb(exc)
                    if isinstance(exc, ConsumerDeletedError):
                        return
                    continue
                try:
                    self._handler(msg)
                except Exception as exc:  # a handler's bug must not stop consumption
                    if self._error_cb is not None:
                        self._error_cb(exc)
        finally:
            self._closed.set()

    @property
    def closed(self) -> threading.Event:
        """Set once the consume thread has ended."""
        return self._closed

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop now: the handler finishes the message it has, no more follow."""
        self._messages.stop()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def drain(self, timeout: float | None = 30.0) -> None:
        """Ask for no more and return once every received message was handled."""
        self._messages.drain()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            self._messages.stop()

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
