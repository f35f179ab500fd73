"""The streaming read of a ``jetstream`` source: micro-batches of new messages, offsets by sequence.

:class:`JetStreamStreamReader` keeps no state on the server: its offsets,
``{"streams": {name: {"next": first sequence not read, "created": stream
creation time}}}``, live in Spark's checkpoint. Each micro-batch is the range
from the last offset to the stream's end (shared among streams by
``maxMessagesPerTrigger``: :func:`_share`, held back by
``minMessagesPerTrigger`` up to ``maxTriggerDelay``), planned and read as the
batch read does (:mod:`natsjs_sync.spark.reader`). With ``failOnDataLoss``,
messages removed before they were read, or a stream deleted or recreated,
raise :class:`DataLossError` (:func:`~natsjs_sync.spark.data_loss.no_loss_at_start` checks a task's start).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from ..errors import StreamNotFoundError
from ..jetstream import StreamInfo
from .data_loss import DataLossError, no_loss_at_start
from .options import ReadOptions
from .ranges import reads_directly
from .reader import SequenceRange, _batches, _info, _not_found, _plan, _resolve, _rows
from .retry import ride_out


def _share(limit: int, avail: list[int]) -> list[int]:
    """``limit`` rows shared among streams in proportion to what each has, each getting at most its own."""
    total = sum(avail)
    if total <= limit:
        return list(avail)
    shares = [a * limit // total for a in avail]
    left = limit - sum(shares)
    for i, a in enumerate(avail):
        if left <= 0:
            break
        extra = min(a - shares[i], left)
        shares[i] += extra
        left -= extra
    return shares


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"streams": {name: {"next": first sequence not read, "created": stream creation time}}}``."""

    def __init__(self, ro: ReadOptions):
        self.ro = ro
        self._target: dict[str, int] | None = None
        self._last_trigger = time.monotonic()
        self._direct: dict[str, bool] = {}  # stream -> read by direct get, as of its last info

    @staticmethod
    def _created(info: StreamInfo) -> str:
        return info.created.isoformat() if info.created else ""

    def _maybe_info(self, stream: str) -> StreamInfo | None:
        cfg = self.ro.cfg
        try:
            return ride_out(cfg, lambda: cfg.jetstream().stream(stream).info())
        except StreamNotFoundError:
            return None

    @staticmethod
    def _streams_of(offset: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return dict(offset.get("streams") or {})

    def initialOffset(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for stream in self.ro.streams:
            info = _info(self.ro.cfg, stream)  # a stream that never existed: named, not "data loss"
            out[stream] = {"next": _resolve(self.ro.cfg, stream, self.ro.start[stream], info),
                           "created": self._created(info)}
        return {"streams": out}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.ro.max_per_trigger) if self.ro.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        target = {}
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            target[stream] = info.state.last_seq + 1 if info is not None else 0
        self._target = target

    def _continue_from(self, stream: str, pos: dict[str, Any] | None, info: StreamInfo | None) -> int | None:
        """The sequence to go on from in ``stream`` (None: the stream is gone and that is allowed)."""
        if pos is None:  # a stream added to the query since the checkpoint
            if info is None:
                raise _not_found(stream)
            return _resolve(self.ro.cfg, stream, self.ro.start[stream], info)
        nxt = int(pos["next"])
        created = pos.get("created") or ""
        if info is None:
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r} was deleted since the checkpoint (set failOnDataLoss=false "
                                    "to wait for it to come back)")
            return None
        if created and created != self._created(info):
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r} was recreated since the checkpoint (set failOnDataLoss=false "
                                    "to start over from its beginning)")
            return max(info.state.first_seq, 1)
        first = info.state.first_seq
        if info.state.messages and nxt < first:
            if self.ro.fail_on_data_loss:
                raise DataLossError(f"stream {stream!r}: messages {nxt}..{first - 1} were removed before they were "
                                    "read (set failOnDataLoss=false to skip them)")
            return first
        return nxt

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        known = self._streams_of(start)
        nexts: dict[str, int] = {}
        ends: dict[str, int] = {}
        created: dict[str, str] = {}
        js = self.ro.cfg.jetstream()
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            if info is not None:
                self._direct[stream] = reads_directly(js, info)
            nxt = self._continue_from(stream, known.get(stream), info)
            if nxt is None or info is None:
                if stream in known:
                    nexts[stream] = ends[stream] = int(known[stream]["next"])
                    created[stream] = known[stream].get("created") or ""
                continue
            end = info.state.last_seq + 1
            if self._target is not None:
                end = min(end, self._target.get(stream, end))
            nexts[stream], ends[stream], created[stream] = nxt, max(end, nxt), self._created(info)
        names = list(nexts)
        avail = [ends[s] - nexts[s] for s in names]
        if isinstance(limit, ReadMaxRows):
            avail = _share(limit.max_rows, avail)
        min_rows = self.ro.min_per_trigger
        if (min_rows is not None and self._target is None and sum(avail) < min_rows
                and time.monotonic() - self._last_trigger < self.ro.max_trigger_delay):
            return start  # not enough yet, and the delay has not passed: no batch now
        if sum(avail):
            self._last_trigger = time.monotonic()
        nexts = {s: nexts[s] + a for s, a in zip(names, avail, strict=True)}
        return {"streams": {s: {"next": nexts[s], "created": created[s]} for s in names}}

    def reportLatestOffset(self) -> dict[str, Any] | None:
        out = {}
        for stream in self.ro.streams:
            info = self._maybe_info(stream)
            if info is not None:
                out[stream] = {"next": info.state.last_seq + 1, "created": self._created(info)}
        return {"streams": out}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        known = self._streams_of(start)
        ranges: dict[str, tuple[int, int]] = {}
        for stream, pos in self._streams_of(end).items():
            first = int(known[stream]["next"]) if stream in known else None
            if first is None or (known[stream].get("created") or "") != (pos.get("created") or ""):
                nxt = self._continue_from(stream, known.get(stream), self._maybe_info(stream))
                if nxt is None:
                    continue
                first = nxt
            ranges[stream] = (first, int(pos["next"]) - 1)
        return _plan(self.ro, ranges, self.ro.subjects, self._reads_directly(ranges))

    def _reads_directly(self, ranges: dict[str, tuple[int, int]]) -> frozenset[str]:
        """The streams of ``ranges`` a micro-batch reads by direct get (the rest through consumers)."""
        js = self.ro.cfg.jetstream()
        direct = set()
        for stream, (first, last) in ranges.items():
            known = self._direct.get(stream)
            if known is None and first <= last:
                info = self._maybe_info(stream)
                known = info is not None and reads_directly(js, info)
            if known:
                direct.add(stream)
        return frozenset(direct)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, SequenceRange):
            return
        rows = _rows(self.ro, partition)
        if self.ro.fail_on_data_loss:
            rows = no_loss_at_start(self.ro, partition, rows)
        yield from _batches(self.ro, partition, rows)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing is held on the server: offsets live in Spark's checkpoint

    def stop(self) -> None:
        pass



__all__ = ["DataLossError", "JetStreamStreamReader"]
