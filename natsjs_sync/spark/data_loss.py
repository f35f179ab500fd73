"""Data loss on a read: messages a read was planned to give are gone before it read them.

Batch and streaming reads alike fix their ranges on the driver and read them
on executors later. Messages purged or expired in between would make the
read give fewer rows than planned without a word; with ``failOnDataLoss``
(the default) the task fails instead, naming the stream and the sequences.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import JetStreamError

if TYPE_CHECKING:
    from .options import ReadOptions
    from .reader import SequenceRange

__all__ = ["DataLossError", "no_loss_at_start"]

_RowTuple = tuple[str, int, int, Any, bytes]


class DataLossError(JetStreamError):
    """Messages a read still needed are gone (purged, expired, or the stream recreated)."""


def no_loss_at_start(ro: ReadOptions, part: SequenceRange, rows: Iterator[_RowTuple]) -> Iterator[_RowTuple]:
    """``rows``, once the first shows that the messages from ``part.start`` are still there.

    Only when the first row read is not ``part.start`` (or there is none) is
    the stream's leader asked for its first sequence: one request in that
    case, none per task otherwise (a thousand tasks asking at once would queue
    on the leader's JetStream API as consumer creations did). A message
    deleted on its own before the read was planned (the stream's first
    sequence is still at or before ``part.start``) is a gap, not a loss.

    Raises:
        DataLossError: the stream's first sequence is now past ``part.start``
            (messages purged or expired before they were read).
    """
    from .reader import _info

    first = next(rows, None)
    if first is None or first[1] > part.start:
        now_first = _info(ro.cfg, part.stream).state.first_seq
        if part.start < now_first:
            gone = f"{part.start}..{min(now_first - 1, part.end)}"
            raise DataLossError(f"stream {part.stream!r}: messages {gone} were removed before they were read "
                                "(set failOnDataLoss=false to read what is left)")
    if first is not None:
        yield first
        yield from rows
