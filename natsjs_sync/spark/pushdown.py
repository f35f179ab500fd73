"""Filter pushdown for the ``jetstream`` batch read: ``where()`` as a narrower sequence range.

With ``spark.sql.python.filterPushdown.enabled``, Spark hands the batch reader
(:class:`~natsjs_sync.spark.reader.JetStreamPushdownReader`) the query's
filters; :func:`push_filters` records in a :class:`Narrowing` what filters on
``seq``, ``stream``, ``subject`` and ``timestamp`` let the read skip, and gives
back those Spark must still apply to the rows read. The reader turns the
narrowing into each stream's sequence range when it plans the partitions.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)


@dataclass
class Narrowing:
    """What pushed-down filters allow a batch read to skip."""

    seq_lo: int = 1
    seq_hi: int | None = None  #: inclusive
    streams: frozenset[str] | None = None
    subjects: tuple[str, ...] | None = None
    time_lo: datetime.datetime | None = None
    time_hi: datetime.datetime | None = None  #: inclusive
    nothing: bool = False  #: the filters contradict each other


def _aware(value: Any) -> datetime.datetime | None:
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.astimezone()  # Spark hands session-local naive times
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day).astimezone()
    return None


def _plain_subject(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not any(c in value for c in " *>") and ".." not in value \
        and not value.startswith(".") and not value.endswith(".")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _narrow_seq(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A filter on ``seq``: applied exactly by the range read (False), unless
    it is one the range cannot express (True: Spark applies it)."""
    if isinstance(f, In):
        if not f.value or not all(_is_int(v) for v in f.value):
            return True
        n.seq_lo = max(n.seq_lo, min(f.value))
        n.seq_hi = max(f.value) if n.seq_hi is None else min(n.seq_hi, max(f.value))
        return True  # the range holds more than the listed sequences
    if not _is_int(value):
        return True
    lo, hi = _SEQ_BOUNDS.get(type(f), (None, None))
    if lo is None and hi is None:
        return True
    if lo is not None:
        n.seq_lo = max(n.seq_lo, value + lo)
    if hi is not None:
        n.seq_hi = value + hi if n.seq_hi is None else min(n.seq_hi, value + hi)
    return False


#: Filter class -> (offset of the lowest sequence it admits, of the highest), from its value.
_SEQ_BOUNDS: dict[type, tuple[int | None, int | None]] = {
    EqualTo: (0, 0), GreaterThan: (1, None), GreaterThanOrEqual: (0, None),
    LessThan: (None, -1), LessThanOrEqual: (None, 0),
}


def _narrow_stream(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    if not isinstance(f, (EqualTo, In)):
        return True
    names = frozenset([f.value] if isinstance(f, EqualTo) else f.value)
    n.streams = names if n.streams is None else n.streams & names
    return False


def _narrow_subject(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A subject filter narrows the read when it names plain subjects or a
    ``x.`` prefix, and is always given back to Spark (a prefix matches more)."""
    if have_subjects or n.subjects is not None:
        return True
    if isinstance(f, EqualTo) and _plain_subject(value):
        n.subjects = (value,)
    elif isinstance(f, In) and f.value and all(_plain_subject(v) for v in f.value):
        n.subjects = tuple(sorted(set(f.value)))
    elif isinstance(f, StringStartsWith) and _plain_subject(value + "x") and value.endswith("."):
        n.subjects = (value + ">",)
    return True


def _narrow_time(n: Narrowing, f: Filter, value: Any, have_subjects: bool) -> bool:
    """A time bound narrows the read to sequences (:func:`.reader._seq_at_time`); Spark applies it
    again to the rows read.

    That re-check removes rows, it cannot bring back a row outside the range:
    the narrowing assumes, as the server's lookup by time does, that a stream's
    times never decrease as its sequences grow. A row stored after the server's
    clock stepped back, with a time inside the bounds but a sequence past the
    end of the stretch that reaches the bound, is not read; turn pushdown off
    (or filter on ``seq``) for a stream whose server clock stepped back.
    """
    t = _aware(value)
    if t is None:
        return True
    if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
        n.time_lo = t if n.time_lo is None else max(n.time_lo, t)
    elif isinstance(f, (LessThan, LessThanOrEqual)):
        n.time_hi = t if n.time_hi is None else min(n.time_hi, t)
    return True


_NARROWERS: dict[str, Callable[[Narrowing, Filter, Any, bool], bool]] = {
    "seq": _narrow_seq, "stream": _narrow_stream, "subject": _narrow_subject, "timestamp": _narrow_time,
}


def push_filters(n: Narrowing, filters: list[Filter], have_subjects: bool) -> Iterator[Filter]:
    """Narrow ``n`` by ``filters``; yield those Spark must still apply.

    Sequence and stream filters are applied exactly by the range read, so they
    are kept. Subject and time filters narrow the read and are given back to
    Spark too (a subject prefix matches more than its filter; a time bound, as
    a sequence, takes in a little more than the bound). Time filters assume
    the stream's times grow with its sequences (:func:`_narrow_time`).
    """
    for f in filters:
        attribute: tuple[str, ...] = getattr(f, "attribute", ())
        narrow = _NARROWERS.get(attribute[0]) if len(attribute) == 1 else None
        if narrow is None or narrow(n, f, getattr(f, "value", None), have_subjects):
            yield f
    if n.seq_hi is not None and n.seq_hi < n.seq_lo:
        n.nothing = True
    if n.streams is not None and not n.streams:
        n.nothing = True


__all__ = ["Narrowing", "push_filters"]
