"""Ordered consumer (ADR-17): every stream message once and in order, no acks.

It is an ephemeral pull consumer (memory storage, one replica, ack none, one
delivery) that the client re-creates whenever continuity is in doubt: a gap in
consumer sequences, missed heartbeats, the consumer deleted, a reconnect or a
server restart. The new consumer starts at the stream sequence after the last
one delivered, so nothing is skipped and nothing repeats. Each reset uses a
new inbox, so messages still in flight for the old consumer cannot arrive.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg, resolve
from ..errors import (
    BadSubscriptionError,
    JetStreamError,
    JetStreamNotEnabledError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    TimeoutError,
)
from ..msg import Msg
from ..protocol.nuid import next_nuid
from .consumer import DEFAULT_FETCH_WAIT
from .consumer_config import ConsumerConfig, ConsumerInfo
from .pull import ConsumeContext, ErrorHandler, MessagesContext, _release, pull_request, server_expiry

if TYPE_CHECKING:
    from .context import JetStream


def _transient(exc: NatsError) -> bool:
    """Whether creating the consumer again later may succeed."""
    if isinstance(exc, (TimeoutError, NatsConnectionError, NoRespondersError, JetStreamNotEnabledError)):
        return True
    return isinstance(exc, JetStreamError) and (exc.code or 0) >= 500


class OrderedConsumer:
    """An ordered, self-healing view of a stream. Use one iteration at a time.

    Args:
        filter_subjects: only these subjects (wildcards allowed).
        deliver_policy: where to start the first time: ``all``, ``last``,
            ``new``, ``by_start_sequence`` (with ``opt_start_seq``),
            ``by_start_time`` (with ``opt_start_time``), ``last_per_subject``.
        max_reset_attempts: give up after this many failed re-creations in a
            row (``None``: never give up).
        inactive_threshold: seconds after which the server removes an idle consumer.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        opt_start_time: datetime.datetime | None = None,
        replay_policy: str = "instant",
        headers_only: bool = False,
        inactive_threshold: float = 300.0,
        max_reset_attempts: int | None = None,
        name_prefix: str | None = None,
        metadata: dict[str, str] | None = None,
    ):
        self._js = js
        self.stream = stream
        self._filters = list(filter_subjects or [])
        self._deliver_policy = deliver_policy
        self._opt_start_seq = opt_start_seq
        self._opt_start_time = opt_start_time
        self._replay_policy = replay_policy
        self._headers_only = headers_only
        self._inactive_threshold = inactive_threshold
        self._max_resets = max_reset_attempts
        self._prefix = name_prefix or next_nuid()
        self._metadata = metadata
        self._serial = 0
        self.name: str | None = None
        self.info: ConsumerInfo | None = None  # of the consumer when it was last (re)created
        self._next_subject = ""
        self._stream_seq = 0  # last stream sequence handed to the user
        self._consumer_seq = 0  # last consumer sequence seen from the current consumer
        self.resets = 0
        self._cancel = threading.Event()

    # ------------------------------------------------------------------ (re)creation

    def _config(self) -> ConsumerConfig:
        kwargs: dict[str, Any] = {}
        if self._stream_seq > 0:
            kwargs = {"deliver_policy": "by_start_sequence", "opt_start_seq": self._stream_seq + 1}
        else:
            kwargs = {"deliver_policy": getattr(self._deliver_policy, "value", self._deliver_policy)}
            if self._opt_start_seq is not None:
                kwargs["opt_start_seq"] = self._opt_start_seq
            if self._opt_start_time is not None:
                kwargs["opt_start_time"] = self._opt_start_time
        if len(self._filters) == 1:
            kwargs["filter_subject"] = self._filters[0]
        elif self._filters:
            kwargs["filter_subjects"] = self._filters
        return ConsumerConfig(
            name=f"{self._prefix}_{self._serial}",
            ack_policy="none",
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=self._inactive_threshold,
            replay_policy=self._replay_policy,
            headers_only=self._headers_only,
            metadata=self._metadata,
            **kwargs,
        )

    def _recreate(self, deadline: Deadline | None = None) -> None:
        """Delete the current consumer (best effort) and make the next one.

        Transient failures (server away, no JetStream leader yet, timeouts) are
        retried with back-off, for ever unless ``max_reset_attempts`` or the
        deadline says otherwise; a permanent one (stream deleted, bad config)
        is raised at once.
        """
        old = self.name
        self.name = None
        if old is not None:
            try:
                self._js.delete_consumer(self.stream, old, timeout=1.0)
            except NatsError:
                pass  # gone already, or the server is away: it expires on its own
        attempt = 0
        while True:
            self._serial += 1
            try:
                cons = self._js.create_consumer(self.stream, self._config())
            except NatsError as exc:
                if not _transient(exc):
                    raise
                attempt += 1
                if self._max_resets is not None and attempt >= self._max_resets:
                    raise JetStreamError(f"ordered consumer could not be re-created: {exc}") from exc
                wait = min(5.0, 0.05 * 2 ** min(attempt, 7))
                if deadline is not None:
                    remaining = deadline.remaining()
                    if remaining is not None and remaining <= wait:
                        raise TimeoutError(f"ordered consumer could not be re-created in time: {exc}") from exc
                if self._cancel.wait(wait):  # back-off, cut short by stop()
                    raise BadSubscriptionError("the ordered consumer was stopped") from exc
                continue
            self.name = cons.name
            self.info = cons.cached_info
            self._next_subject = cons._next_subject
            self._consumer_seq = 0
            if old is not None:
                self.resets += 1
            return

    def _ensure(self, deadline: Deadline | None = None) -> None:
        if self.name is None:
            self._recreate(deadline)

    def _accept(self, msg: Msg) -> str:
        """``"ok"`` to deliver, ``"stale"`` to drop, ``"gap"`` to reset.

        Reads only the three fields it needs from the reply subject
        (``$JS.ACK.[domain.hash.]stream.consumer.delivered.sseq.cseq.ts.pending[.x]``):
        this runs for every message.
        """
        reply = msg.reply
        if not reply or not reply.startswith("$JS.ACK."):
            return "stale"
        tokens = reply.split(".")
        base = 3 if len(tokens) == 9 else 5
        try:
            consumer = tokens[base]
            sseq = int(tokens[base + 2])
            cseq = int(tokens[base + 3])
        except (IndexError, ValueError):
            return "stale"
        if consumer != self.name:
            return "stale"
        if cseq != self._consumer_seq + 1:
            return "gap"
        self._consumer_seq = cseq
        self._stream_seq = sseq
        return "ok"

    # ------------------------------------------------------------------ reading

    def fetch(self, batch: int, max_wait: TimeoutArg = USE_DEFAULT) -> list[Msg]:
        """Up to ``batch`` messages in order (a list; a gap ends the batch early)."""
        wait = resolve(max_wait, DEFAULT_FETCH_WAIT) or DEFAULT_FETCH_WAIT
        deadline = Deadline(wait)
        self._ensure(deadline)
        nc = self._js._api.nc
        inbox = nc.new_inbox()
        sub = nc._subscribe_internal(inbox)
        out: list[Msg] = []
        try:
            nc.publish_now(self._next_subject, pull_request(batch, server_expiry(wait)), reply=inbox)
            while len(out) < batch:
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    msg = sub.next_msg(timeout=remaining)
                except TimeoutError:
                    break
                status = msg.status
                if status == 100:
                    continue
                if status is not None:
                    if status == 409 and "deleted" in msg.description.lower():
                        self._recreate(deadline)
                    break
                verdict = self._accept(msg)
                if verdict == "ok":
                    out.append(msg)
                elif verdict == "gap":
                    self._recreate(deadline)
                    break
        finally:
            _release(sub)
        return out

    def next(self, timeout: TimeoutArg = USE_DEFAULT) -> Msg:
        """The next message in order. Raises TimeoutError."""
        wait = resolve(timeout, DEFAULT_FETCH_WAIT) or DEFAULT_FETCH_WAIT
        deadline = Deadline(wait)
        while True:
            remaining = deadline.remaining() or 0.0
            if remaining <= 0:
                raise TimeoutError(f"no message from ordered consumer on {self.stream!r} within {wait} s")
            got = self.fetch(1, max_wait=remaining)
            if got:
                return got[0]

    def messages(self, max_messages: int = 500, expires: float = 30.0, heartbeat: float | None = None,
                 error_cb: ErrorHandler | None = None, max_bytes: int | None = None) -> OrderedMessages:
        """Iterate every message in order, healing the consumer underneath as needed.

        ``max_bytes`` bounds what is requested ahead by size instead of count
        (for large messages such as object chunks).
        """
        self._cancel.clear()
        self._ensure()
        return OrderedMessages(self, max_messages, expires, heartbeat, error_cb, max_bytes)

    def consume(self, handler: Callable[[Msg], None], max_messages: int = 500, expires: float = 30.0,
                heartbeat: float | None = None, error_cb: ErrorHandler | None = None) -> ConsumeContext:
        """Call ``handler(msg)`` for each message in order, on a thread of its own."""
        it = self.messages(max_messages, expires, heartbeat, error_cb)
        return ConsumeContext(it, handler, error_cb, f"ordered-{self.stream}")

    def delete(self) -> None:
        """Delete the current server-side consumer (it would expire on its own)."""
        if self.name is not None:
            try:
                self._js.delete_consumer(self.stream, self.name, timeout=1.0)
            except NatsError:
                pass

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream} at stream seq {self._stream_seq}>"


class OrderedMessages(MessagesContext):
    """:class:`MessagesContext` for an ordered consumer: checks sequences, resets on doubt."""

    def __init__(self, oc: OrderedConsumer, max_messages: int, expires: float, heartbeat: float | None,
                 error_cb: ErrorHandler | None, max_bytes: int | None = None):
        self._oc = oc
        super().__init__(oc, max_messages, max_bytes, expires, heartbeat, error_cb=error_cb,  # type: ignore[arg-type]
                         on_message=self._check, on_reset=self._reset)

    def _check(self, msg: Msg) -> bool:
        verdict = self._oc._accept(msg)
        if verdict == "gap":
            self._needs_reset = True
        return verdict == "ok"

    def _reset(self) -> None:
        # A new inbox first: nothing for the old consumer can reach us after this.
        old = self._sub
        self._inbox = self._nc.new_inbox()
        self._sub = self._nc._subscribe_internal(self._inbox)
        _release(old)
        self._oc._recreate()
        self._last_activity = time.monotonic()

    def stop(self) -> None:
        self._oc._cancel.set()  # cut short a re-creation back-off
        super().stop()

    def __iter__(self) -> Iterator[Msg]:
        return super().__iter__()
