"""The one back-off of natsjs_sync: exponential with a cap and random jitter.

Used for reconnect attempts on one server, ordered-consumer re-creation and
JetStream publish retries. Immutable and thread-safe: the attempt number is
the caller's; a shared :class:`random.Random` only draws the jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """``delay(attempt)`` = ``min(cap, base * factor ** (attempt - 1))`` plus up to ``jitter`` seconds.

    ``factor=1`` gives a constant wait (the reconnect wait of NATS clients).

    Args:
        base: the wait before the first retry, in seconds.
        cap: the longest wait, jitter excluded.
        factor: the growth per attempt.
        jitter: up to this many random seconds are added, so a crowd of clients
            does not retry in lockstep.
    """

    base: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0 or self.jitter < 0 or self.factor < 1:
            raise ValueError(f"invalid back-off {self!r}")

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry)."""
        exponent = max(0, min(attempt - 1, 64))
        wait = min(self.cap, self.base * self.factor**exponent)
        if self.jitter:
            wait += self.rng.uniform(0, self.jitter)
        return wait
