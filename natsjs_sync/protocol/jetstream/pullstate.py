"""Continuous pulling's bookkeeping, without I/O: what outstanding pull requests still owe.

Every pull request asks for up to ``batch`` messages (or ``max_bytes``
bytes); what arrives counts down, and a request that ends early (408, 409)
says how much of it will never come. When what is still owed falls to the
threshold, it is time to ask for more.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The batch of a byte-bounded pull request (the byte limit is what bounds it).
BYTES_MODE_BATCH = 1_000_000

#: The longest duration the server takes: its durations are int64 nanoseconds.
MAX_NANOS = 2**63 - 1


def nanos(seconds: float) -> int:
    """A duration for the server (a pull request's ``expires``, ``idle_heartbeat``) in nanoseconds.

    Clamped to what the server's int64 takes: a longer one would make the server
    refuse the whole request instead of waiting as long as it can.

    Args:
        seconds: a number of seconds >= 0 (inf included).

    Returns:
        The nanoseconds, at most :data:`MAX_NANOS`.
    """
    if seconds * 1e9 >= MAX_NANOS:  # inf too: int(inf) would raise
        return MAX_NANOS
    return int(seconds * 1e9)


@dataclass(frozen=True)
class PullAsk:
    """The next pull request to send."""

    batch: int
    max_bytes: int | None


class PullAccounting:
    """Messages and bytes owed by outstanding pull requests. Not thread-safe.

    Args:
        max_messages: how many messages to keep asked for (default 500 without ``max_bytes``).
        max_bytes: how many bytes to keep asked for; with ``max_messages`` too, the
            messages are counted and each request is also capped at ``max_bytes`` (as nats.go's
            ``PullMaxMessagesWithBytesLimit``).
        threshold_messages, threshold_bytes: ask again when what is owed falls to this
            (default: half).
        stop_after: how many messages to hand out in all (nats.go's ``StopAfter``):
            never ask for more than that minus what was handed out and what is owed.
    """

    def __init__(self, max_messages: int | None = None, max_bytes: int | None = None,
                 threshold_messages: int | None = None, threshold_bytes: int | None = None,
                 stop_after: int | None = None):
        if max_messages is not None and max_messages < 1:
            raise ValueError("max_messages must be >= 1")
        if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after, int)
                                       or stop_after < 1):
            raise ValueError(f"stop_after must be an int >= 1, got {stop_after!r}")
        self.stop_after = stop_after
        self.handed_out = 0  #: messages given to the user (with ``stop_after``: counted against it)
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        self.max_bytes = max_bytes
        #: Both limits given: counted in messages; each request also carries the byte cap.
        self.both = max_bytes is not None and max_messages is not None
        #: Asking is driven by bytes (``max_bytes`` alone), else by messages.
        self.counts_bytes = bool(max_bytes) and not self.both
        if max_messages is None:
            max_messages = BYTES_MODE_BATCH if max_bytes else 500
        self.max_messages = max_messages
        self.threshold_messages = threshold_messages if threshold_messages is not None else self.max_messages // 2
        self.threshold_bytes = threshold_bytes if threshold_bytes is not None else (max_bytes or 0) // 2
        self.pending_msgs = 0
        self.pending_bytes = 0
        self.stopped = False  #: draining: ask for nothing more

    @property
    def finished(self) -> bool:
        """Every message of ``stop_after`` was handed out."""
        return self.stop_after is not None and self.handed_out >= self.stop_after

    def _budget(self) -> int | None:
        if self.stop_after is None:
            return None
        return self.stop_after - self.handed_out - self.pending_msgs

    def wants_more(self) -> bool:
        if self.stopped:
            return False
        budget = self._budget()
        if budget is not None and budget <= 0:
            return False
        if self.counts_bytes:
            return self.pending_bytes <= self.threshold_bytes
        return self.pending_msgs <= self.threshold_messages

    def ask(self) -> PullAsk:
        """The request that tops up what is owed (and count it as owed)."""
        budget = self._budget()
        if self.both:
            batch = self._capped(self.max_messages - self.pending_msgs, budget)
            self.pending_msgs += batch
            return PullAsk(batch, self.max_bytes)
        if self.max_bytes:
            want = self.max_bytes - self.pending_bytes
            batch = self._capped(self.max_messages, budget)
            self.pending_msgs += batch
            self.pending_bytes += want
            return PullAsk(batch, want)
        batch = self._capped(self.max_messages - self.pending_msgs, budget)
        self.pending_msgs += batch
        return PullAsk(batch, None)

    @staticmethod
    def _capped(batch: int, budget: int | None) -> int:
        return batch if budget is None else max(1, min(batch, budget))

    def handed(self) -> None:
        """One message went to the user."""
        self.handed_out += 1

    def delivered(self, size: int) -> None:
        self.pending_msgs -= 1
        self.pending_bytes -= size

    def ended(self, msgs: int, nbytes: int) -> None:
        """A request ended early: ``msgs``/``nbytes`` of it will never come."""
        self.pending_msgs = max(0, self.pending_msgs - msgs)
        self.pending_bytes = max(0, self.pending_bytes - nbytes)

    def reset(self) -> None:
        """The outstanding requests are gone (reconnect, missed heartbeats, new consumer)."""
        self.pending_msgs = 0
        self.pending_bytes = 0
