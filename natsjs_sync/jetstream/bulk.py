"""Bulk publishing to streams: many messages, one buffered write per batch, acks counted.

:class:`FramePublisher` is for writers that publish a great many messages,
every one with a ``Nats-Msg-Id`` (a Spark task's rows), and want only counts
back, not a future per message. Each message is encoded once as an HPUB frame
with its own reply token; a batch of frames goes to the connection in one
write. Acks arrive on one inbox and are counted on the reader thread. At most
``window`` messages are unacknowledged; when no ack comes for ``ack_timeout``
seconds (an outage, a leader election, a lost ack) every unacknowledged frame is
sent again as it was, for at most ``resend_for`` seconds per outage: the msg ids
make the repeats duplicates the stream does not store twice.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import (
    ConnectionClosedError,
    MaxPayloadError,
    NatsError,
    NoStreamResponseError,
    OutboundBufferLimitError,
    TimeoutError,
)
from ..protocol.jetstream.status import is_no_responders
from .publish import _fast_pub_ack, parse_pub_ack

if TYPE_CHECKING:
    from .._core.spi import CoreLink, Handle
    from ..msg import Msg

_HEADER_START = b"NATS/1.0\r\n"
_MSG_ID_LINE = b"Nats-Msg-Id: "


def msg_id_headers(msg_id: bytes, lines: bytes = b"") -> bytes:
    """The header block of a message: ``lines`` (none by default), then ``Nats-Msg-Id``.

    ``msg_id`` must hold no CR, LF or control characters (the caller makes it);
    ``lines`` are header lines already encoded, each ending in CRLF
    (``b"content-type: application/json\\r\\n"``).
    """
    return b"%s%s%s%s\r\n\r\n" % (_HEADER_START, lines, _MSG_ID_LINE, msg_id)


class FramePublisher:
    """Publish pre-validated messages in batches; count stored and duplicate acks.

    Not thread-safe for publishing (one publishing thread); acks are counted
    on the client's reader thread. Use as a context manager: leaving the block
    waits for every ack and cancels the inbox.
    """

    def __init__(self, core: CoreLink, window: int = 4000, ack_timeout: float = 10.0, resend_for: float = 0.0):
        if window < 1:
            raise ValueError("window must be >= 1")
        self._core = core
        self._window = window
        self._ack_timeout = ack_timeout
        self._resend_for = resend_for
        self._lock = threading.Condition(threading.Lock())
        self._pending: dict[int, bytes] = {}  # token -> its frame, until acknowledged
        self._tokens = itertools.count(1)
        prefix = core.new_inbox() + "."
        self._prefix = prefix.encode()
        self._prefix_len = len(prefix)
        self._max_payload = core.max_payload
        self._route: Handle | None = core.route_internal(prefix + "*", self._on_ack)
        self._closed_hook: Handle | None = core.on_close(self._on_close)
        self._last_ack = time.monotonic()
        self._resend_until: float | None = None
        self._no_stream = False  # a publish met no responders: no stream (yet) for its subject
        self.published = 0  #: messages stored
        self.duplicates = 0  #: messages the stream already had (same msg id)
        self.resent = 0  #: frames sent again after an ack timeout
        self.error: BaseException | None = None  #: the first failure (an error ack, a closed connection)

    # ------------------------------------------------------------------ publishing

    def publish(self, subjects: Sequence[bytes], headers: Sequence[bytes], payloads: Sequence[bytes]) -> None:
        """Publish one message per index: ``subjects[i]`` (validated bytes),
        ``headers[i]`` (a whole header block, e.g. :func:`msg_id_headers`),
        ``payloads[i]``. Blocks while the window is full.

        Raises:
            MaxPayloadError: a message larger than the server allows (nothing of the batch is sent).
            NatsError: the first failure so far, or no ack within the resend budget.
        """
        self._raise_error()
        n = len(payloads)
        frames: list[bytes] = []
        tokens: list[int] = []
        prefix, max_payload = self._prefix, self._max_payload
        for i in range(n):
            hdr, data = headers[i], payloads[i]
            hlen = len(hdr)
            total = hlen + len(data)
            if total > max_payload:
                raise MaxPayloadError(f"message of {total} bytes exceeds the server's max_payload of {max_payload}")
            token = next(self._tokens)
            tokens.append(token)
            frames.append(b"HPUB %s %s%d %d %d\r\n%s%s\r\n" % (subjects[i], prefix, token, hlen, total, hdr, data))
        step = max(1, self._window // 4)
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            self._wait_room(hi - lo)
            with self._lock:
                for j in range(lo, hi):
                    self._pending[tokens[j]] = frames[j]
            self._send(b"".join(frames[lo:hi]), hi - lo)

    def _send(self, frames: bytes, count: int) -> None:
        """Buffer frames; while reconnecting with the buffer full, wait (within the resend budget)."""
        until: float | None = None
        while True:
            try:
                self._core.publish_frames(frames, count)
                return
            except OutboundBufferLimitError:
                now = time.monotonic()
                until = now + self._resend_for if until is None else until
                if now >= until:
                    raise
            time.sleep(0.05)  # the reconnect buffer is full: give the reconnect time

    def _wait_room(self, count: int) -> None:
        with self._lock:
            while len(self._pending) + count > self._window and self._pending:
                self._wait_locked()

    def finish(self) -> None:
        """Wait for every ack; raise the first failure once all are settled."""
        with self._lock:
            while self._pending and self.error is None:
                self._wait_locked()
        self._raise_error()

    def _wait_locked(self) -> None:
        """Lock held: wait for acks; when none came for ``ack_timeout``, send again or fail."""
        waited = time.monotonic() - self._last_ack
        if waited < self._ack_timeout:
            self._lock.wait(self._ack_timeout - waited)
            return
        now = time.monotonic()
        if self._resend_until is None:
            self._resend_until = now + self._resend_for
        if now >= self._resend_until:
            if self._no_stream:
                self.error = self.error or NoStreamResponseError(
                    f"no stream answered {len(self._pending)} publishes (none stores their subjects?)", code=503)
            else:
                self.error = self.error or TimeoutError(
                    f"{len(self._pending)} publishes without a PubAck for {self._ack_timeout} s")
            raise self.error
        frames = list(self._pending.values())
        self.resent += len(frames)
        self._last_ack = now  # a fresh ack timeout for the frames sent again
        self._lock.release()
        try:
            for lo in range(0, len(frames), 1000):
                try:
                    self._core.publish_frames(b"".join(frames[lo:lo + 1000]), len(frames[lo:lo + 1000]))
                except NatsError:  # still away: the next timeout sends again
                    time.sleep(0.05)
                    break
        finally:
            self._lock.acquire()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    # ------------------------------------------------------------------ acks (reader thread)

    def _on_ack(self, msg: Msg) -> None:
        try:
            token = int(msg.subject[self._prefix_len:])
        except ValueError:
            return
        data = msg.data
        if msg.raw_headers is None:
            ack = _fast_pub_ack(data)
            if ack is not None:
                with self._lock:
                    if self._pending.pop(token, None) is None:
                        return  # an ack for a frame sent twice: counted already
                    if ack.duplicate:
                        self.duplicates += 1
                    else:
                        self.published += 1
                    self._progress()
                return
        if is_no_responders(msg.raw_headers, data):
            self._no_stream = True
            return  # no stream answered (yet: a leader election); sent again after the ack timeout
        try:
            parse_pub_ack(msg, "?")
        except NatsError as exc:
            with self._lock:
                if self._pending.pop(token, None) is not None:
                    self.error = self.error or exc
                    self._progress()
            return

    def _progress(self) -> None:
        """Lock held: an ack arrived."""
        self._last_ack = time.monotonic()
        self._resend_until = None
        self._lock.notify_all()

    def _on_close(self) -> None:
        with self._lock:
            if self._pending:
                self.error = self.error or ConnectionClosedError("the connection closed before the PubAcks arrived")
            self._lock.notify_all()

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Stop receiving acks (idempotent)."""
        for h in (self._route, self._closed_hook):
            if h is not None:
                h.cancel()
        self._route = self._closed_hook = None

    def __enter__(self) -> FramePublisher:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            if exc_type is None:
                self.finish()
        finally:
            self.close()
