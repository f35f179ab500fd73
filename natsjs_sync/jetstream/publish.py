"""Publishing to streams: sync with a PubAck, and pipelined with futures.

Sync publish is a request: the stream's leader answers with a PubAck once the
message is stored. A 503 (no responders) right after a leader change is
retried a few times before giving up (ADR-22).

Async publish sends without waiting and returns a
:class:`concurrent.futures.Future`. All acks come back on one inbox
subscription; the reader thread only queues them and the ``natsjs-acks``
thread decodes them and completes the futures, so future callbacks never run on
the reader thread. At most ``max_pending`` publishes are in flight: the next
one blocks (up to ``stall_wait``) until an ack frees a slot.
"""

from __future__ import annotations

import collections
import itertools
import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

import msgspec

from .._timeout import Deadline
from ..errors import (
    ConnectionClosedError,
    NoRespondersError,
    NoStreamResponseError,
    TimeoutError,
    jetstream_error,
)
from ..msg import Msg
from ..protocol.headers import STATUS_NO_RESPONDERS, Headers, HeadersInput
from ..subscription import Subscription
from .stream_config import _Model

if TYPE_CHECKING:
    from ..client import Client

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MSG_TTL = "Nats-TTL"

_decode = msgspec.json.decode


class PubAck(_Model, frozen=True, kw_only=True, gc=False):
    """The stream's receipt for a stored message."""

    # gc=False: one is made per publish and it only holds str/int/bool, so it
    # can never be part of a reference cycle; untracked, it does not feed the
    # garbage collector's generation counts.

    stream: str
    seq: int
    duplicate: bool = False
    domain: str | None = None
    value: str | None = None  # counter streams: the new value


def publish_headers(
    headers: HeadersInput | None,
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
    expected_last_msg_id: str | None,
    ttl: float | str | None,
) -> HeadersInput | None:
    """Merge the JetStream publish options into the user's headers."""
    extra: dict[str, str] = {}
    if msg_id is not None:
        extra[MSG_ID] = str(msg_id)
    if expected_stream is not None:
        extra[EXPECTED_STREAM] = expected_stream
    if expected_last_seq is not None:
        extra[EXPECTED_LAST_SEQ] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        extra[EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
    if expected_last_msg_id is not None:
        extra[EXPECTED_LAST_MSG_ID] = expected_last_msg_id
    if ttl is not None:
        extra[MSG_TTL] = ttl if isinstance(ttl, str) else f"{max(1, round(ttl))}s"
    if not extra:
        return headers
    merged = Headers(headers or {})
    for k, v in extra.items():
        merged[k] = v
    return merged


class _PubAckWire(msgspec.Struct, gc=False):
    """A PubAck or an error reply (which may carry ``stream`` too), decoded in one C call.

    Untracked by the garbage collector like PubAck: it holds only decoded JSON.
    """

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str | None = None
    value: str | None = None
    error: dict[str, Any] | None = None


_pub_ack_wire = msgspec.json.Decoder(_PubAckWire)


def _fast_pub_ack(data: bytes) -> PubAck | None:
    """The PubAck in ``data``, or None when it is anything else (error, garbage)."""
    try:
        w = _pub_ack_wire.decode(data)
    except msgspec.DecodeError:
        return None
    if w.error is not None or not w.stream:
        return None
    return PubAck(stream=w.stream, seq=w.seq, duplicate=w.duplicate, domain=w.domain, value=w.value)


def parse_pub_ack(msg: Msg, subject: str) -> PubAck:
    """Decode a PubAck, raising the mapped error for a JetStream error reply."""
    if msg._hdr is None:
        ack = _fast_pub_ack(msg.data)
        if ack is not None:
            return ack
    if not msg.data and msg.status == STATUS_NO_RESPONDERS:
        raise NoStreamResponseError(f"no stream answered a publish to {subject!r}", code=503)
    try:
        resp = _decode(msg.data)
    except msgspec.DecodeError as exc:
        raise NoStreamResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}") from exc
    if not isinstance(resp, dict):
        raise NoStreamResponseError(f"invalid PubAck for {subject!r}: {msg.data[:80]!r}")
    err = resp.get("error")
    if err:
        raise jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""))
    return msgspec.convert(resp, PubAck, strict=False)


def publish_sync(
    nc: Client,
    subject: str,
    payload: bytes,
    headers: HeadersInput | None,
    timeout: float,
    retry_attempts: int = 2,
    retry_wait: float = 0.25,
) -> PubAck:
    deadline = Deadline(timeout)
    attempt = 0
    while True:
        try:
            msg = nc.request(subject, payload, timeout=deadline.remaining(), headers=headers)
        except NoRespondersError:
            # ADR-22: right after a leader election nobody answers for a moment.
            attempt += 1
            remaining = deadline.remaining()
            if attempt > retry_attempts or (remaining is not None and remaining <= retry_wait):
                raise NoStreamResponseError(
                    f"no stream answered a publish to {subject!r} (is there a stream for it?)", code=503
                ) from None
            time.sleep(retry_wait)
            continue
        return parse_pub_ack(msg, subject)


def _settle(fut: Future[PubAck], ack: PubAck | None, exc: BaseException | None) -> None:
    """Complete a future unless the user cancelled it (it is never set running,
    which saves a lock round per publish)."""
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(ack)  # type: ignore[arg-type]
    except InvalidStateError:
        pass


_PENDING = Future()._state  # type: ignore[attr-defined]  # the state a new Future starts in


class _PubFuture(Future):  # type: ignore[type-arg]
    """A Future whose done-callbacks (user code) never run on the reader thread:
    acks are settled there, and the callbacks are handed to the acks thread.

    All futures of one publisher share its reentrant Condition instead of each
    making its own. Pipelined publishing keeps thousands of futures alive; a
    Condition each (with its lock and waiter deque) cost more Python work than
    the publish, and fed the garbage collector enough objects to trigger full
    collections over all of them. A shared condition wakes every waiter when
    any future settles, so :meth:`result` and :meth:`exception` wait in a loop
    until their own future is done.
    """

    def __init__(self, publisher: AsyncPublisher, subject: str):
        # What Future.__init__ sets, with the shared condition.
        self._condition = publisher._futures_cond
        self._subject = subject  # for the error message when no ack comes
        self._deadline = 0.0  # time.monotonic() after which it fails; set once sent
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []
        self._publisher = publisher

    def _wait_done(self, timeout: float | None) -> None:
        deadline = Deadline(timeout)
        with self._condition:
            while not self.done():
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    return
                self._condition.wait(remaining)

    def result(self, timeout: float | None = None) -> PubAck:
        self._wait_done(timeout)
        return super().result(timeout=0)  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait_done(timeout)
        return super().exception(timeout=0)

    def _invoke_callbacks(self) -> None:
        if self._done_callbacks:  # type: ignore[attr-defined]
            if threading.current_thread() is self._publisher._thread:
                super()._invoke_callbacks()  # type: ignore[misc]
            else:
                self._publisher._acks.put(self)


class _AckMux(Subscription):
    """The inbox for async PubAcks: settled right on the reader thread (one C
    decode, no user code); anything unusual goes to the acks thread."""

    _publisher: AsyncPublisher

    def _deliver(self, msg: Msg) -> None:
        self._publisher._on_ack(msg)


class AsyncPublisher:
    """Pipelined JetStream publishes for one JetStream context. Thread-safe."""

    def __init__(self, nc: Client, max_pending: int = 4000, stall_wait: float = 5.0, ack_timeout: float = 5.0):
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.nc = nc
        self.max_pending = max_pending
        self.stall_wait = stall_wait
        self.ack_timeout = ack_timeout
        self._low_water = max_pending * 3 // 4
        self._lock = threading.Lock()
        self._empty = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)
        self._futures_cond = threading.Condition(threading.RLock())  # shared by every _PubFuture
        self._stalled = 0
        # token -> future (with its subject and deadline); insertion order is deadline order.
        self._pending: collections.OrderedDict[str, _PubFuture] = collections.OrderedDict()
        self._tokens = itertools.count(1)
        self._acks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._prefix = ""
        self._prefix_b = b""
        self._prefix_len = 0
        self._mux: _AckMux | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def _start(self) -> None:
        nc = self.nc
        self._prefix = nc.new_inbox() + "."
        self._prefix_b = self._prefix.encode()
        self._prefix_len = len(self._prefix)
        sub = nc._subscribe_internal(self._prefix + "*", _AckMux)
        sub._publisher = self  # type: ignore[attr-defined]
        self._mux = sub  # type: ignore[assignment]
        nc._on_close(self._fail_all)
        self._thread = threading.Thread(target=self._run, name=f"natsjs-acks-{nc._thread_tag}", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Publishes sent and not yet acknowledged."""
        return len(self._pending)

    def publish(self, subject: str, payload: bytes, headers: HeadersInput | None) -> Future[PubAck]:
        if self._closed:
            raise ConnectionClosedError("the connection is closed")
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._start()
        token = str(next(self._tokens))
        fut = _PubFuture(self, subject)
        with self._lock:
            if len(self._pending) >= self.max_pending:
                self._stall()
            # After any stall, and under the lock: the ack timeout starts now,
            # and deadlines enter the dict in order.
            fut._deadline = time.monotonic() + self.ack_timeout
            self._pending[token] = fut
        try:
            self.nc._publish_with_reply(subject, payload, self._prefix_b + token.encode(), headers)
        except BaseException:
            self._finish(token)
            raise
        return fut

    def _stall(self) -> None:
        """Lock held, window full: wait until it is down to the low-water mark.

        Resuming at a quarter of the window free, not at each single ack,
        turns thousands of one-slot wake-ups into a few.
        """
        self._stalled += 1
        try:
            deadline = time.monotonic() + self.stall_wait
            while len(self._pending) > self._low_water and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"{self.max_pending} async publishes waited {self.stall_wait} s for acks (stalled)"
                    )
                self._room.wait(remaining)
        finally:
            self._stalled -= 1
        if self._closed:
            raise ConnectionClosedError("the connection is closed")

    def _finish(self, token: str) -> _PubFuture | None:
        with self._lock:
            fut = self._pending.pop(token, None)
            if fut is not None:
                left = len(self._pending)
                if self._stalled and left <= self._low_water:
                    self._room.notify_all()
                if not left:
                    self._empty.notify_all()
        return fut

    def _on_ack(self, msg: Msg) -> None:
        """Reader thread: settle the publish this ack is for."""
        fut = self._finish(msg.subject[self._prefix_len:])
        if fut is None:
            return  # expired already, or not ours
        if msg._hdr is None:
            ack = _fast_pub_ack(msg.data)
            if ack is not None:
                _settle(fut, ack, None)
                return
        self._acks.put((fut, msg))  # an error reply: decoded and mapped off the reader thread

    def _run(self) -> None:
        get = self._acks.get
        while True:
            try:
                work = get(timeout=0.1)
            except queue.Empty:
                work = None
            if work is None and self._closed:
                return
            if isinstance(work, _PubFuture):
                Future._invoke_callbacks(work)  # type: ignore[attr-defined]
            elif work is not None:
                fut, msg = work
                try:
                    ack = parse_pub_ack(msg, fut._subject)
                except Exception as exc:
                    _settle(fut, None, exc)
                else:
                    _settle(fut, ack, None)
            self._expire()

    def _expire(self) -> None:
        now = time.monotonic()
        expired = []
        with self._lock:
            for token, pending in self._pending.items():
                if pending._deadline > now:
                    break
                expired.append(token)
        for token in expired:
            fut = self._finish(token)
            if fut is not None:
                _settle(fut, None, TimeoutError(f"no PubAck for {fut._subject!r} within {self.ack_timeout} s"))

    def wait_complete(self, timeout: float | None) -> None:
        """Block until every pending publish is acknowledged (or failed)."""
        deadline = Deadline(timeout)
        with self._empty:
            while self._pending:
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{len(self._pending)} async publishes still pending")
                self._empty.wait(remaining)

    def _fail_all(self) -> None:
        self._closed = True
        closed = ConnectionClosedError("the connection closed before the PubAck arrived")
        with self._lock:
            items = list(self._pending.values())
            self._pending.clear()
            self._empty.notify_all()
            self._room.notify_all()
        for fut in items:
            _settle(fut, None, closed)
        self._acks.put(None)


def pubopts_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pick the JetStream publish options out of ``kwargs`` (for adapters)."""
    keys = ("msg_id", "expected_stream", "expected_last_seq", "expected_last_subject_seq",
            "expected_last_msg_id", "ttl")
    return {k: kwargs.get(k) for k in keys}
