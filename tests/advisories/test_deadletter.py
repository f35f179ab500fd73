"""Dead letters against a real server: one copy per message, whoever moves it and however often."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.advisories import (
    HEADER_CONSUMER,
    HEADER_DELIVERIES,
    HEADER_MISSING,
    HEADER_REASON,
    HEADER_SEQUENCE,
    HEADER_STREAM,
    HEADER_SUBJECT,
    HEADER_TERM_REASON,
    HEADER_TIME,
    AdvisoryFeed,
    DeadLetterOutcome,
    DeadLetterResult,
    DeadLetters,
    MaxDeliveriesAdvisory,
    TerminatedAdvisory,
    advisory_subjects,
)
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid
from tests.conftest import wait_until


@pytest.fixture
def dlq(js: JetStream) -> Iterator[DeadLetters]:
    """A dead-letter helper on a stream of its own (``DLQ<nuid>`` on ``dl<nuid>.>``), deleted afterwards."""
    nuid = next_nuid()
    helper = DeadLetters(js, "DLQ" + nuid, prefix="dl" + nuid)
    helper.create_stream(storage="memory")
    yield helper
    js.delete_stream(helper.stream)


def dead_messages(js: JetStream, dl: DeadLetters) -> int:
    return js.stream(dl.stream).info().state.messages


def nak_sync(nc: nats.Client, msg: nats.Msg) -> None:
    """NAK and wait for the server's confirmation (it answers an ack sent with a reply subject), so
    that a pull made after it finds the message over its max_deliver."""
    assert msg.reply
    nc.request(msg.reply, b"-NAK", timeout=5.0)


def kill_one(nc: nats.Client, js: JetStream, stream: Stream, how: str) -> MaxDeliveriesAdvisory | TerminatedAdvisory:
    """Publish a message with headers to ``stream``, make it dead (``nak`` with max_deliver 1, or ``term``),
    and return the advisory that says so."""
    kind = "max_deliver" if how == "nak" else "terminated"
    with AdvisoryFeed(nc, advisory_subjects((kind,), stream.name)) as feed:
        cons = stream.create_consumer(durable_name="C" + how, ack_policy="explicit", max_deliver=1)
        js.publish(f"{stream.name}.orders.1", b"payload", headers={"Trace": "t1", "Nats-Msg-Id": "order-1"})
        msg = cons.next(timeout=5.0)
        if how == "nak":
            nak_sync(nc, msg)
            # The server finds the message over its max_deliver (and says so) when it next looks for one to deliver.
            assert list(cons.fetch_no_wait(1)) == []
        else:
            msg.term(reason="bad order")
        adv = feed.next(timeout=10.0)
    assert isinstance(adv, (MaxDeliveriesAdvisory, TerminatedAdvisory))
    return adv


@pytest.mark.parametrize("how", ["nak", "term"])
def test_a_dead_message_is_copied_with_where_and_why(nc: nats.Client, js: JetStream, stream: Stream,
                                                     dlq: DeadLetters, how: str) -> None:
    adv = kill_one(nc, js, stream, how)
    result = dlq.move(adv)
    assert result == DeadLetterResult(outcome=DeadLetterOutcome.MOVED, stream=stream.name, stream_seq=1,
                                      subject=f"{dlq.prefix}.{stream.name}.1", dead_letter_seq=1)
    copy = js.stream(dlq.stream).get_msg(1)
    original = stream.get_msg(1)
    assert copy.data == b"payload" and copy.subject == f"{dlq.prefix}.{stream.name}.1"
    assert copy.header("Trace") == "t1"
    assert copy.header("Dead-Letter-Original-Nats-Msg-Id") == "order-1"  # not the dead-letter stream's own id
    assert copy.header(HEADER_STREAM) == stream.name and copy.header(HEADER_SEQUENCE) == "1"
    assert copy.header(HEADER_SUBJECT) == f"{stream.name}.orders.1"
    assert copy.header(HEADER_CONSUMER) == "C" + how and copy.header(HEADER_DELIVERIES) == "1"
    assert copy.header(HEADER_TIME) and original.time is not None
    if how == "nak":
        assert copy.header(HEADER_REASON) == "max_deliver" and copy.header(HEADER_TERM_REASON) is None
    else:
        assert copy.header(HEADER_REASON) == "terminated" and copy.header(HEADER_TERM_REASON) == "bad order"


def test_moving_again_or_after_a_restart_makes_no_second_copy(nc: nats.Client, js: JetStream, stream: Stream,
                                                              dlq: DeadLetters) -> None:
    adv = kill_one(nc, js, stream, "nak")
    assert dlq.move(adv).outcome is DeadLetterOutcome.MOVED
    assert dlq.move(adv).outcome is DeadLetterOutcome.ALREADY_MOVED
    restarted = DeadLetters(js, dlq.stream, prefix=dlq.prefix)  # a new process: nothing remembered
    again = restarted.move(adv)
    assert again.outcome is DeadLetterOutcome.ALREADY_MOVED and again.dead_letter_seq == 1
    assert dead_messages(js, dlq) == 1


def test_two_helpers_at_once_make_one_copy(nc: nats.Client, js: JetStream, stream: Stream,
                                           dlq: DeadLetters) -> None:
    adv = kill_one(nc, js, stream, "term")
    helpers = [DeadLetters(js, dlq.stream, prefix=dlq.prefix) for _ in range(4)]
    results: list[DeadLetterResult] = []
    start = threading.Barrier(len(helpers))

    def run(h: DeadLetters) -> None:
        start.wait(timeout=10.0)
        results.append(h.move(adv))

    threads = [threading.Thread(target=run, args=(h,)) for h in helpers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30.0)
    assert sorted(r.outcome.value for r in results) == ["already_moved"] * 3 + ["moved"]
    assert {r.dead_letter_seq for r in results} == {1}
    assert dead_messages(js, dlq) == 1


def test_the_message_id_alone_keeps_one_copy(js: JetStream, stream: Stream, dlq: DeadLetters) -> None:
    """Within the duplicate window the dead-letter stream drops a second copy even when the look-up
    found none (two helpers that looked at the same moment): the copy's Nats-Msg-Id, which the server
    reads even though the original's own id is among the headers (renamed)."""
    js.publish(f"{stream.name}.x", b"1", msg_id="original-id")
    first = dlq.move_sequence(stream.name, 1, reason="max_deliver")
    js.stream(dlq.stream).purge()  # the look-up finds nothing now; the window still holds the id
    second = dlq.move_sequence(stream.name, 1, reason="max_deliver")
    assert (first.outcome, second.outcome) == (DeadLetterOutcome.MOVED, DeadLetterOutcome.ALREADY_MOVED)


def test_a_message_deleted_before_its_advisory_is_handled(nc: nats.Client, js: JetStream, stream: Stream,
                                                          dlq: DeadLetters) -> None:
    adv = kill_one(nc, js, stream, "term")
    stream.delete_msg(adv.stream_seq)
    result = dlq.move(adv)
    assert result.outcome is DeadLetterOutcome.MISSING
    record = js.stream(dlq.stream).get_msg(result.dead_letter_seq)
    assert record.data == b"" and record.header(HEADER_MISSING)
    assert record.header(HEADER_REASON) == "terminated" and record.header(HEADER_SEQUENCE) == str(adv.stream_seq)
    assert dlq.move(adv).outcome is DeadLetterOutcome.ALREADY_MOVED
    assert dead_messages(js, dlq) == 1


def test_follow_moves_live_advisories(nc: nats.Client, js: JetStream, stream: Stream, dlq: DeadLetters) -> None:
    cons = stream.create_consumer(durable_name="W", ack_policy="explicit", max_deliver=1)
    results: list[DeadLetterResult] = []
    ready = threading.Event()

    def follow() -> None:
        with dlq.feed(stream.name) as feed:
            ready.set()
            for result in dlq.move_all(feed.until_idle(idle=30.0, total=60.0)):
                results.append(result)
                if len(results) == 2:
                    return

    follower = threading.Thread(target=follow)
    follower.start()
    assert ready.wait(timeout=10.0)
    for i in range(3):
        js.publish(f"{stream.name}.{i}", str(i).encode())
    cons.next(timeout=5.0).term()
    cons.next(timeout=5.0).ack()
    nak_sync(nc, cons.next(timeout=5.0))
    assert list(cons.fetch_no_wait(1)) == []  # the pull that finds it over max_deliver
    follower.join(timeout=60.0)
    assert sorted(r.stream_seq for r in results) == [1, 3]
    assert dead_messages(js, dlq) == 2


def test_stored_advisories_survive_a_restart_of_the_helper(nc: nats.Client, js: JetStream, stream: Stream,
                                                           dlq: DeadLetters) -> None:
    """Advisories captured in a stream and read through a durable consumer: a helper that copied a
    message and stopped before acknowledging its advisory leaves one copy after the next run."""
    adv_stream = js.create_stream(name="ADV" + next_nuid(), storage="memory",
                                  subjects=advisory_subjects(("max_deliver", "terminated"), stream.name))
    try:
        reader = adv_stream.create_consumer(durable_name="deadletters", ack_policy="explicit")
        cons = stream.create_consumer(durable_name="W", ack_policy="explicit", max_deliver=1)
        for i in range(3):
            js.publish(f"{stream.name}.{i}", str(i).encode())
        for _ in range(3):
            cons.next(timeout=5.0).term()
        assert wait_until(lambda: adv_stream.info().state.messages == 3, timeout=10.0)
        # The first run copies one message and dies before its ack.
        first = next(iter(reader.fetch(1, max_wait=5.0)))
        from natsjs_sync.advisories import decode_advisory
        adv = decode_advisory(first.data, first.subject)
        assert isinstance(adv, TerminatedAdvisory)
        assert dlq.move(adv).outcome is DeadLetterOutcome.MOVED
        # Unacknowledged, it is delivered again after ack_wait; a new consumer instance sees it now.
        restarted = DeadLetters(js, dlq.stream, prefix=dlq.prefix)
        reader2 = adv_stream.create_consumer(durable_name="replay", ack_policy="explicit")
        # limit: the three there are, without waiting for a fetch to come back empty (it returns what
        # it read by max_wait, a bound only here); the next drain shows that nothing is left.
        outcomes = [r.outcome.value for r in restarted.drain_stored(reader2, max_wait=5, limit=3)]
        assert sorted(outcomes) == ["already_moved", "moved", "moved"]
        assert list(restarted.drain_stored(reader2, max_wait=0.2)) == []  # all acknowledged
        assert dead_messages(js, dlq) == 3
    finally:
        js.delete_stream(adv_stream.name)


@pytest.mark.parametrize("allow_direct", [False, True])
def test_a_message_whose_stream_was_deleted_is_recorded_missing(js: JetStream, stream: Stream, dlq: DeadLetters,
                                                                allow_direct: bool) -> None:
    if allow_direct:
        js.update_stream(name=stream.name, subjects=[f"{stream.name}.>"], storage="memory", allow_direct=True)
    js.publish(f"{stream.name}.a", b"1")
    js.publish(f"{stream.name}.b", b"2")
    assert dlq.move_sequence(stream.name, 1, reason="terminated").outcome is DeadLetterOutcome.MOVED
    js.delete_stream(stream.name)  # the helper knows the stream (and how to read it) from before
    result = dlq.move_sequence(stream.name, 2, reason="terminated")
    assert result.outcome is DeadLetterOutcome.MISSING
    record = js.stream(dlq.stream).get_msg(result.dead_letter_seq)
    assert record.header(HEADER_MISSING) == "its stream was deleted before it was copied"
    assert dlq.move_sequence(stream.name, 2, reason="terminated").outcome is DeadLetterOutcome.ALREADY_MOVED


def test_a_missing_dead_letter_stream_is_an_error(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.x", b"1")
    with pytest.raises(nats.StreamNotFoundError):
        DeadLetters(js, "NOSUCH" + next_nuid()).move_sequence(stream.name, 1, reason="max_deliver")


class StalledDeadLetters(DeadLetters):
    """A helper that stops between looking for a copy and publishing one, until ``resume`` is set."""

    def __init__(self, js: JetStream, stream: str, *, prefix: str) -> None:
        super().__init__(js, stream, prefix=prefix)
        self.looked = threading.Event()
        self.resume = threading.Event()

    def _read(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        self.looked.set()
        assert self.resume.wait(timeout=30.0)
        return super()._read(*args, **kwargs)  # type: ignore[arg-type]


def test_a_helper_stalled_past_the_duplicate_window_adds_no_second_copy(js: JetStream, stream: Stream) -> None:
    """The server itself refuses a copy on a subject that holds one: the look before publishing may be stale."""
    nuid = next_nuid()
    js.create_stream(name="DLQ" + nuid, subjects=[f"dl{nuid}.>"], storage="memory", duplicate_window=0.2)
    try:
        js.publish(f"{stream.name}.x", b"1")
        stalled = StalledDeadLetters(js, "DLQ" + nuid, prefix="dl" + nuid)
        other = DeadLetters(js, "DLQ" + nuid, prefix="dl" + nuid)
        results: list[DeadLetterResult] = []
        mover = threading.Thread(target=lambda: results.append(stalled.move_sequence(stream.name, 1, reason="x")))
        mover.start()
        assert stalled.looked.wait(timeout=10.0)  # it found no copy
        assert other.move_sequence(stream.name, 1, reason="x").outcome is DeadLetterOutcome.MOVED
        # Wait out the duplicate window: a message id stored after the copy's is forgotten after it.
        probe = {"Nats-Msg-Id": "probe"}
        js.publish(f"dl{nuid}.probe", b"", headers=probe)
        assert wait_until(lambda: not js.publish(f"dl{nuid}.probe", b"", headers=probe).duplicate, timeout=30.0)
        stalled.resume.set()
        mover.join(timeout=30.0)
        assert [r.outcome for r in results] == [DeadLetterOutcome.ALREADY_MOVED]
        assert results[0].dead_letter_seq == 1
        copies = js.stream("DLQ" + nuid).info(subjects_filter=f"dl{nuid}.{stream.name}.>").state.subjects
        assert copies == {f"dl{nuid}.{stream.name}.1": 1}
    finally:
        js.delete_stream("DLQ" + nuid)


def test_a_stored_message_that_is_not_an_advisory_is_skipped(nc: nats.Client, js: JetStream, stream: Stream,
                                                             dlq: DeadLetters) -> None:
    """Unacknowledged, it would come back for ever and stop every run of the helper at the same place."""
    subjects = advisory_subjects(("max_deliver", "terminated"), stream.name)
    adv_stream = js.create_stream(name="ADV" + next_nuid(), storage="memory", subjects=subjects)
    try:
        reader = adv_stream.create_consumer(durable_name="deadletters", ack_policy="explicit")
        nc.publish(f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{stream.name}.C", b"not json")
        cons = stream.create_consumer(durable_name="W", ack_policy="explicit", max_deliver=1)
        js.publish(f"{stream.name}.a", b"1")
        cons.next(timeout=5.0).term()
        assert wait_until(lambda: adv_stream.info().state.messages == 2, timeout=10.0)
        # limit: the two stored, without waiting for a fetch to come back empty (max_wait is a bound).
        assert [r.stream_seq for r in dlq.drain_stored(reader, max_wait=5, limit=2)] == [1]
        assert reader.info().num_ack_pending == 0 and reader.info().num_pending == 0
    finally:
        js.delete_stream(adv_stream.name)


def test_stopping_at_a_stored_result_leaves_its_advisory_acknowledged(js: JetStream, stream: Stream,
                                                                      dlq: DeadLetters) -> None:
    adv_stream = js.create_stream(name="ADV" + next_nuid(), storage="memory",
                                  subjects=advisory_subjects(("terminated",), stream.name))
    try:
        reader = adv_stream.create_consumer(durable_name="deadletters", ack_policy="explicit")
        cons = stream.create_consumer(durable_name="W", ack_policy="explicit", max_deliver=1)
        js.publish(f"{stream.name}.a", b"1")
        cons.next(timeout=5.0).term()
        assert wait_until(lambda: adv_stream.info().state.messages == 1, timeout=10.0)
        results = dlq.drain_stored(reader, max_wait=5)
        assert next(results).outcome is DeadLetterOutcome.MOVED
        results.close()  # the caller stops there
        assert reader.info().num_ack_pending == 0
    finally:
        js.delete_stream(adv_stream.name)


def test_a_stream_made_again_has_its_reused_sequences_copied(js: JetStream, stream: Stream,
                                                             dlq: DeadLetters) -> None:
    """Deleted and made again, a stream numbers its messages from 1 again: the copy of the old message 1
    is not the copy of the new one."""
    js.publish(f"{stream.name}.a", b"old")
    assert dlq.move_sequence(stream.name, 1, reason="x").outcome is DeadLetterOutcome.MOVED
    config = stream.info().config
    js.delete_stream(stream.name)
    js.create_stream(name=stream.name, subjects=config.subjects, storage="memory")
    js.publish(f"{stream.name}.a", b"new")
    result = dlq.move_sequence(stream.name, 1, reason="x")
    assert result.outcome is DeadLetterOutcome.MOVED
    assert js.stream(dlq.stream).get_msg(result.dead_letter_seq).data == b"new"
    again = DeadLetters(js, dlq.stream, prefix=dlq.prefix).move_sequence(stream.name, 1, reason="x")
    assert again.outcome is DeadLetterOutcome.ALREADY_MOVED and again.dead_letter_seq == result.dead_letter_seq
    assert dead_messages(js, dlq) == 2
