"""Pull consumers: management, fetch, next, messages(), consume(), status handling."""

from __future__ import annotations

import threading

import pytest

import natsjs_sync as nats
from natsjs_sync import Msg
from natsjs_sync.errors import ConsumerDeletedError
from natsjs_sync.jetstream import ConsumerConfig, JetStream, Stream

from ..conftest import wait_until


def _fill(js: JetStream, subject: str, n: int) -> None:
    for i in range(n):
        js.publish_async(subject, str(i).encode())
    js.publish_async_complete(timeout=10)


def test_consumer_crud_and_actions(js: JetStream, stream: Stream) -> None:
    s = stream.name
    cfg = ConsumerConfig(durable_name="C1", ack_wait=7.5, max_deliver=3, filter_subject=f"{s}.a",
                         metadata={"owner": "t"})
    cons = stream.create_consumer(cfg)
    info = cons.cached_info
    assert (info.name, info.config.ack_wait, info.config.max_deliver) == ("C1", 7.5, 3)
    assert info.config.metadata and info.config.metadata["owner"] == "t"
    backoff = stream.create_consumer(durable_name="BO", backoff=[1.0, 2.5], max_deliver=4)
    assert backoff.cached_info.config.backoff == [1.0, 2.5]
    stream.delete_consumer("BO")
    assert stream.create_consumer(cfg).name == "C1"  # same config again: fine
    with pytest.raises(nats.JetStreamError):  # "create" refuses a changed config
        stream.create_consumer(cfg.replace(ack_wait=9.0))
    with pytest.raises(nats.ConsumerNotFoundError):  # "update" refuses a missing consumer
        stream.update_consumer(ConsumerConfig(durable_name="C2"))
    assert stream.update_consumer(cfg.replace(ack_wait=9.0)).cached_info.config.ack_wait == 9.0
    stream.create_or_update_consumer(ConsumerConfig(durable_name="C2", filter_subjects=[f"{s}.b", f"{s}.c"]))
    assert sorted(stream.consumer_names()) == ["C1", "C2"]
    assert {i.name for i in stream.list_consumers()} == {"C1", "C2"}
    assert js.consumer(s, "C2").cached_info.config.filter_subjects == [f"{s}.b", f"{s}.c"]
    assert stream.delete_consumer("C1") is True
    with pytest.raises(nats.ConsumerNotFoundError):
        stream.consumer("C1")
    eph = stream.create_consumer(inactive_threshold=5.0)
    assert eph.name and eph.cached_info.config.inactive_threshold == 5.0


def test_fetch_batches_and_empty(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 25)
    cons = stream.create_consumer(durable_name="F")
    got: list[int] = []
    for _ in range(3):
        with cons.fetch(10, max_wait=2) as batch:
            for msg in batch:
                got.append(int(msg.data))
                msg.ack()
            assert batch.error is None
    assert got == list(range(25))
    empty = cons.fetch(10, max_wait=0.3)
    assert list(empty) == [] and empty.error is None
    nowait = cons.fetch_no_wait(10)
    assert list(nowait) == []


def test_fetch_no_wait_and_bytes(js: JetStream, stream: Stream) -> None:
    for _i in range(10):
        js.publish(f"{stream.name}.a", b"x" * 100)
    cons = stream.create_consumer(durable_name="B", ack_policy="none")
    assert len(list(cons.fetch_no_wait(4))) == 4
    # Each fetch below ends as soon as it has what it asked for: its max_wait is only a bound, and
    # a generous one (a fetch returns what it read by then, and a loaded machine may read late).
    batch = list(cons.fetch_bytes(350, max_wait=5))
    assert 1 <= len(batch) <= 3  # messages carry headers/subject overhead on top of the 100 bytes
    rest = list(cons.fetch(6 - len(batch), max_wait=5))
    assert len(rest) == 6 - len(batch)
    assert list(cons.fetch_no_wait(100)) == []  # and no more


def test_fetch_timeout_leaves_no_pull_request(js: JetStream, stream: Stream) -> None:
    cons = stream.create_consumer(durable_name="W")
    assert list(cons.fetch(5, max_wait=0.5)) == []
    # The server's expiry is shorter than the client's wait: nothing is left
    # waiting (on a loaded machine the server may drop it a moment after the
    # client gave up; a request without expiry would stay for good).
    assert wait_until(lambda: cons.info().num_waiting == 0, timeout=10), "a pull request was left waiting"
    # So a message published now is not lost to a dead inbox.
    js.publish(f"{stream.name}.a", b"late")
    assert cons.next(timeout=2).data == b"late"


def test_next_and_timeouts(js: JetStream, stream: Stream) -> None:
    cons = stream.create_consumer(durable_name="N")
    with pytest.raises(nats.TimeoutError):
        cons.next(timeout=0.3)
    js.publish(f"{stream.name}.a", b"1")
    msg = cons.next(timeout=2)
    assert isinstance(msg, Msg) and msg.data == b"1" and msg.status is None


def test_messages_iterator_with_acks(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 1200)
    cons = stream.create_consumer(durable_name="M")
    got = []
    with cons.messages(max_messages=100) as it:
        for msg in it:
            got.append(int(msg.data))
            msg.ack()
            if len(got) == 1200:
                break
    assert got == list(range(1200))
    assert wait_until(lambda: cons.info().num_ack_pending == 0, timeout=5)
    with pytest.raises(nats.BadSubscriptionError):
        it.next(timeout=0.1)


def test_messages_max_bytes_and_drain(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 50)
    cons = stream.create_consumer(durable_name="MB", ack_policy="none")
    it = cons.messages(max_bytes=2048, expires=2.0)
    first = it.next(timeout=2)
    it.drain()
    rest = list(it)
    assert int(first.data) == 0 and len(rest) >= 1
    assert [int(m.data) for m in [first, *rest]] == list(range(1 + len(rest)))


def test_messages_consumer_deleted_while_pulling(js: JetStream, stream: Stream) -> None:
    cons = stream.create_consumer(durable_name="D")
    it = cons.messages(expires=5.0)
    with pytest.raises(nats.TimeoutError):
        it.next(timeout=0.2)  # a pull request is now waiting on the server
    stream.delete_consumer("D")
    with pytest.raises(ConsumerDeletedError):
        it.next(timeout=5)


def test_messages_consumer_deleted_before_pulling(js: JetStream, stream: Stream) -> None:
    """No request waits, so no 409 comes: missed heartbeats make the iterator check."""
    cons = stream.create_consumer(durable_name="D2")
    it = cons.messages(expires=1.0, heartbeat=0.2)
    stream.delete_consumer("D2")
    with pytest.raises(ConsumerDeletedError):
        it.next(timeout=5)


def test_consume_callback_thread_and_stop(js: JetStream, stream: Stream) -> None:
    total = 600
    seen: list[int] = []
    done = threading.Event()
    callers: set[str] = set()

    def handler(msg: Msg) -> None:
        callers.add(threading.current_thread().name)
        seen.append(int(msg.data))
        msg.ack()
        if len(seen) == total:
            done.set()

    cons = stream.create_consumer(durable_name="CB")
    ctx = cons.consume(handler, max_messages=64)
    _fill(js, f"{stream.name}.a", total)
    assert done.wait(15)
    ctx.stop()
    assert ctx.closed.is_set()
    assert sorted(seen) == list(range(total))
    assert len(callers) == 1 and threading.current_thread().name not in callers


def test_consume_handler_errors_do_not_stop_it(js: JetStream, stream: Stream) -> None:
    errors: list[Exception] = []
    seen: list[int] = []
    done = threading.Event()

    def handler(msg: Msg) -> None:
        n = int(msg.data)
        seen.append(n)
        msg.ack()
        if n == 3:
            raise RuntimeError("boom")
        if n == 9:
            done.set()

    cons = stream.create_consumer(durable_name="CE")
    ctx = cons.consume(handler, error_cb=errors.append)
    _fill(js, f"{stream.name}.a", 10)
    assert done.wait(10)
    ctx.drain()
    assert seen == list(range(10))
    assert [str(e) for e in errors] == ["boom"]


def test_consume_drain_mid_stream_handles_every_delivered_message(js: JetStream, stream: Stream) -> None:
    """A drain while pull requests are being served must not strand delivered
    messages (they would sit unacknowledged until their ack wait ran out)."""
    _fill(js, f"{stream.name}.a", 400)
    for round_ in range(5):
        handled = 0
        enough = threading.Event()

        def handler(msg: Msg, enough: threading.Event = enough) -> None:
            nonlocal handled
            msg.ack()
            handled += 1
            if handled == 30:
                enough.set()

        cons = stream.create_consumer(durable_name=f"DR{round_}", ack_policy="explicit")
        ctx = cons.consume(handler, max_messages=10)
        assert enough.wait(10)
        ctx.drain()
        assert ctx.closed.is_set()
        after = handled
        # Acks are processed by the server asynchronously; a stranded message
        # would stay pending for its 30 s ack wait.
        assert wait_until(lambda c=cons: c.info().num_ack_pending == 0, timeout=10.0), \
            f"round {round_}: delivered but never handled"
        assert cons.info().delivered.consumer_seq == after == handled


def test_two_consumers_share_work_queue(js: JetStream) -> None:
    name = "WQ" + nats.new_inbox().split(".")[-1]
    st = js.create_stream(name=name, subjects=[f"{name}.>"], retention="workqueue", storage="memory")
    try:
        _fill(js, f"{name}.job", 300)
        cons = st.create_consumer(durable_name="workers")
        seen: list[int] = []
        lock = threading.Lock()

        def stream_empty() -> bool:
            return st.info().state.messages == 0

        def worker() -> None:
            # An empty fetch is no proof the queue is done (on a loaded machine a
            # fetch can come back empty while jobs remain): a worker stops once
            # the stream holds no job; bounded in rounds either way.
            for _ in range(30):  # 300 jobs take 15 full fetches in all
                got = list(cons.fetch(20, max_wait=2.0))
                if not got and stream_empty():
                    return
                for m in got:
                    m.ack_sync()
                    with lock:
                        seen.append(int(m.data))

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a worker never saw the queue empty"
        assert sorted(seen) == list(range(300))
        assert st.info().state.messages == 0
    finally:
        js.delete_stream(name)


@pytest.mark.server("2.11")
def test_priority_group_overflow_and_pinning(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 6)
    pinned = stream.create_consumer(durable_name="P", priority_policy="pinned_client", priority_groups=["g"],
                                    priority_timeout=30.0)
    a = js.consumer(stream.name, "P")
    b = js.consumer(stream.name, "P")
    first = list(a.fetch(2, max_wait=5, group="g"))
    assert len(first) == 2
    assert a._pin_id
    for m in first:
        m.ack()
    # b is not the pinned client: it gets nothing while a holds the pin.
    assert list(b.fetch(2, max_wait=0.5, group="g")) == []
    js.unpin_consumer(stream.name, "P", "g")
    got_b = list(b.fetch(2, max_wait=2, group="g"))
    assert len(got_b) == 2
    assert pinned.info().priority_groups
    # Without a group the server refuses the pull (at once); the batch says why.
    batch = b.fetch(1, max_wait=5)
    assert list(batch) == []
    assert isinstance(batch.error, nats.JetStreamError)


@pytest.mark.server("2.11")
def test_next_fetch_bytes_and_fetch_no_wait_speak_priority_groups(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 6)
    stream.create_consumer(durable_name="OV", priority_policy="overflow", priority_groups=["jobs"])
    cons = js.consumer(stream.name, "OV")
    assert cons.next(timeout=5, group="jobs").data == b"0"
    got = list(cons.fetch_bytes(10_000, max_wait=2, group="jobs", min_pending=1))
    assert [m.data for m in got] == [b"1", b"2", b"3", b"4", b"5"]
    for m in got:
        m.ack()
    # Overflow: with min_pending above what is pending the request gets nothing.
    _fill(js, f"{stream.name}.a", 2)
    assert list(cons.fetch_no_wait(5, group="jobs", min_pending=100)) == []
    assert len(list(cons.fetch_no_wait(5, group="jobs"))) == 2
    # Without a group the server refuses the pull, and next() says why.
    with pytest.raises(nats.JetStreamError, match=r"(?i)priority group"):
        cons.next(timeout=5)
    with pytest.raises(ValueError, match="need a group"):
        cons.next(timeout=1, min_pending=1)


@pytest.mark.server("2.11")
def test_messages_and_consume_speak_priority_groups(js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="PG", priority_policy="pinned_client", priority_groups=["g"],
                           priority_timeout=30.0, ack_policy="explicit")
    _fill(js, f"{stream.name}.a", 5)
    cons = js.consumer(stream.name, "PG")
    with cons.messages(group="g", max_messages=10) as it:
        got = [it.next(timeout=5) for _ in range(5)]
    assert [int(m.data) for m in got] == list(range(5))
    for m in got:
        m.ack()
    # A consumer with a priority policy refuses requests without a group: the
    # server's answer reaches the caller instead of an endless wait.
    with cons.messages() as it, pytest.raises(nats.JetStreamError, match=r"(?i)priority group"):
        it.next(timeout=5)
    errors: list[Exception] = []
    failed = threading.Event()
    ctx = cons.consume(lambda m: None, error_cb=lambda e: (errors.append(e), failed.set()))
    try:
        assert failed.wait(5)
        assert ctx.closed.wait(5)
    finally:
        ctx.stop()
    assert any("priority group" in str(e).lower() for e in errors)
    with pytest.raises(ValueError, match="need a group"):
        cons.messages(min_pending=3)


def test_messages_bounded_by_messages_and_bytes_together(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 20)
    cons = stream.create_consumer(durable_name="MB", ack_policy="none")
    with cons.messages(max_messages=4, max_bytes=1024) as it:
        assert [int(it.next(timeout=5).data) for _ in range(20)] == list(range(20))


@pytest.mark.server("2.11")
def test_consumer_handle_pauses_and_resumes(js: JetStream, stream: Stream) -> None:
    import datetime

    cons = stream.create_consumer(durable_name="PR", ack_policy="none")
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
    cons.pause(until)
    assert cons.info().paused
    cons.resume()
    assert not cons.info().paused


def test_stop_after_ends_messages_and_consume_without_asking_for_more(js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 20)
    cons = stream.create_consumer(durable_name="SA", ack_policy="explicit")
    with cons.messages(max_messages=4, stop_after=5) as it:
        got = [m.data for m in it]  # the iteration ends by itself
    assert got == [b"0", b"1", b"2", b"3", b"4"] and it.is_stopped
    # Never more than 5 were asked for: the other 15 were not delivered (none waits for an ack).
    info = cons.info()
    assert info.num_ack_pending == 5 and info.num_pending == 15

    other = stream.create_consumer(durable_name="SB", ack_policy="none")
    seen: list[bytes] = []
    ctx = other.consume(lambda m: seen.append(m.data), stop_after=7)
    assert ctx.closed.wait(10), "consume() did not stop after 7 messages"
    assert seen == [b"%d" % i for i in range(7)]
    assert other.info().num_pending == 13
    with pytest.raises(ValueError, match="stop_after"):
        cons.messages(stop_after=0)


class _Pulls:
    """Counts the pull requests sent to a consumer (a second subscriber on its subject sees each)."""

    def __init__(self, nc: nats.Client, js: JetStream, stream: str, consumer: str):
        self._nc = nc
        self.count = 0
        self._sub = nc.subscribe(f"{js.api_prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}", cb=self._seen)
        nc.flush()

    def _seen(self, _msg: Msg) -> None:
        self.count += 1

    def settled(self) -> int:
        """The count once every request sent so far was seen."""
        self._nc.flush()
        return self.count


def _too_large(errors: list[Exception], at_least: int) -> bool:
    return sum(isinstance(e, nats.JetStreamError) and e.code == 409 for e in errors) >= at_least


def test_messages_report_a_message_larger_than_max_bytes_and_back_off(nc: nats.Client, js: JetStream,
                                                                       stream: Stream) -> None:
    """The server refuses at once every request smaller than the next message (409 Message
    Size Exceeds MaxBytes): asking again at once would spin for ever; it is reported instead,
    and asked again after a back-off."""
    js.publish(f"{stream.name}.big", b"x" * 1000)
    cons = stream.create_consumer(durable_name="TOOBIG", ack_policy="none")
    pulls = _Pulls(nc, js, stream.name, "TOOBIG")
    errors: list[Exception] = []
    it = cons.messages(max_bytes=100, expires=5.0, error_cb=errors.append)
    for _ in range(40):  # bounded: each wait is 0.25 s
        if _too_large(errors, 3):
            break
        with pytest.raises(nats.TimeoutError):
            it.next(timeout=0.25)
    it.stop()
    assert _too_large(errors, 3), f"the refusal was never reported: {errors}"
    # One request per report (and one whose answer was still on its way), not thousands.
    assert pulls.settled() <= len(errors) + 2, (pulls.count, errors)


def test_consume_reports_a_message_larger_than_max_bytes_and_backs_off(nc: nats.Client, js: JetStream,
                                                                        stream: Stream) -> None:
    js.publish(f"{stream.name}.big", b"x" * 1000)
    cons = stream.create_consumer(durable_name="TOOBIGC", ack_policy="none")
    pulls = _Pulls(nc, js, stream.name, "TOOBIGC")
    errors: list[Exception] = []
    ctx = cons.consume(lambda _m: None, max_bytes=100, expires=5.0, error_cb=errors.append)
    assert wait_until(lambda: _too_large(errors, 3), timeout=10.0), f"the refusal was never reported: {errors}"
    ctx.stop()
    assert pulls.settled() <= len(errors) + 2, (pulls.count, errors)
