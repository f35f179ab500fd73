"""Fast-ingest batch publish (ADR-50, server 2.14+): many messages, flow-controlled, not atomic.

A fast batch streams messages into a stream without waiting for one PubAck per
message. The batch's control state rides in each message's reply subject,
``<inbox>.<batch id>.<flow>.<gap mode>.<batch seq>.<operation>.$FI``, and
every answer of the server comes back on that one inbox:

- ``{"type":"ack","seq":N,"msgs":M}``: messages up to batch sequence ``N`` are
  persisted (with gaps allowed: *some* of them), and the server will now ack
  every ``M`` messages. The first message of a batch always gets one: it tells
  whether the stream accepts fast batches and at what flow to start.
- ``{"type":"gap","last_seq":E,"seq":S}``: messages ``E`` up to ``S - 1`` were
  lost. With ``gap="fail"`` the server ends the batch there.
- ``{"type":"err","seq":S,"error":{...}}``: message ``S`` failed a check
  (``expected_last_seq`` ...). With ``gap="fail"`` the server ends the batch.
- a plain PubAck (with ``batch`` and ``count``): the batch is over, committed
  or ended by the server; or a JetStream error (stream without
  ``allow_batched``, an unknown batch).

The publisher keeps at most ``max_outstanding_acks`` flow acks outstanding
(the server's ``msgs`` times that many messages beyond the last ack), so the
server, not the client, sets the pace. An ack for a later message counts for
every earlier one, so a lost ack never stalls the batch; when nothing comes
back for a while the publisher pings the batch (operation 4) and the server
sends its latest flow ack again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import msgspec

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import BatchPublishError, JetStreamError, TimeoutError, jetstream_error
from ..protocol.headers import HeadersInput
from .batch import as_batch_error, batch_id_or_new
from .publish import PubAck, parse_pub_ack
from .publish_options import publish_headers

if TYPE_CHECKING:
    from types import TracebackType

    from ..msg import Msg
    from ..subscription import Subscription
    from .context import JetStream

__all__ = ["BatchGap", "FastBatchPublisher", "FastPubAck"]

_OP_START, _OP_APPEND, _OP_COMMIT, _OP_COMMIT_EOB, _OP_PING = 0, 1, 2, 3, 4
_MAX_FLOW = 65535
#: How long a wait for a flow ack goes before the batch is pinged for it again
#: (a lost ack must cost this much, not the caller's whole timeout).
_PING_AFTER = 1.0


class FastPubAck(NamedTuple):
    """What :meth:`FastBatchPublisher.add` knows after sending a message."""

    #: This message's sequence within the batch (1, 2, 3 ...).
    batch_sequence: int
    #: The highest batch sequence the stream has acknowledged. With
    #: ``gap="fail"`` every message up to it is persisted, so a caller may
    #: release what it kept for a retry; with ``gap="ok"`` some may be lost.
    ack_sequence: int


class BatchGap(NamedTuple):
    """Messages the stream never received: batch sequences ``first`` to ``last`` inclusive."""

    first: int
    last: int


class _Flow(msgspec.Struct):
    type: str = ""
    seq: int = 0
    msgs: int = 0
    last_seq: int = 0
    error: dict[str, Any] | None = None


_decode_flow = msgspec.json.Decoder(_Flow).decode


class FastBatchPublisher:
    """One fast-ingest batch. Not thread-safe: add and commit from one thread.

    Make it with :meth:`JetStream.fast_batch`. Used as a context manager, a
    batch left without :meth:`commit` (and without an exception) is committed
    without a final message; a batch left by an exception is abandoned (the
    server drops it after 10 idle seconds; what it stored stays stored).
    """

    def __init__(self, js: JetStream, *, batch_id: str | None, flow: int, max_outstanding_acks: int,
                 gap: Literal["fail", "ok"], timeout: TimeoutArg):
        # The id is a token of the reply subject: no dots or wildcards.
        batch_id = batch_id_or_new(batch_id, " \t\r\n.*>")
        if isinstance(flow, bool) or not isinstance(flow, int) or not 1 <= flow <= _MAX_FLOW:
            raise ValueError(f"flow must be an int from 1 to {_MAX_FLOW}, got {flow!r}")
        if isinstance(max_outstanding_acks, bool) or max_outstanding_acks not in (1, 2, 3):
            raise ValueError(f"max_outstanding_acks must be 1, 2 or 3, got {max_outstanding_acks!r}")
        if gap not in ("fail", "ok"):
            raise ValueError(f"gap must be 'fail' or 'ok', got {gap!r}")
        Deadline.of(timeout, 5.0)  # validated now, used per call
        self._js = js
        self.batch_id = batch_id
        self.gap_mode = gap
        self._max_outstanding = max_outstanding_acks
        self._timeout = timeout
        self._sub: Subscription | None = None
        self._reply_prefix = ""
        self._flow_requested = flow
        self._seq = 0
        self._acked = 0
        self._ack_every = flow
        self._last_subject: str | None = None
        self._result: PubAck | None = None
        self._failure: JetStreamError | None = None
        self._done = False
        #: Lost messages the stream reported (informational; with ``gap="fail"`` the batch ended at the first).
        self.gaps: list[BatchGap] = []
        #: Messages that failed a check, as (batch sequence, error), in the order reported.
        self.errors: list[tuple[int, JetStreamError]] = []

    # ------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        """Messages sent so far (the commit included once sent)."""
        return self._seq

    @property
    def ack_sequence(self) -> int:
        """The highest batch sequence the stream has acknowledged so far."""
        return self._acked

    @property
    def done(self) -> bool:
        """Whether the batch is over: committed, ended by the server, or discarded."""
        return self._done

    @property
    def result(self) -> PubAck | None:
        """The batch's final PubAck (``batch_id``, ``batch_size`` = messages stored), once it is over."""
        return self._result

    # ------------------------------------------------------------ publishing
    def add(self, subject: str, payload: bytes = b"", headers: HeadersInput | None = None, *,
            msg_id: str | None = None, expected_stream: str | None = None, expected_last_seq: int | None = None,
            expected_last_subject_seq: int | None = None, expected_last_subject_seq_subject: str | None = None,
            expected_last_msg_id: str | None = None, ttl: float | str | None = None,
            timeout: TimeoutArg = USE_DEFAULT) -> FastPubAck:
        """Send one message of the batch; returns at once unless the flow window is full.

        The first message waits for the stream to accept the batch. Later ones
        wait only while ``max_outstanding_acks`` flow acks are outstanding.

        Args:
            msg_id, expected_*, ttl: as for :meth:`JetStream.publish`, checked
                by the stream per message.
            timeout: the longest this call waits for the stream (seconds;
                ``None`` for ever); the publisher's ``timeout`` by default.

        Raises:
            BatchPublishError: the batch is over, or (``gap="fail"``) the stream
                ended it at a gap or a failed check; :attr:`result` then tells
                how many messages were stored.
            BatchPublishError: also when the stream refused the batch (e.g. without
                ``allow_batched``), with the server's ``code`` and ``err_code``.
            TimeoutError: the stream did not make room in the window in time;
                the message was sent and the batch goes on.
        """
        hdrs = self._message_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                                     expected_last_subject_seq_subject, expected_last_msg_id, ttl)
        self._check_open()
        deadline = self._deadline(timeout)
        seq = self._seq + 1
        self._send(subject, payload, hdrs, seq, _OP_START if seq == 1 else _OP_APPEND)
        if seq == 1:
            self._wait(deadline, lambda: self._started or self._failure is not None)
        self._drain_pending()
        self._wait(deadline, lambda: self._failure is not None
                   or self._acked + self._ack_every * self._max_outstanding > seq)
        self._raise_if_failed(deadline)
        return FastPubAck(seq, self._acked)

    def commit(self, subject: str | None = None, payload: bytes = b"", headers: HeadersInput | None = None, *,
               msg_id: str | None = None, expected_stream: str | None = None,
               expected_last_subject_seq: int | None = None, expected_last_subject_seq_subject: str | None = None,
               expected_last_msg_id: str | None = None, ttl: float | str | None = None,
               timeout: TimeoutArg = USE_DEFAULT) -> PubAck:
        """End the batch: with ``subject``, store this last message too; without,
        end it after the messages added. Waits for the batch's PubAck.

        Returns:
            The PubAck of the batch, with ``batch_id`` and ``batch_size`` (how
            many messages the stream stored).

        Raises:
            BatchPublishError: the batch is over already, was ended by the
                stream (``gap="fail"``), or has nothing to commit.
            BatchPublishError: also when the stream refused the batch or the final message.
            TimeoutError: no PubAck in time; the batch's fate is unknown.
        """
        if subject is None:
            if payload or headers or msg_id is not None or expected_stream is not None \
                    or expected_last_subject_seq is not None or expected_last_msg_id is not None or ttl is not None:
                raise ValueError("a commit without a subject carries no message: give no payload or options")
            hdrs = None
        else:
            hdrs = self._message_headers(headers, msg_id, expected_stream, None, expected_last_subject_seq,
                                         expected_last_subject_seq_subject, expected_last_msg_id, ttl)
        self._check_open()
        if subject is None and (self._seq == 0 or self._last_subject is None):
            raise BatchPublishError("a commit without a message needs at least one message added")
        deadline = self._deadline(timeout)
        seq = self._seq + 1
        self._committing = True
        if subject is None:
            assert self._last_subject is not None
            self._send(self._last_subject, b"", None, seq, _OP_COMMIT_EOB)
        else:
            self._send(subject, payload, hdrs, seq, _OP_COMMIT)
        self._committing = True
        self._wait(deadline, lambda: False)
        self._raise_if_failed(deadline)
        assert self._result is not None
        return self._result

    def discard(self) -> None:
        """Stop sending: the stream keeps what it stored and drops the batch after 10 idle seconds."""
        self._finish()

    # ------------------------------------------------------------ machinery
    #: Whether the stream accepted the batch (its first flow ack came).
    _started = False
    #: Whether our commit is on its way, so a final PubAck is the expected end.
    _committing = False

    def _message_headers(self, headers: HeadersInput | None, msg_id: str | None, expected_stream: str | None,
                         expected_last_seq: int | None, expected_last_subject_seq: int | None,
                         expected_last_subject_seq_subject: str | None, expected_last_msg_id: str | None,
                         ttl: float | str | None) -> Any:
        features: list[str] = []
        hdrs = publish_headers(headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                               expected_last_msg_id, ttl,
                               expected_last_subject_seq_subject=expected_last_subject_seq_subject,
                               features=features)
        self._js._require(*features)
        return hdrs

    def _check_open(self) -> None:
        if self._failure is not None:
            self._done = True
            raise self._failure
        if self._done:
            raise BatchPublishError(f"fast batch {self.batch_id!r} is over (committed, ended or discarded)")

    def _deadline(self, timeout: TimeoutArg) -> Deadline:
        return Deadline.of(self._timeout if timeout is USE_DEFAULT else timeout, 5.0)

    def _send(self, subject: str, payload: bytes, headers: Any, seq: int, op: int) -> None:
        core = self._js._core
        if self._sub is None:
            inbox = core.new_inbox()
            self._reply_prefix = f"{inbox}.{self.batch_id}.{self._flow_requested}.{self.gap_mode}."
            self._sub = core.subscribe_internal(f"{inbox}.{self.batch_id}.>")
        reply = f"{self._reply_prefix}{seq}.{op}.$FI"
        core.publish(subject, payload, reply=reply, headers=headers)
        if op != _OP_PING:
            self._seq = seq
            self._last_subject = subject

    def _ping(self) -> None:
        # A ping carries the highest sequence sent, so it never looks like a gap.
        assert self._last_subject is not None
        self._send(self._last_subject, b"", None, self._seq, _OP_PING)

    def _drain_pending(self) -> None:
        while not self._done and self._sub is not None:
            msg = self._sub.poll()
            if msg is None:
                return
            self._handle(msg)

    def _wait(self, deadline: Deadline, satisfied: Any) -> None:
        """Handle answers until ``satisfied()`` or the batch is over, pinging when acks stop coming."""
        while not self._done and self._sub is not None and not satisfied():
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"fast batch {self.batch_id!r}: no answer from the stream in time "
                                   f"(sent {self._seq}, acknowledged {self._acked})")
            wait = _PING_AFTER if remaining is None else min(remaining, _PING_AFTER)
            try:
                msg = self._sub.next_msg(timeout=wait)
            except TimeoutError:
                if self._seq > 0 and self._started:
                    self._ping()
                continue
            self._handle(msg)

    def _handle(self, msg: Msg) -> None:
        flow: _Flow | None = None
        if msg.data.startswith(b'{"type"'):
            try:
                flow = _decode_flow(msg.data)
            except msgspec.DecodeError:
                flow = None
        if flow is None or not flow.type:
            self._finish_with(msg)
            return
        if flow.type == "ack":
            self._started = True
            self._acked = max(self._acked, flow.seq)
            if flow.msgs > 0:
                self._ack_every = flow.msgs
        elif flow.type == "gap":
            self.gaps.append(BatchGap(flow.last_seq, flow.seq - 1))
            if self.gap_mode == "fail" and self._failure is None:
                self._failure = BatchPublishError(
                    f"fast batch {self.batch_id!r}: messages {flow.last_seq} to {flow.seq - 1} were lost; "
                    "the stream ended the batch")
        elif flow.type == "err":
            err = flow.error or {}
            exc = jetstream_error(err.get("code"), err.get("err_code"), str(err.get("description", "")))
            self.errors.append((flow.seq, exc))
            if self.gap_mode == "fail" and self._failure is None:
                self._failure = as_batch_error(
                    exc, f"fast batch {self.batch_id!r}: message {flow.seq} failed; the stream ended the batch: ")
        # Unknown types are newer servers' additions: ignored, as the ADR asks of clients.

    def _finish_with(self, msg: Msg) -> None:
        """The batch's final answer: its PubAck, or the error that ended it."""
        subject = self._last_subject or ""
        try:
            ack = parse_pub_ack(msg, subject)
        except JetStreamError as exc:
            self._finish()
            if self._failure is None:
                # One class for every way a batch fails, as for atomic batches;
                # the server's code and err_code stay on it.
                self._failure = as_batch_error(exc, f"fast batch {self.batch_id!r}: ")
            return
        self._result = ack
        self._finish()
        if self._failure is None and not self._committing:
            # A final PubAck before our commit: the stream ended the batch on its own.
            self._failure = BatchPublishError(
                f"fast batch {self.batch_id!r} was ended by the stream after {ack.batch_size} messages")

    def _finish(self) -> None:
        self._done = True
        if self._sub is not None:
            sub, self._sub = self._sub, None
            try:
                sub.unsubscribe()
            except Exception:  # a closed client has ended its subscriptions already
                pass

    def _raise_if_failed(self, deadline: Deadline) -> None:
        """Raise the failure that ended the batch, once its final PubAck (how many were stored) is in."""
        if self._failure is None:
            return
        if not self._done:
            try:
                self._wait(deadline, lambda: False)
            except TimeoutError:
                pass
        self._finish()
        raise self._failure

    def __enter__(self) -> FastBatchPublisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._done:
            return
        if exc_type is None and self._seq > 0:
            self.commit()
        else:
            self._finish()

    def __repr__(self) -> str:
        return (f"<FastBatchPublisher {self.batch_id} sent={self._seq} acked={self._acked}"
                f"{' done' if self._done else ''}>")

