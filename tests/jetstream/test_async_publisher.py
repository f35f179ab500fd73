"""Issue 20, the async publisher: its futures are settled when complete says so,
its callbacks may wait on other futures, it is one per client, and it works in
a forked child."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, PubAck, Stream
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ..recovery import FAST, connz, run_in_child


def test_result_of_another_future_inside_a_done_callback(nats_fault_proxy: FaultProxy) -> None:
    with nats.connect(nats_fault_proxy.url, **FAST) as nc:
        js = nc.jetstream()
        js.create_stream(name="CB", subjects=["cb.>"], storage="memory")
        # Hold the acks so that the success of the first and the refusal of the
        # second arrive together, after the callback is in place.
        nats_fault_proxy.blackhole("to_client")
        first = js.publish_async("cb.a", b"1")
        second = js.publish_async("cb.a", b"2", expected_last_seq=999)  # refused by the stream
        outcome: list[object] = []
        done = threading.Event()

        def on_first(fut: Future[PubAck]) -> None:
            try:
                outcome.append(second.exception(timeout=6))
            except Exception as exc:
                outcome.append(exc)
            finally:
                done.set()

        first.add_done_callback(on_first)
        nats_fault_proxy.heal()
        assert done.wait(4), "waiting on another future inside a done-callback hung"
        assert isinstance(outcome[0], (nats.WrongLastSequenceError, RuntimeError)), outcome
        assert first.result(timeout=5).seq == 1


def test_publish_async_complete_settles_refused_publishes(js: JetStream, stream: Stream) -> None:
    subject = f"{stream.name}.a"
    last = js.publish(subject, b"0").seq
    for attempt in range(300):  # the bug showed in 172 of 300 tries
        refused = js.publish_async(subject, b"x", expected_last_seq=last + 1000)
        js.publish_async_complete(timeout=10)
        assert refused.done(), f"try {attempt}: publish_async_complete returned before a refused publish settled"
        assert isinstance(refused.exception(timeout=0), nats.WrongLastSequenceError)


def _client_threads(name: str) -> int:
    return sum(t.name.startswith("natsjs-") and t.name.endswith("-" + name) for t in threading.enumerate())


def test_many_jetstream_contexts_share_one_publisher(shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url, name="contexts") as nc:
        nc.jetstream().create_stream(name="CTX", subjects=["ctx.>"], storage="memory")
        try:
            nc.jetstream().publish_async("ctx.a", b"warm").result(timeout=5)
            nc.flush()
            threads = _client_threads("contexts")
            subs = int(connz(shared_server, nc)["subscriptions"])
            for i in range(300):  # "cheap; make as many as you like"
                nc.jetstream().publish_async("ctx.a", b"%d" % i).result(timeout=5)
            nc.flush()
            assert _client_threads("contexts") <= threads + 1, "contexts each started machinery of their own"
            assert int(connz(shared_server, nc)["subscriptions"]) <= subs + 1, "contexts each subscribed an inbox"
        finally:
            nc.jetstream().delete_stream("CTX")


# Forking a process that has threads is what this test is about (3.12+ warns).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_publish_async_in_a_forked_child(nats_server: NatsServer) -> None:
    with nats.connect(nats_server.url, name="forker") as nc:
        js = nc.jetstream()
        js.create_stream(name="FORK", subjects=["fork.>"], storage="memory")
        assert js.publish_async("fork.a", b"parent").result(timeout=5).seq == 1  # the parent's publisher runs

        def child() -> dict[str, object]:
            futures = [js.publish_async("fork.a", b"child %d" % i) for i in range(10)]
            js.publish_async_complete(timeout=5)
            return {"acked": sum(f.exception(timeout=0) is None for f in futures)}

        assert run_in_child(child, timeout=15) == {"acked": 10}
        assert js.stream("FORK").info().state.messages == 11
        assert js.publish_async("fork.a", b"parent again").result(timeout=5).seq == 12


@pytest.fixture
def busy_parent(nats_server: NatsServer) -> Iterator[tuple[nats.Client, JetStream, threading.Event]]:
    """A parent whose own thread keeps publishing async while the test forks."""
    nc = nats.connect(nats_server.url, name="busy-forker")
    js = nc.jetstream()
    js.create_stream(name="BUSY", subjects=["busy.>"], storage="memory")
    stop = threading.Event()

    def publish() -> None:
        for _ in range(1_000_000):
            if stop.is_set():
                return
            try:
                js.publish_async("busy.parent", b"x").result(timeout=5)
            except nats.NatsError:
                return

    t = threading.Thread(target=publish, name="test-busy-parent", daemon=True)
    t.start()
    try:
        yield nc, js, stop
    finally:
        stop.set()
        t.join(10)
        nc.close()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forks_taken_while_the_parent_publishes_never_deadlock(
        busy_parent: tuple[nats.Client, JetStream, threading.Event]) -> None:
    nc, js, _ = busy_parent
    assert wait_until(lambda: nc.stats.out_msgs > 50, timeout=10)  # the parent is busy publishing

    def child() -> dict[str, object]:
        js.publish_async("busy.child", b"c").result(timeout=5)
        return {"ok": True}

    for i in range(5):  # each fork lands at some point of the parent's publishing
        assert run_in_child(child, timeout=15) == {"ok": True}, f"fork {i}"


def test_acks_and_refusals_of_one_burst_each_settle_their_own_future(js: JetStream, stream: Stream) -> None:
    # The acks of one socket read are settled together: a refusal among them
    # must land on its own future, and the accepted ones keep their order.
    subject = f"{stream.name}.mix"
    futures = []
    for i in range(600):
        if i % 3 == 0:
            futures.append((None, js.publish_async(subject, b"x", expected_last_seq=10**9)))
        else:
            futures.append((i, js.publish_async(subject, str(i).encode())))
    js.publish_async_complete(timeout=30)
    accepted = []
    for i, fut in futures:
        assert fut.done()
        if i is None:
            assert isinstance(fut.exception(timeout=0), nats.WrongLastSequenceError)
        else:
            accepted.append((fut.result(timeout=0).seq, i))
    assert [seq for seq, _ in accepted] == list(range(1, 401))
    assert stream.get_msg(400).data == str(accepted[-1][1]).encode()


def test_released_contexts_leave_nothing_behind(shared_server: NatsServer) -> None:
    """A context per unit of work in a long-lived process: each is released
    (``with`` or cleanup_publisher), its pending publishes fail at once with a
    clear error, and the client's subscriptions return to where they were."""
    from natsjs_sync.errors import JetStreamPublisherClosedError

    with nats.connect(shared_server.url, name="released") as nc:
        nc.jetstream().create_stream(name="REL", subjects=["rel.>"], storage="memory")
        try:
            nc.subscribe("held.x")  # answers nothing: a publish to it stays pending
            nc.flush(timeout=5)
            baseline = int(connz(shared_server, nc)["subscriptions"])
            reported: list[Exception] = []
            pending: list[Future[PubAck]] = []
            options: dict[str, Any] = {"publish_async_timeout": 60,
                                       "publish_async_error_cb": lambda m, e: reported.append(e)}
            for i in range(200):
                if i % 2:
                    with nc.jetstream(**options) as js:
                        assert js.publish_async("rel.a", b"%d" % i).result(timeout=10).stream == "REL"
                        pending.append(js.publish_async("held.x", b"%d" % i))
                else:
                    js = nc.jetstream(**options)
                    assert js.publish_async("rel.a", b"%d" % i).result(timeout=10).stream == "REL"
                    pending.append(js.publish_async("held.x", b"%d" % i))
                    js.cleanup_publisher()
                    js.cleanup_publisher()  # idempotent
                    assert js.publish_async_pending == 0
                # Settled at once with the reason, not after the 60 s ack timeout.
                exc = pending[-1].exception(timeout=10)
                assert isinstance(exc, JetStreamPublisherClosedError) and "released" in str(exc), exc
            nc.flush(timeout=5)
            assert int(connz(shared_server, nc)["subscriptions"]) == baseline, "the ack inbox outlived its contexts"
            assert wait_until(lambda: len(reported) == 200), f"publish_async_error_cb saw {len(reported)} of 200"
            assert all(isinstance(e, JetStreamPublisherClosedError) for e in reported)
            # A released context is still usable: it starts afresh.
            js = nc.jetstream()
            js.cleanup_publisher()
            assert js.publish_async("rel.a", b"again").result(timeout=10).seq == 201
            js.cleanup_publisher()
        finally:
            nc.jetstream().delete_stream("REL")


def test_release_wakes_a_publish_stalled_for_room(shared_server: NatsServer) -> None:
    from natsjs_sync.errors import JetStreamPublisherClosedError

    with nats.connect(shared_server.url, name="stalled") as nc:
        nc.subscribe("held.y")
        nc.flush(timeout=5)
        js = nc.jetstream(publish_async_max_pending=2, publish_async_stall_wait=60, publish_async_timeout=60)
        js.publish_async("held.y", b"1")
        js.publish_async("held.y", b"2")
        outcome: list[BaseException] = []
        stalled = threading.Thread(target=lambda: _catch(lambda: js.publish_async("held.y", b"3"), outcome))
        stalled.start()
        assert wait_until(lambda: js._window is not None and js._window.stalled == 1, timeout=10)
        js.cleanup_publisher()
        stalled.join(10)
        assert not stalled.is_alive(), "a publish stalled for room outlived the context's release"
        assert len(outcome) == 1 and isinstance(outcome[0], JetStreamPublisherClosedError), outcome


def _catch(fn: Callable[[], object], into: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        into.append(exc)
