"""A batch read is exact or fails; written rows keep ids of their own.

A batch read fixes its ranges when the query is planned, on the driver, and its tasks read them later.
The tests below plan with the data source's reader and read each partition as a task does (the same
calls PySpark makes), with the stream purged in between.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer


@pytest.fixture
def js(spark_server: NatsServer) -> Iterator[JetStream]:
    nc = nats.connect(spark_server.url, name="exact-reads-test")
    yield nc.jetstream()
    nc.close()


def _purged_after_planning(server: NatsServer, js: JetStream, allow_direct: bool, fail: bool
                           ) -> tuple[list[Any], Any]:
    """A stream of 1,000 messages planned as a batch read of 3 partitions, then purged down to its
    last 400: the partitions and the reader that planned them."""
    from natsjs_sync.spark.options import read_options
    from natsjs_sync.spark.reader import JetStreamBatchReader

    name = "EX" + next_nuid()[-8:]
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_direct=allow_direct)
    for i in range(1_000):
        js.publish_async(f"{name}.{i % 3}", str(i).encode())
    js.publish_async_complete(timeout=30)
    options = {"servers": server.url, "stream": name, "minPartitions": "3", "retryTimeout": "2"}
    if not fail:  # failOnDataLoss is true by default
        options["failOnDataLoss"] = "false"
    ro = read_options(options, streaming=False)
    reader = JetStreamBatchReader(ro)
    parts = list(reader.partitions())  # the driver plans: the ranges are fixed now
    assert [(p.start, p.end) for p in parts] == [(1, 334), (335, 668), (669, 1_000)]
    js.stream(name).purge(keep=400)  # between planning and reading
    return parts, reader


def _rows(reader: Any, part: Any) -> list[int]:
    return [seq for batch in reader.read(part) for seq in batch.column("seq").to_pylist()]


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
def test_a_batch_read_of_messages_purged_after_planning_fails_naming_them(
        spark_server: NatsServer, js: JetStream, allow_direct: bool) -> None:
    from natsjs_sync.spark.datasource import DataLossError

    parts, reader = _purged_after_planning(spark_server, js, allow_direct, fail=True)
    with pytest.raises(DataLossError, match=r"messages 1\.\.334 were removed before they were read"):
        _rows(reader, parts[0])
    with pytest.raises(DataLossError, match=r"messages 335\.\.600 were removed before they were read"):
        _rows(reader, parts[1])
    assert _rows(reader, parts[2]) == list(range(669, 1_001))  # all of it still there


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
def test_a_batch_read_without_fail_on_data_loss_gives_what_is_left_of_its_ranges(
        spark_server: NatsServer, js: JetStream, allow_direct: bool) -> None:
    parts, reader = _purged_after_planning(spark_server, js, allow_direct, fail=False)
    assert [seq for p in parts for seq in _rows(reader, p)] == list(range(601, 1_001))


def test_a_batch_read_of_messages_deleted_before_planning_is_not_data_loss(
        spark_server: NatsServer, js: JetStream) -> None:
    from natsjs_sync.spark.options import read_options
    from natsjs_sync.spark.reader import JetStreamBatchReader

    name = "EX" + next_nuid()[-8:]
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_direct=True)
    for i in range(100):
        js.publish(f"{name}.{i % 2}", str(i).encode())
    st = js.stream(name)
    for seq in (40, 41, 42):
        st.delete_msg(seq)
    ro = read_options({"servers": spark_server.url, "stream": name, "subjects": f"{name}.1",
                       "startingSequence": "40"}, streaming=False)
    reader = JetStreamBatchReader(ro)
    (part,) = reader.partitions()
    assert _rows(reader, part) == list(range(44, 101, 2))  # starts on a gap and filters: rows, no error


def test_rows_whose_data_and_subject_run_together_keep_ids_of_their_own_across_a_retry(
        spark_server: NatsServer, js: JetStream) -> None:
    """Data ``q`` on ``<S>.<S>.a`` and data ``q<S>.`` on ``<S>.a``: data followed by subject is the same
    bytes. A task stored the first and failed; its retry sees both, the other one first."""
    import pyarrow as pa

    from natsjs_sync.spark.options import write_options
    from natsjs_sync.spark.writer import _write_batches

    name = "ID" + next_nuid()[-8:]
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", duplicate_window=600.0)
    one = (f"{name}.{name}.a", b"q")
    other = (f"{name}.a", f"q{name}.".encode())
    assert one[1] + one[0].encode() == other[1] + other[0].encode()

    def batch(*rows: tuple[str, bytes]) -> Iterator[Any]:
        return iter(pa.table({"subject": [r[0] for r in rows], "data": [r[1] for r in rows]}).to_batches())

    wo = write_options({"servers": spark_server.url}, streaming=False)
    first = _write_batches(wo, batch(one), "job-7")  # the attempt that failed after its first row
    retry = _write_batches(wo, batch(other, one), "job-7")
    assert (first.published, retry.published, retry.duplicates) == (1, 1, 1)
    st = js.stream(name)
    stored = sorted((m.subject, m.data) for m in (st.get_msg(s) for s in (1, 2)))
    assert stored == sorted([one, other])  # each row once
    assert st.info().state.messages == 2


def _read_task(server: NatsServer, name: str, fail: bool, subjects: str | None,
               meanwhile: Any, after: int = 30, ending: int | None = None) -> list[int]:
    """Plan one partition of ``name`` and read it as a task does (its rows, before Arrow), calling
    ``meanwhile()`` once ``after`` rows are read: the pages read ahead by then hold a few dozen."""
    from natsjs_sync.spark.data_loss import no_loss_at_start
    from natsjs_sync.spark.options import read_options
    from natsjs_sync.spark.reader import JetStreamBatchReader, _rows

    options = {"servers": server.url, "stream": name, "retryTimeout": "2"}
    if subjects:
        options["subjects"] = subjects
    if not fail:
        options["failOnDataLoss"] = "false"
    if ending is not None:
        options["endingSequence"] = str(ending)  # included
    ro = read_options(options, streaming=False)
    (part,) = JetStreamBatchReader(ro).partitions()
    seqs = []
    for row in no_loss_at_start(ro, part, _rows(ro, part)):
        seqs.append(row[1])
        if len(seqs) == after:
            meanwhile()
    return seqs


def _big_stream(js: JetStream, allow_direct: bool, count: int = 1_000) -> str:
    """``count`` messages of 3,000 bytes on ``<name>.0`` and ``<name>.1`` in turn: a page of the small
    pending server holds about twenty."""
    name = "EX" + next_nuid()[-8:]
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_direct=allow_direct)
    for i in range(count):
        js.publish_async(f"{name}.{i % 2}", b"x" * 3_000)
    js.publish_async_complete(timeout=30)
    return name


@pytest.mark.parametrize("filtered", [False, True], ids=["all subjects", "one subject"])
@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
def test_a_batch_read_of_messages_purged_while_it_reads_fails_naming_them(
        small_pending_server: NatsServer, allow_direct: bool, filtered: bool) -> None:
    """Pages are read one after another: a purge between two of them (after the task's first rows)
    removed 500 rows of the range without a word."""
    from natsjs_sync.spark.datasource import DataLossError

    with nats.connect(small_pending_server.url, name="exact-reads-test") as nc:
        js = nc.jetstream()
        name = _big_stream(js, allow_direct)
        subjects = f"{name}.0" if filtered else None
        with pytest.raises(DataLossError, match=r"messages \d+\.\.600 were removed while they were being read"):
            _read_task(small_pending_server, name, True, subjects, lambda: js.stream(name).purge(keep=400))
        js.delete_stream(name)
        name = _big_stream(js, allow_direct)
        subjects = f"{name}.0" if filtered else None
        got = _read_task(small_pending_server, name, False, subjects, lambda: js.stream(name).purge(keep=400))
        assert got[:30] == list(range(1, 60, 2) if filtered else range(1, 31))
        assert got[-200 if filtered else -400:] == list(range(601, 1_001, 2) if filtered else range(601, 1_001))
        js.delete_stream(name)


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
def test_a_batch_read_with_messages_deleted_and_written_past_its_range_meanwhile_is_exact(
        small_pending_server: NatsServer, allow_direct: bool) -> None:
    """Messages deleted on their own before planning are gaps; messages written, or deleted past the
    range's end, while it reads change the server's pending count: not a loss either."""
    with nats.connect(small_pending_server.url, name="exact-reads-test") as nc:
        js = nc.jetstream()
        name = _big_stream(js, allow_direct, 1_200)
        st = js.stream(name)
        for seq in range(40, 1_001, 37):
            st.delete_msg(seq)
        want = [s for s in range(1, 1_001) if s < 40 or (s - 40) % 37]

        def meanwhile() -> None:
            for seq in range(1_002, 1_201, 2):
                st.delete_msg(seq)  # past the range's end (1,000)
            for _ in range(50):
                js.publish(f"{name}.0", b"later")

        got = _read_task(small_pending_server, name, True, None, meanwhile, ending=1_000)
        assert got == want
        js.delete_stream(name)
