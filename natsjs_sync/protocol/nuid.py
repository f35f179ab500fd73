"""NUID: fast unique ids for inboxes and message ids (no I/O, no locks).

A NUID is 22 base-62 characters: a 12-character random prefix and a
10-character sequence that grows by a random increment. Only the prefix comes
from the operating system's random source, and only when the sequence wraps, so
a new id costs a few integer operations.

Thread safety without a lock: the generator's state is one immutable tuple
swapped as a whole, and ``next()`` on an :func:`itertools.count` is atomic, so
two threads never get the same counter value from the same state.
"""

from __future__ import annotations

import itertools
import os
import random

DIGITS = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BASE = 62
PREFIX_LEN = 12
SEQ_LEN = 10
MAX_SEQ = BASE**SEQ_LEN
MIN_INC = 33
MAX_INC = 333
TOTAL_LEN = PREFIX_LEN + SEQ_LEN


def _fresh_state() -> tuple[bytes, int, int, itertools.count[int]]:
    rng = random.Random(os.urandom(16))
    prefix = bytes(DIGITS[b % BASE] for b in os.urandom(PREFIX_LEN))
    inc = rng.randrange(MIN_INC, MAX_INC)
    # Leave room for a long run before the sequence wraps.
    start = rng.randrange(MAX_SEQ // 2)
    return prefix, start, inc, itertools.count(1)


class NUID:
    """A generator of unique ids. Thread-safe (see the module docstring)."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = _fresh_state()

    def reset(self) -> None:
        """Pick a new random prefix (done automatically in a forked child)."""
        self._state = _fresh_state()

    def next(self) -> str:
        """Return a new 22-character id."""
        prefix, start, inc, counter = self._state
        seq = start + next(counter) * inc
        if seq >= MAX_SEQ:
            self._state = _fresh_state()
            return self.next()
        out = bytearray(SEQ_LEN)
        for i in range(SEQ_LEN - 1, -1, -1):
            seq, r = divmod(seq, BASE)
            out[i] = DIGITS[r]
        return (prefix + out).decode()


_GLOBAL = NUID()


def next_nuid() -> str:
    """Return a new id from the process-wide generator."""
    return _GLOBAL.next()


def new_inbox(prefix: str = "_INBOX") -> str:
    """Return a new unique inbox subject, ``<prefix>.<nuid>``."""
    return f"{prefix}.{_GLOBAL.next()}"


if hasattr(os, "register_at_fork"):
    # A forked child must not hand out the same ids as its parent.
    os.register_at_fork(after_in_child=_GLOBAL.reset)
