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
from concurrent.futures import Future
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


class PubAck(_Model, frozen=True, kw_only=True):
    """The stream's receipt for a stored message."""

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


def parse_pub_ack(msg: Msg, subject: str) -> PubAck:
    """Decode a PubAck, raising the mapped error for a JetStream error reply."""
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


class _AckMux(Subscription):
    """The inbox for async PubAcks. Reader thread: queue only, decode elsewhere."""

    def _deliver(self, msg: Msg) -> None:
        self._publisher._acks.put(msg)  # type: ignore[attr-defined]


class AsyncPublisher:
    """Pipelined JetStream publishes for one JetStream context. Thread-safe."""

    def __init__(self, nc: Client, max_pending: int = 4000, stall_wait: float = 5.0, ack_timeout: float = 5.0):
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.nc = nc
        self.max_pending = max_pending
        self.stall_wait = stall_wait
        self.ack_timeout = ack_timeout
        self._slots = threading.BoundedSemaphore(max_pending)
        self._lock = threading.Lock()
        self._empty = threading.Condition(self._lock)
        # token -> (future, deadline, subject); insertion order is deadline order.
        self._pending: collections.OrderedDict[str, tuple[Future[PubAck], float, str]] = collections.OrderedDict()
        self._tokens = itertools.count(1)
        self._acks: queue.SimpleQueue[Msg | None] = queue.SimpleQueue()
        self._prefix = ""
        self._mux: _AckMux | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def _start(self) -> None:
        nc = self.nc
        self._prefix = nc.new_inbox() + "."
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
        if not self._slots.acquire(timeout=self.stall_wait):
            raise TimeoutError(
                f"{self.max_pending} async publishes waited {self.stall_wait} s for acks (stalled)"
            )
        token = str(next(self._tokens))
        fut: Future[PubAck] = Future()
        fut.set_running_or_notify_cancel()
        with self._lock:
            self._pending[token] = (fut, time.monotonic() + self.ack_timeout, subject)
        try:
            self.nc.publish(subject, payload, reply=self._prefix + token, headers=headers)
        except BaseException:
            self._finish(token)
            raise
        return fut

    def _finish(self, token: str) -> tuple[Future[PubAck], float, str] | None:
        with self._lock:
            item = self._pending.pop(token, None)
            if item is not None:
                self._slots.release()
                if not self._pending:
                    self._empty.notify_all()
        return item

    def _run(self) -> None:
        prefix_len = len(self._prefix)
        get = self._acks.get
        while True:
            try:
                msg = get(timeout=0.1)
            except queue.Empty:
                msg = None
            if msg is None and self._closed:
                return
            if msg is not None:
                item = self._finish(msg.subject[prefix_len:])
                if item is not None:
                    fut, _, subject = item
                    try:
                        fut.set_result(parse_pub_ack(msg, subject))
                    except Exception as exc:
                        fut.set_exception(exc)
            self._expire()

    def _expire(self) -> None:
        now = time.monotonic()
        expired = []
        with self._lock:
            for token, (_, deadline, _) in self._pending.items():
                if deadline > now:
                    break
                expired.append(token)
        for token in expired:
            item = self._finish(token)
            if item is not None:
                item[0].set_exception(TimeoutError(f"no PubAck for {item[2]!r} within {self.ack_timeout} s"))

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
        for fut, _, _ in items:
            if not fut.done():
                fut.set_exception(closed)
        self._acks.put(None)


def pubopts_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pick the JetStream publish options out of ``kwargs`` (for adapters)."""
    keys = ("msg_id", "expected_stream", "expected_last_seq", "expected_last_subject_seq",
            "expected_last_msg_id", "ttl")
    return {k: kwargs.get(k) for k in keys}
