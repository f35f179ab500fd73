"""Fast-ingest batch publish (ADR-50, server 2.14+): flow-controlled, not atomic.

Against a real server: every message stored once and in order, the server's
flow acks pacing the publisher, a gap or a failed check ending the batch with
``gap="fail"`` and reported but tolerated with ``gap="ok"``, and bad options
refused before anything is sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BatchPublishError, FeatureNotSupportedError
from natsjs_sync.jetstream import BatchGap, FastBatchPublisher, JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def batched(js: JetStream) -> Iterator[Stream]:
    """A memory stream ``B<nuid>`` on ``<name>.>`` that allows fast batches."""
    if not js.supports("fast_batch"):
        pytest.skip(f"fast batches need nats-server 2.14, this one is {js.server_version}")
    name = "B" + next_nuid()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_batched=True)
    yield st
    js.delete_stream(name)


def _stored(st: Stream) -> list[bytes]:
    n = st.info().state.messages
    return [st.get_msg(seq).data for seq in range(1, n + 1)]


def test_a_batch_is_paced_by_flow_acks_and_stores_every_message_in_order(js: JetStream, batched: Stream) -> None:
    subject = f"{batched.name}.x"
    batch = js.fast_batch(flow=10, timeout=10)
    acks = [batch.add(subject, b"%d" % i, headers={"i": str(i)}) for i in range(1, 251)]
    assert [a.batch_sequence for a in acks] == list(range(1, 251))
    # The window holds: never more than max_outstanding_acks (2) flows of 10 unacknowledged.
    assert all(a.batch_sequence - a.ack_sequence < 2 * 10 for a in acks)
    assert acks[-1].ack_sequence > 0
    ack = batch.commit(subject, b"251")
    assert ack.batch_id == batch.batch_id and ack.batch_size == 251 and ack.stream == batched.name
    assert batch.done and batch.result == ack and batch.gaps == [] and batch.errors == []
    assert _stored(batched) == [b"%d" % i for i in range(1, 252)]
    assert batched.get_msg(7).header("i") == "7"
    with pytest.raises(BatchPublishError, match="over"):
        batch.add(subject, b"late")


def test_leaving_the_block_commits_without_a_final_message(js: JetStream, batched: Stream) -> None:
    with js.fast_batch(batch_id="rows-1") as batch:
        for i in range(30):
            batch.add(f"{batched.name}.{i % 3}", b"r%d" % i)
    assert batch.result is not None and batch.result.batch_size == 30 and batch.result.batch_id == "rows-1"
    assert _stored(batched) == [b"r%d" % i for i in range(30)]
    # An exception in the block abandons the batch: what was sent is stored, nothing more.
    with pytest.raises(RuntimeError), js.fast_batch() as batch:
        batch.add(f"{batched.name}.x", b"kept")
        raise RuntimeError("boom")
    assert batch.done and batched.info().state.messages == 31


def test_a_failed_check_ends_a_fail_mode_batch_with_what_was_stored(js: JetStream, batched: Stream) -> None:
    subject = f"{batched.name}.x"
    batch = js.fast_batch(flow=100)
    for i in range(5):
        batch.add(subject, b"%d" % i)
    batch.add(subject, b"wrong", expected_last_seq=1)  # the stream holds 5 by now: refused
    with pytest.raises(BatchPublishError) as info:
        for _ in range(5):
            batch.add(subject, b"after")
        batch.commit(subject, b"end")
    assert info.value.err_code == 10071
    assert isinstance(info.value, nats.WrongLastSequenceError)  # the class a single publish's check raises
    assert batch.done and batch.result is not None and batch.result.batch_size == 5
    assert [seq for seq, _ in batch.errors] == [6]
    assert isinstance(batch.errors[0][1], nats.JetStreamError) and batch.errors[0][1].err_code == 10071
    assert _stored(batched) == [b"%d" % i for i in range(5)]


def test_gap_ok_reports_gaps_and_failed_checks_and_goes_on(js: JetStream, batched: Stream) -> None:
    subject = f"{batched.name}.x"
    batch = js.fast_batch(flow=5, gap="ok")
    batch.add(subject, b"1")
    batch.add(subject, b"2")
    batch._seq += 2  # messages 3 and 4 never reach the stream
    batch.add(subject, b"5")
    batch.add(subject, b"6", expected_last_seq=1)
    ack = batch.commit(subject, b"7")
    assert batch.gaps == [BatchGap(3, 4)]
    assert [seq for seq, _ in batch.errors] == [6]
    assert ack.batch_size is not None and _stored(batched) == [b"1", b"2", b"5", b"7"]


def test_a_gap_ends_a_fail_mode_batch(js: JetStream, batched: Stream) -> None:
    subject = f"{batched.name}.x"
    batch = js.fast_batch(flow=5)
    batch.add(subject, b"1")
    batch._seq += 1  # message 2 is lost
    with pytest.raises(BatchPublishError, match="lost"):
        batch.add(subject, b"3")
        batch.commit(subject, b"4")
    assert batch.gaps == [BatchGap(2, 2)] and batch.result is not None and batch.result.batch_size == 1
    assert _stored(batched) == [b"1"]


def test_a_stream_without_allow_batched_refuses_the_batch(js: JetStream, stream: Stream) -> None:
    if not js.supports("fast_batch"):
        with pytest.raises(FeatureNotSupportedError, match=r"2\.14"):
            js.fast_batch()
        return
    batch = js.fast_batch()
    with pytest.raises(BatchPublishError) as info:
        batch.add(f"{stream.name}.x", b"x")
    assert info.value.err_code == 10205 and batch.done
    assert stream.info().state.messages == 0


@pytest.mark.parametrize("kwargs", [
    {"batch_id": "has.dot"}, {"batch_id": "x" * 65}, {"batch_id": ""}, {"flow": 0}, {"flow": 70000},
    {"flow": True}, {"max_outstanding_acks": 4}, {"gap": "maybe"}, {"timeout": -1}, {"timeout": "1"},
])
def test_bad_options_are_refused_before_anything_is_sent(js: JetStream, kwargs: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        js.fast_batch(**kwargs)  # type: ignore[arg-type]


def test_a_commit_needs_something_to_commit(js: JetStream, batched: Stream) -> None:
    batch = js.fast_batch()
    assert isinstance(batch, FastBatchPublisher)
    with pytest.raises(BatchPublishError, match="at least one"):
        batch.commit()
    with pytest.raises(ValueError):
        batch.commit(None, b"payload")
    assert batched.info().state.messages == 0
