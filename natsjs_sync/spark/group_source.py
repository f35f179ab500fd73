"""A streaming read of a partitioned consumer group: the query is one member of the group.

::

    (spark.readStream.format("jetstream").option("servers", url).option("stream", "ORDERS")
     .option("consumerGroup", "billing").option("groupMember", "spark-1").load())

The driver is the member. When the query starts, the reader starts the
member's consume (:func:`~natsjs_sync.pcgroups.elastic_consume` or
:func:`~natsjs_sync.pcgroups.static_consume`, explicit acks) in the driver's
Python process; its handler only notes each message delivered (stream
sequence, partition, the message to ack later) and never acks. A timer sends
``in_progress`` for every message held, every ``ack_wait / 2``, so nothing is
redelivered while Spark works. Each micro-batch takes what was delivered (at
most ``maxMessagesPerTrigger``); its offset is a batch number and, per group
partition, the stream sequences as ranges. One Spark task reads one group
partition's sequences, in order, by batched direct get with the partition's
subject filter (per-sequence ``STREAM.MSG.GET`` on a stream without direct
access): the executors never touch the consumer. A batch's messages are acked
when Spark is done with it: in ``commit`` or, for the query's last batch
(Spark commits a source only when it plans the next batch), when Spark asks
for the batch after it.

Delivery is at least once. A query restarted from its checkpoint replays a
planned batch from the same offsets (the same sequences are read again); the
messages that batch holds come back from the consumer (they were not acked)
and are not planned a second time, but acked when that batch is done. A
message is delivered twice only when the group moves its partition to another
member while it is held, or when its ack is lost.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .. import pcgroups
from ..errors import ConnectionClosedError, MsgAlreadyAckdError, MsgNotFoundError, NatsError
from ..jetstream import ConsumerConfig, JetStream
from ..msg import Msg
from ..pcgroups.config import DEFAULT_ACK_WAIT
from .options import ReadOptions
from .ranges import iter_range, reads_directly
from .retry import ride_out

__all__ = ["GroupPartition", "GroupStreamReader", "check_group", "group_read_stream"]

log = logging.getLogger("natsjs_sync.spark")

#: Messages a member holds at most (delivered, not yet acked) without ``maxMessagesPerTrigger``:
#: the consumer's ``max_ack_pending``, so the server stops delivering rather than the driver buffering.
_HELD = 10_000
_PULL = 4000  # messages per batched direct get request


def group_read_stream(ro: ReadOptions) -> str:
    """The stream the member's consumer reads: ``<stream>-<group>`` (elastic) or the stream (static)."""
    g = ro.group
    assert g is not None
    stream = ro.streams[0]
    return pcgroups.compose_group_stream_name(stream, g.group) if g.kind == "elastic" else stream


def check_group(ro: ReadOptions) -> None:
    """What only the server can tell about a group read, checked before anything is made.

    Raises:
        ValueError: the server is older than 2.11, or (static groups) ``groupMember``
            is not in the group's membership.
        ConsumerGroupNotFoundError: no such group on the stream (naming 'consumerGroup').
    """
    g = ro.group
    assert g is not None
    cfg = ro.cfg
    js = cfg.jetstream()
    if not js.supports("priority_groups"):
        raise ValueError(f"option 'consumerGroup' needs nats-server 2.11 or newer (priority groups with pinned "
                         f"clients); the server is {js.server_version or 'older'}")
    stream = ro.streams[0]
    try:
        if g.kind == "static":
            config = ride_out(cfg, lambda: pcgroups.get_static_config(js, stream, g.group))
            if not config.is_in_membership(g.member):
                raise ValueError(f"option 'groupMember': {g.member!r} is not a member of static consumer group "
                                 f"{g.group!r} on stream {stream!r}")
        else:
            elastic = ride_out(cfg, lambda: pcgroups.get_elastic_config(js, stream, g.group))
            if not elastic.is_in_membership(g.member):  # allowed: it joins when added
                log.warning("member %r is not (yet) in elastic consumer group %r on stream %r: the query reads "
                            "nothing until it is added", g.member, g.group, stream)
    except pcgroups.ConsumerGroupNotFoundError as exc:
        raise pcgroups.ConsumerGroupNotFoundError(
            f"option 'consumerGroup': no {g.kind} consumer group {g.group!r} on stream {stream!r} "
            "(option 'groupKind' says which kind)") from exc


# ---------------------------------------------------------------------- offsets

def _ranges(seqs: Sequence[int]) -> list[list[int]]:
    """Sorted sequences as ``[[first, last], ...]`` runs."""
    out: list[list[int]] = []
    for s in seqs:
        if out and out[-1][1] == s - 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _offset(batch: int, content: dict[int, list[int]]) -> dict[str, Any]:
    return {"batch": batch, "partitions": {str(p): _ranges(sorted(seqs)) for p, seqs in sorted(content.items())}}


def _content(offset: dict[str, Any]) -> tuple[int, dict[int, list[int]]]:
    """An offset's batch number and its sequences by partition."""
    out: dict[int, list[int]] = {}
    for p, runs in (offset.get("partitions") or {}).items():
        out[int(p)] = [s for lo, hi in runs for s in range(int(lo), int(hi) + 1)]
    return int(offset.get("batch", 0)), out


# ---------------------------------------------------------------------- the member (driver)

class _Member:
    """The query's member instance and the messages it holds, on the driver.

    Thread-safe: the handler runs on the client's dispatcher, the timer on its
    own thread, Spark's calls on the runner's thread; one lock guards the state.
    """

    def __init__(self, ro: ReadOptions) -> None:
        g = ro.group
        assert g is not None
        self.ro = ro
        self.group = g
        self.stream = group_read_stream(ro)
        self._lock = threading.Condition()
        #: Delivered, not in any batch: seq -> (partition, message).
        self._buffer: dict[int, tuple[int, Msg]] = {}
        #: Planned, not done: batch -> seq -> (partition, message or None when not (yet) delivered here).
        self._batches: dict[int, dict[int, tuple[int, Msg | None]]] = {}
        self._seq_batch: dict[int, int] = {}
        #: Sequences of batches done before this process had their messages: acked when they come.
        self._done_waiting: set[int] = set()
        self._to_ack: list[Msg] = []
        self.batch = 0  # the last batch number handed out or seen
        self._done_upto = 0
        self._cutoff: int | None = None  # Trigger.AvailableNow: the last sequence to take
        self._stop = threading.Event()
        self._ctx: pcgroups.ConsumerGroupConsumeContext | None = None
        self._timer: threading.Thread | None = None
        self._js: JetStream | None = None  # the member's, from start(): its connection's end ends the member
        ack_wait = g.ack_wait or DEFAULT_ACK_WAIT
        self.ack_wait = ack_wait
        self.max_held = max(_HELD, 2 * (ro.max_per_trigger or 0))

    # -------------------------------------------------------------- life

    def start(self) -> None:
        """Start consuming as the member, and the in-progress timer.

        Raises:
            ConsumerGroupNotFoundError: the group is gone.
            MemberNotInGroupError: (static) the member is no longer named by the group.
        """
        g, js = self.group, self.ro.cfg.jetstream()
        self._js = js
        template = ConsumerConfig(ack_policy="explicit", ack_wait=self.ack_wait, max_ack_pending=self.max_held)
        consume = pcgroups.elastic_consume if g.kind == "elastic" else pcgroups.static_consume
        self._ctx = consume(js, self.ro.streams[0], g.group, g.member, self._on_msg, template,
                            error_cb=self._on_error, keep_partition=True)
        self._timer = threading.Thread(target=self._keep_alive, name=f"natsjs-spark-group-{g.member}", daemon=True)
        self._timer.start()

    def stop(self) -> None:
        """Stop consuming; what is held and not acked is redelivered after the ack wait."""
        self._stop.set()
        ctx = self._ctx
        if ctx is not None:
            ctx.stop()
        t = self._timer
        if t is not None:
            t.join(5.0)
        self._send_acks()

    def check(self) -> None:
        """Raise why the member stopped on its own (the group's config changed, the group was deleted).

        A member that ended without an error (the group's deletion) would
        otherwise leave the query planning empty batches for ever.

        Raises:
            ConsumerGroupNotFoundError: the group was deleted.
            ConnectionClosedError: the member's connection was closed (``close_clients``, or its
                reconnect attempts ran out).
            ConsumerGroupError: the member stopped for another reason (that error).
        """
        ctx = self._ctx
        if ctx is None or not ctx.done.is_set() or self._stop.is_set():
            return
        if ctx.error is not None:
            raise ctx.error
        g = self.group
        nc = self._js.nc if self._js is not None else None
        if nc is not None and nc.is_closed:  # the member's watch ended with its connection, not the group
            raise ConnectionClosedError(
                f"the connection of consumer group {g.group!r} member {g.member!r} (this query) was closed "
                f"({nc.last_error!r}): the member has stopped")
        raise pcgroups.ConsumerGroupNotFoundError(
            f"{g.kind} consumer group {g.group!r} on stream {self.ro.streams[0]!r} was deleted: member "
            f"{g.member!r} (this query) has stopped")

    def _on_error(self, exc: Exception) -> None:
        log.warning("consumer group %s member %s: %r", self.group.group, self.group.member, exc)

    # -------------------------------------------------------------- delivery (dispatcher thread)

    def _on_msg(self, msg: Msg) -> None:
        """Note a delivered message; never acks (that waits for Spark)."""
        seq = msg.metadata.sequence.stream
        token = msg.subject.partition(".")[0]
        partition = int(token) if token.isdigit() else 0
        with self._lock:
            if seq in self._done_waiting:  # its batch is done: ack it, do not plan it again
                self._done_waiting.discard(seq)
                self._to_ack.append(msg)
            elif seq in self._seq_batch:  # planned already (a redelivery): acked with its batch
                self._batches[self._seq_batch[seq]][seq] = (partition, msg)
            else:  # new, or redelivered while buffered: the newest delivery is the one to ack
                self._buffer[seq] = (partition, msg)
            self._lock.notify_all()

    # -------------------------------------------------------------- the timer

    def _consumer_name(self) -> str:
        g = self.group
        return g.member if g.kind == "elastic" else pcgroups.compose_static_consumer_name(g.group, g.member)

    def _keep_alive(self) -> None:
        """Every ``ack_wait / 2``: ``in_progress`` for every held message, the acks due, and the
        sequences waited for that the consumer's ack floor has passed forgotten."""
        while not self._stop.wait(max(self.ack_wait / 2, 0.2)):
            self._send_acks()
            self._forget_acked()
            with self._lock:
                held = [m for _, m in self._buffer.values()]
                held += [m for b in self._batches.values() for _, m in b.values() if m is not None]
            for m in held:
                try:
                    m.in_progress()
                except MsgAlreadyAckdError:
                    pass
                except NatsError as exc:  # a reconnect: the next round tries again
                    log.debug("in_progress failed: %r", exc)
                    break

    def _forget_acked(self) -> None:
        """Drop the sequences of done batches, waited for to ack them, that the consumer will not deliver.

        A done batch's message not delivered here yet is waited for (to be
        acked on arrival); one acked already (by the query's run before this
        one) or taken by another member never comes. Everything up to the
        consumer's ack floor is acked, so those are forgotten: the set does
        not grow with every restart and every partition moved away.
        """
        with self._lock:
            if not self._done_waiting:
                return
        try:
            info = self.ro.cfg.jetstream().consumer(self.stream, self._consumer_name(),
                                                    timeout=min(2.0, self.ro.cfg.timeout)).cached_info
        except NatsError as exc:  # not made yet, or a reconnect: the next round asks again
            log.debug("consumer info for the acked floor failed: %r", exc)
            return
        floor = info.ack_floor.stream_seq
        with self._lock:
            self._done_waiting = {s for s in self._done_waiting if s > floor}

    def _send_acks(self) -> None:
        """Send the acks due, on the member's connection (the one the messages came in on), and flush it.

        Never raises: an ack that cannot be sent (the connection closed) leaves
        its message to be redelivered after the ack wait; :meth:`check` then
        says why the member stopped.
        """
        with self._lock:
            msgs, self._to_ack = self._to_ack, []
        if not msgs:
            return
        for i, m in enumerate(msgs):
            try:
                m.ack()
            except MsgAlreadyAckdError:
                pass
            except NatsError as exc:
                log.warning("%d ack(s) of consumer group %s not sent (redelivered after the ack wait): %r",
                            len(msgs) - i, self.group.group, exc)
                return
        js = self._js
        try:
            (js.nc if js is not None else self.ro.cfg.client()).flush(self.ro.cfg.timeout)
        except NatsError as exc:  # not confirmed: the server redelivers, and the message is acked then
            log.warning("acks of consumer group %s not confirmed: %r", self.group.group, exc)

    # -------------------------------------------------------------- Spark's calls

    def planned(self, offset: dict[str, Any]) -> None:
        """A batch Spark planned (maybe in an earlier run of the query): its messages are not planned again."""
        batch, content = _content(offset)
        with self._lock:
            self.batch = max(self.batch, batch)
            if batch <= self._done_upto or batch in self._batches:
                return
            entries: dict[int, tuple[int, Msg | None]] = {}
            for p, seqs in content.items():
                for s in seqs:
                    held = self._buffer.pop(s, None)
                    entries[s] = (p, held[1] if held is not None else None)
                    self._seq_batch[s] = batch
            self._batches[batch] = entries

    def done(self, offset: dict[str, Any]) -> None:
        """Spark is done with the batches up to ``offset``: ack their messages (those not here yet on arrival)."""
        batch, content = _content(offset)
        with self._lock:
            self.batch = max(self.batch, batch)
            if batch <= self._done_upto:
                return
            if batch not in self._batches:  # done in an earlier run of the query
                self._batches[batch] = {s: (p, None) for p, seqs in content.items() for s in seqs}
            for b in [b for b in self._batches if b <= batch]:
                for s, (_p, m) in self._batches.pop(b).items():
                    self._seq_batch.pop(s, None)
                    held = self._buffer.pop(s, None)
                    m = m or (held[1] if held is not None else None)
                    if m is None:
                        self._done_waiting.add(s)
                    else:
                        self._to_ack.append(m)
            self._done_upto = batch
        self._send_acks()

    def take(self, limit: int | None) -> dict[str, Any] | None:
        """The next batch's offset: up to ``limit`` buffered messages, lowest sequences first; None: nothing."""
        with self._lock:
            seqs = sorted(s for s in self._buffer if self._cutoff is None or s <= self._cutoff)
            if limit is not None:
                seqs = seqs[:limit]
            if not seqs:
                return None
            self.batch += 1
            entries: dict[int, tuple[int, Msg | None]] = {}
            content: dict[int, list[int]] = {}
            for s in seqs:
                p, m = self._buffer.pop(s)
                entries[s] = (p, m)
                content.setdefault(p, []).append(s)
                self._seq_batch[s] = self.batch
            self._batches[self.batch] = entries
            return _offset(self.batch, content)

    def cut_off(self, timeout: float) -> None:
        """Trigger.AvailableNow: wait (at most ``timeout``) until what the consumer had pending has been
        delivered here, then take nothing delivered after that."""
        deadline = time.monotonic() + timeout
        js, name = self.ro.cfg.jetstream(), self._consumer_name()
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                # One request per round, bounded by what is left of the wait.
                left = max(0.05, min(2.0, self.ro.cfg.timeout, deadline - time.monotonic()))
                info = js.consumer(self.stream, name, timeout=left).cached_info
            except NatsError:  # not made yet (the member is joining)
                info = None
            if info is not None and info.num_pending == 0:
                with self._lock:
                    held = len(self._buffer) + sum(
                        1 for b in self._batches.values() for _, m in b.values() if m is not None)
                if held >= info.num_ack_pending:
                    break
            with self._lock:
                self._lock.wait(0.2)
        with self._lock:
            self._cutoff = max(self._buffer, default=0)
            self._cutoff = max([self._cutoff, *self._seq_batch])


# ---------------------------------------------------------------------- executors

@dataclass
class GroupPartition(InputPartition):
    """One group partition's share of a micro-batch: its sequences (runs) of ``stream``, read in order."""

    stream: str
    partition: int
    runs: list[list[int]]
    direct: bool
    #: Missing messages fail the read (static groups with failOnDataLoss); else they are skipped.
    strict: bool = False


_RowTuple = tuple[str, int, int, Any, bytes]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _group_rows(ro: ReadOptions, part: GroupPartition) -> Iterator[_RowTuple]:
    """The partition's listed messages, in sequence order, subjects without the partition token.

    Raises:
        DataLossError: a listed message is gone and ``part.strict``.
    """
    from .datasource import DataLossError

    wanted = {s for lo, hi in part.runs for s in range(lo, hi + 1)}
    if not wanted:
        return
    rows: Iterator[_RowTuple]
    if part.direct:
        rows = iter_range(ro.cfg, part.stream, part.runs[0][0], part.runs[-1][1], [f"{part.partition}.>"],
                          batch=_PULL, direct=True)
    else:
        rows = _get_each(ro, part.stream, sorted(wanted))
    found = 0
    for subject, seq, ts_us, headers, data in rows:
        if seq in wanted:
            found += 1
            yield pcgroups.strip_partition(subject), seq, ts_us, headers, data
    if found < len(wanted):
        what = f"stream {part.stream!r}: {len(wanted) - found} message(s) of partition {part.partition} are gone"
        if part.strict:
            raise DataLossError(f"{what} (set failOnDataLoss=false to skip them)")
        log.warning("%s (taken by another member after a rebalance, or removed): skipped", what)


def _get_each(ro: ReadOptions, stream: str, seqs: list[int]) -> Iterator[_RowTuple]:
    """Each sequence by ``STREAM.MSG.GET`` (a stream without direct access); missing ones left out."""
    st = ride_out(ro.cfg, lambda: ro.cfg.jetstream().stream(stream))
    for s in seqs:
        try:
            m = ride_out(ro.cfg, lambda s=s: st.get_msg(s))  # type: ignore[misc]
        except MsgNotFoundError:
            continue
        t = m.time or _EPOCH
        ts_us = (t - _EPOCH) // datetime.timedelta(microseconds=1)
        yield m.subject, m.seq, ts_us, m.headers, m.data


# ---------------------------------------------------------------------- the reader

class GroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader of a group read. Offsets: ``{"batch": n, "partitions": {"p": [[first, last], ...]}}``.

    Made both in the driver's runner (which calls offsets, partitions and
    commit, and holds the member) and where Spark plans the read (which only
    ships :meth:`read` to the executors): the member starts on the first of
    Spark's calls on the driver, never when the reader is made.
    """

    def __init__(self, ro: ReadOptions) -> None:
        self.ro = ro
        self._member: _Member | None = None
        self._direct: bool | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"ro": self.ro, "_member": None, "_direct": self._direct}

    def _m(self) -> _Member:
        m = self._member
        if m is None:
            m = self._member = _Member(self.ro)
        return m

    def _running(self) -> _Member:
        m = self._m()
        if m._ctx is None:
            m.start()
        m.check()
        return m

    def initialOffset(self) -> dict[str, Any]:
        """Batch 0, empty: where the member starts is the group's business (what it has not acked)."""
        return {"batch": 0, "partitions": {}}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerTrigger`` per micro-batch, else everything delivered."""
        return ReadMaxRows(self.ro.max_per_trigger) if self.ro.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Start the member and wait (at most ``timeout``) for what its consumer has pending:
        the query then reads what was delivered by then."""
        self._running().cut_off(self.ro.cfg.timeout)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch: what the member was delivered and is in no batch (``start`` when nothing).

        Raises:
            ConsumerGroupError: the member stopped on its own (the group's config changed).
        """
        m = self._m()
        # Spark plans a batch only once the one before (``start``) is done, and
        # commits a source only when it plans the next one: the batch ``start``
        # ends is done now (its messages are acked), even when none follows.
        m.done(start)
        m = self._running()
        taken = m.take(limit.max_rows if isinstance(limit, ReadMaxRows) else None)
        return start if taken is None else taken

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One task per group partition of the batch ``end`` (a batch replayed after a restart too)."""
        m = self._m()
        m.planned(end)  # first, so that a replayed batch's messages are not taken again
        self._running()
        if self._direct is None:
            js = self.ro.cfg.jetstream()
            self._direct = reads_directly(js, ride_out(self.ro.cfg, lambda: js.stream(m.stream)).cached_info)
        strict = self.ro.fail_on_data_loss and m.group.kind == "static"
        return [GroupPartition(m.stream, int(p), [list(r) for r in runs], self._direct, strict)
                for p, runs in sorted((end.get("partitions") or {}).items(), key=lambda kv: int(kv[0]))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """A task's rows (on an executor): Arrow record batches of the partition's messages.

        Raises:
            DataLossError: a message of a static group's batch is gone (with ``failOnDataLoss``).
        """
        if not isinstance(partition, GroupPartition):
            return
        from .reader import _batches

        yield from _batches(self.ro, partition, _group_rows(self.ro, partition))  # type: ignore[arg-type]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark is done with the batches up to ``end``: their messages are acked."""
        self._m().done(end)

    def stop(self) -> None:
        """Stop the member; what it holds unacked is delivered again after the ack wait."""
        m = self._member
        if m is not None:
            m.stop()
