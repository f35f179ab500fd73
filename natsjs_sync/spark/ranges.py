"""Reading a range of a stream from an executor: :func:`read_range`, and :func:`iter_range` for the data source.

Both page through the stream by the one paging rule of
:mod:`natsjs_sync.jetstream.paging`: every page goes on after the last message
it received. They run with the process's shared client (``cfg.client()``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence

from ..jetstream import RawStreamMsg
from ..jetstream.paging import Removed, Row, read_range_rows, reads_directly
from ..protocol.headers import parse_headers
from .config import NatsConfig

__all__ = ["iter_range", "read_range", "reads_directly"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def read_range(cfg: NatsConfig, stream: str, start_seq: int = 1, end_seq: int | None = None,
               subjects: Sequence[str] | None = None, batch: int = 500, timeout: float | None = None
               ) -> Iterator[RawStreamMsg]:
    """The stream's messages with ``start_seq <= seq <= end_seq`` (to the current
    end when ``end_seq`` is None), optionally only on ``subjects``, in order.

    The range is read by batched direct get when the server (2.11 and newer)
    and the stream (``allow_direct``) allow it: no consumer, and any replica
    answers. Otherwise it is read with an ephemeral consumer whose messages are
    taken in bulk and checked in order. Either way each page goes on after the
    last message received (a server cuts pages short at its byte limits),
    nothing is left behind on the server and a repeat gives the same rows,
    which Spark's retries and speculative tasks need.

    Raises:
        NatsError: a failure that lasted ``cfg.retry_timeout``, or one that is not transient.
    """
    for subject, seq, ts_us, headers, data in iter_range(cfg, stream, start_seq, end_seq, subjects, batch, timeout):
        if isinstance(headers, bytes):
            headers = parse_headers(headers)[2]
        yield RawStreamMsg(subject=subject, seq=seq, data=data, headers=headers,
                           time=_EPOCH + datetime.timedelta(microseconds=ts_us), stream=stream)


def iter_range(cfg: NatsConfig, stream: str, start_seq: int = 1, end_seq: int | None = None,
               subjects: Sequence[str] | None = None, batch: int = 500, timeout: float | None = None,
               direct: bool | None = None, removed: Removed | None = None) -> Iterator[Row]:
    """:func:`read_range` as plain tuples ``(subject, seq, time in µs since the
    epoch, headers, data)``: what the data source turns into columns. The
    headers are None or the header block as received (``bytes``, not parsed:
    the caller parses what it needs).

    Args:
        direct: read by batched direct get (True) or through a consumer
            (False), as the caller already knows from the stream's info
            (:func:`reads_directly`); None asks the stream's leader.
        removed: called when messages still to give were removed while the range was read
            (see :func:`~natsjs_sync.jetstream.paging.read_range_rows`).

    Raises:
        NatsError: a failure that lasted ``cfg.retry_timeout``, or one that is not transient.
    """
    return read_range_rows(cfg.jetstream(), stream, start_seq, end_seq, subjects, batch=batch,
                           timeout=cfg.timeout if timeout is None else timeout,
                           retry_timeout=cfg.retry_timeout, direct=direct, removed=removed)
