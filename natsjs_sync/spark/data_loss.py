"""Data loss on a read: messages a read was planned to give are gone before it read them.

Batch and streaming reads alike fix their ranges on the driver and read them
on executors later. Messages purged or expired in between, or while a task
reads, would make the read give fewer rows than planned without a word; with
``failOnDataLoss`` (the default) the task fails instead, naming the stream and
the sequences. A task checks its start (:func:`no_loss_at_start`) and, when the
server's count of messages still pending falls by more than the rows read
(:func:`removed_check`), the rest of its range.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import JetStreamError

if TYPE_CHECKING:
    from ..jetstream.paging import Removed
    from .options import ReadOptions
    from .reader import SequenceRange

__all__ = ["DataLossError", "no_loss_at_start", "removed_check"]

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


def removed_check(ro: ReadOptions, part: SequenceRange) -> Removed:
    """What a task's read calls when messages it was still to give were removed while it read
    (:func:`natsjs_sync.jetstream.paging.read_range_rows`'s ``removed``).

    The stream's leader is asked for its first sequence then (one request, only
    when the server's pending count says something went): as at a task's start,
    messages gone because the stream's first sequence moved past them
    (purged or expired) are a loss; a message deleted on its own is a gap.

    Raises:
        DataLossError: the stream's first sequence is now past ``seq``, the first not yet read.
    """
    from .reader import _info

    def check(seq: int) -> None:
        now_first = _info(ro.cfg, part.stream).state.first_seq
        if part.start <= seq < now_first and seq <= part.end:
            gone = f"{seq}..{min(now_first - 1, part.end)}"
            raise DataLossError(f"stream {part.stream!r}: messages {gone} were removed while they were being read "
                                "(set failOnDataLoss=false to read what is left)")

    return check
