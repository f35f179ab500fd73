"""JetStream publish: acks, de-duplication, expectations, pipelining and its window."""

from __future__ import annotations

import threading
from concurrent.futures import Future, as_completed, wait

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, PubAck, Stream
from natsjs_sync.testing import NatsServer


def test_sync_publish_ack_and_headers(js: JetStream, stream: Stream) -> None:
    ack = js.publish(f"{stream.name}.a", b"hello", headers={"Trace": "t1"})
    assert isinstance(ack, PubAck)
    assert (ack.stream, ack.seq, ack.duplicate) == (stream.name, 1, False)
    assert stream.get_msg(1).header("Trace") == "t1"


def test_msg_id_dedup(js: JetStream, stream: Stream) -> None:
    first = js.publish(f"{stream.name}.a", b"1", msg_id="order-1")
    again = js.publish(f"{stream.name}.a", b"1", msg_id="order-1")
    assert again.duplicate and again.seq == first.seq
    assert stream.info().state.messages == 1


def test_expectations(js: JetStream, stream: Stream) -> None:
    s = stream.name
    a1 = js.publish(f"{s}.a", b"1", msg_id="m1")
    js.publish(f"{s}.b", b"2", expected_stream=s, expected_last_seq=a1.seq, expected_last_msg_id="m1")
    js.publish(f"{s}.a", b"3", expected_last_subject_seq=a1.seq)
    with pytest.raises(nats.WrongLastSequenceError):
        js.publish(f"{s}.a", b"4", expected_last_subject_seq=a1.seq)
    with pytest.raises(nats.WrongLastSequenceError):
        js.publish(f"{s}.a", b"4", expected_last_seq=1)
    with pytest.raises(nats.JetStreamError) as err:
        js.publish(f"{s}.a", b"4", expected_stream="OTHER")
    assert err.value.err_code == 10060  # expected stream does not match
    with pytest.raises(nats.JetStreamError):
        js.publish(f"{s}.a", b"4", expected_last_msg_id="nope")
    assert stream.info().state.messages == 3


def test_bad_input_sends_nothing(js: JetStream, stream: Stream, nc: nats.Client) -> None:
    with pytest.raises(nats.BadSubjectError):
        js.publish("bad subject", b"x")
    with pytest.raises(nats.MaxPayloadError):
        js.publish(f"{stream.name}.a", b"x" * (nc.max_payload + 1))
    with pytest.raises(nats.BadSubjectError):
        js.publish_async("a..b", b"x")
    assert js.publish_async_pending == 0
    assert stream.info().state.messages == 0


def test_publish_async_many_threads(js: JetStream, stream: Stream) -> None:
    """4 threads x 2,500 pipelined publishes: every future resolves, sequences are 1..10,000."""
    futures: list[Future[PubAck]] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        mine = [js.publish_async(f"{stream.name}.t{t}", str(i).encode()) for i in range(2500)]
        with lock:
            futures.extend(mine)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    js.publish_async_complete(timeout=20)
    assert js.publish_async_pending == 0
    seqs = sorted(f.result(timeout=0).seq for f in futures)
    assert seqs == list(range(1, 10001))
    assert stream.info().state.messages == 10000


def test_publish_async_errors_land_in_the_future(js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"1")
    fut = js.publish_async(f"{stream.name}.a", b"2", expected_last_seq=42)
    with pytest.raises(nats.WrongLastSequenceError):
        fut.result(timeout=5)
    nostream = js.publish_async("nowhere.at.all", b"x")
    with pytest.raises(nats.JetStreamError):
        nostream.result(timeout=5)


def test_a_context_wide_error_callback_hears_every_failed_async_publish(nc: nats.Client, stream: Stream) -> None:
    failures: list[tuple[nats.Msg, Exception]] = []
    done = threading.Event()

    def on_error(msg: nats.Msg, exc: Exception) -> None:
        failures.append((msg, exc))
        done.set()

    js = nc.jetstream(publish_async_error_cb=on_error)
    ok = js.publish_async(f"{stream.name}.a", b"fine", headers={"k": "v"})
    bad = js.publish_async(f"{stream.name}.a", b"refused", headers={"k": "w"}, expected_last_seq=999)
    js.publish_async_complete(timeout=10)
    assert ok.result(0).seq == 1
    assert isinstance(bad.exception(0), nats.WrongLastSequenceError)
    assert done.wait(10), "the error callback was not called"
    [(msg, exc)] = failures
    assert isinstance(exc, nats.WrongLastSequenceError)
    # The message comes back as it was published, ready to publish again.
    assert (msg.subject, msg.data, msg.headers and msg.headers.get("k")) == (f"{stream.name}.a", b"refused", "w")
    assert ok.msg.data == b"fine"  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        nc.jetstream(publish_async_error_cb="not callable")  # type: ignore[arg-type]


def test_publish_async_futures_wait_for_their_own_ack(js: JetStream, stream: Stream, nc: nats.Client) -> None:
    """A thread blocked in result() on one publish sees neither a premature
    TimeoutError nor another publish's ack while 500 others settle first; the
    standard concurrent.futures helpers and done-callbacks work on these futures."""
    held = nc.subscribe("held.x")  # answers only when the test says so
    slow = js.publish_async("held.x", b"slow")
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(slow.result(timeout=10)))
    waiting.start()
    fast = [js.publish_async(f"{stream.name}.a", str(i).encode()) for i in range(500)]
    done, not_done = wait(fast, timeout=10)
    assert len(done) == 500 and not not_done
    assert sorted(f.result(timeout=0).seq for f in as_completed(fast, timeout=1)) == list(range(1, 501))
    assert waiting.is_alive() and not slow.done()
    with pytest.raises(TimeoutError):
        slow.result(timeout=0.05)
    called = threading.Event()
    slow.add_done_callback(lambda f: called.set())
    held.next_msg(timeout=5).respond(b'{"stream": "ELSEWHERE", "seq": 42}')
    waiting.join(10)
    assert got == [PubAck(stream="ELSEWHERE", seq=42)]
    assert called.wait(5)


def test_publish_async_window_stalls_instead_of_growing(nc: nats.Client, stream: Stream) -> None:
    """With nobody acking (the stream is gone), the window fills and then publish blocks, then fails."""
    js = nc.jetstream(publish_async_max_pending=10, publish_async_stall_wait=0.2)
    # A subject with a subscriber that never answers: acks never come.
    sub = nc.subscribe("silent.>")
    try:
        futs = [js.publish_async("silent.x", b"x") for _ in range(10)]
        assert js.publish_async_pending == 10
        with pytest.raises(nats.TimeoutError):
            js.publish_async("silent.x", b"x")
        assert js.publish_async_pending == 10
        assert all(not f.done() for f in futs)
    finally:
        sub.unsubscribe()


def test_pending_futures_fail_on_close(nats_server: NatsServer) -> None:
    nc = nats.connect(nats_server.url)
    js = nc.jetstream()
    sub = nc.subscribe("silent.>")
    futs = [js.publish_async("silent.y", b"x") for _ in range(5)]
    nc.close()
    for f in futs:
        with pytest.raises(nats.ConnectionClosedError):
            f.result(timeout=5)
    with pytest.raises(nats.ConnectionClosedError):
        js.publish_async("silent.y", b"x")
    del sub


def test_async_publish_nobody_answers_is_retried_then_fails(nats_server: NatsServer) -> None:
    """A 503 (no stream yet, or a leader election) is sent again twice, 250 ms apart, as nats.go does."""
    import json
    import urllib.request

    def in_msgs() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{nats_server.monitor_port}/varz", timeout=5) as r:
            return int(json.loads(r.read())["in_msgs"])

    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        nc.flush()
        before = in_msgs()
        fut = js.publish_async("nostream.here", b"x")
        with pytest.raises(nats.errors.NoStreamResponseError):
            fut.result(timeout=10)
        js.publish_async_complete(timeout=5)
        assert in_msgs() - before == 3  # the publish and its two retries
