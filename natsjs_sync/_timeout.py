"""The one timeout rule of natsjs_sync.

Every blocking call takes ``timeout=`` in seconds and follows the same rule:

- a number ``>= 0``: wait at most that long, then raise :class:`~natsjs_sync.TimeoutError`;
- ``None`` or ``float("inf")``: wait for ever; so does any finite number at or
  above :data:`WAIT_MAX` (``threading.TIMEOUT_MAX``, about 292 years), the
  longest wait the platform accepts: ``1e12`` or ``10**20`` waits for ever
  instead of raising :class:`OverflowError` from deep inside a call that may
  already have sent its request;
- :data:`USE_DEFAULT` (the default of most calls): the documented default of
  that call (for JetStream calls, the context's ``timeout``);
- ``NaN``, a negative number, or anything that is not a number (``"1"``,
  ``True``): :class:`ValueError` or :class:`TypeError` at once, before
  anything is sent.

A public call turns its timeout into one :class:`Deadline` and spends it across
all of its steps: a call made of several requests (a paged listing, a
multi-chunk put, a publish with retries) never waits longer in all than its
``timeout``. Internal helpers take the :class:`Deadline`, not a number.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from typing import Final, Union


class _UseDefault:
    """Sentinel type: "use the documented default" (``None`` means "wait for ever")."""

    _instance: _UseDefault | None = None

    def __new__(cls) -> _UseDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_DEFAULT"  # pickles as the module-level singleton


USE_DEFAULT: Final = _UseDefault()
#: The first number of seconds that means "no limit": the longest wait
#: ``threading`` (locks, conditions, queues) accepts. Any smaller value is a
#: wait the platform can do.
WAIT_MAX: Final = threading.TIMEOUT_MAX
#: What a ``timeout=`` parameter takes. A :class:`Deadline` is accepted too: the
#: library passes its own deadline down through the calls a compound call makes.
TimeoutArg = Union[float, None, _UseDefault, "Deadline"]


def check_seconds(value: object, what: str = "timeout") -> float | None:
    """Validate a duration in seconds: ``None``, inf or ``>= WAIT_MAX`` -> ``None``
    (for ever), else a float >= 0 (below :data:`WAIT_MAX`).

    Raises:
        TypeError: not a real number (``bool`` and ``str`` included).
        ValueError: NaN or negative.
    """
    if value is None:
        return None
    cls = value.__class__
    if cls is float or cls is int:  # the common case: no ABC check
        number: float = value  # type: ignore[assignment]
        if 0 <= number < WAIT_MAX:
            return float(number)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float: only its sign matters
        seconds = -math.inf if value < 0 else math.inf
    if math.isnan(seconds):
        raise ValueError(f"{what} must be a number of seconds, not NaN")
    if seconds < 0:
        raise ValueError(f"{what} must be >= 0 or None, got {value!r}")
    if seconds >= WAIT_MAX:
        return None
    return seconds


def resolve(timeout: TimeoutArg, default: float | None) -> float | None:
    """The seconds to wait (``None``: for ever) for ``timeout`` under the rule above.

    Raises:
        TypeError, ValueError: see :func:`check_seconds`.
    """
    cls = timeout.__class__
    if cls is float or cls is int:  # the common case (a call in a loop): check_seconds inline
        if 0 <= timeout < WAIT_MAX:  # type: ignore[operator]
            return float(timeout)  # type: ignore[arg-type]
        return check_seconds(timeout)
    if timeout is USE_DEFAULT:
        # A default comes from a setting (a JetStream context's ``timeout``) that
        # may itself be huge: the same rule holds for it.
        return default if default is None or default < WAIT_MAX else None
    if isinstance(timeout, Deadline):
        return timeout.remaining()
    return check_seconds(timeout)


_new = object.__new__


class Deadline:
    """A point in monotonic time; ``remaining()`` is the budget still left.

    ``Deadline(None)`` never expires, nor does a deadline of :data:`WAIT_MAX`
    seconds or more (so :meth:`remaining` is always a wait the platform
    accepts). Thread-safe (it is never changed).
    """

    __slots__ = ("at",)

    def __init__(self, seconds: float | None):
        # Callers pass resolve()'s result, but a raw number must not make a
        # deadline whose remaining() no wait accepts either.
        self.at = None if seconds is None or seconds >= WAIT_MAX else time.monotonic() + seconds

    @classmethod
    def of(cls, timeout: TimeoutArg, default: float | None) -> Deadline:
        """The deadline of a public call's ``timeout`` argument (validated); a Deadline is itself."""
        c = timeout.__class__
        if c is float or c is int:
            # A number of seconds (a call in a loop): resolve() and __init__ inline, one Python call.
            if 0 <= timeout < WAIT_MAX:  # type: ignore[operator]
                deadline = _new(cls)
                deadline.at = time.monotonic() + timeout  # type: ignore[operator]
                return deadline
        elif isinstance(timeout, Deadline):
            return timeout
        return cls(resolve(timeout, default))

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no deadline."""
        at = self.at
        if at is None:
            return None
        left = at - time.monotonic()
        return left if left > 0.0 else 0.0

    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def min(self, seconds: float | None) -> float | None:
        """The smaller of what is left and ``seconds`` (``None``, or :data:`WAIT_MAX` and up, is unbounded)."""
        left = self.remaining()
        if seconds is None or seconds >= WAIT_MAX:
            return left
        return seconds if left is None else min(left, seconds)

    def __repr__(self) -> str:
        left = self.remaining()
        return "Deadline(never)" if left is None else f"Deadline({left:.3f} s left)"
