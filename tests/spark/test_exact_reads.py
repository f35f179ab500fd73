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
