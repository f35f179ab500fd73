"""Where handlers run and how many at once: one at a time per endpoint on the
client's dispatcher by default, up to ``max_concurrency`` per service on the
service's pool; never on the reader thread."""

from __future__ import annotations

import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.micro import Request, add_service

from ..conftest import wait_until


def test_default_handles_each_endpoint_in_order_on_the_dispatcher(
    nc: nats.Client, caller: nats.Client
) -> None:
    seen: list[bytes] = []
    threads: set[str] = set()

    def record(req: Request) -> None:
        seen.append(req.data)
        threads.add(threading.current_thread().name)
        req.respond(b"ok")

    svc = add_service(nc, name="ordered", version="1.0.0")
    svc.add_endpoint("record", record)
    nc.flush()
    try:
        replies = [caller.request_many("record", str(i).encode(), max_messages=1, timeout=30) for i in range(20)]
        assert all(next(r).data == b"ok" for r in replies)
        assert seen == [str(i).encode() for i in range(20)]
        (name,) = threads
        assert name.startswith("natsjs-dispatch-test") and "reader" not in name  # the client's callback threads
    finally:
        svc.stop()


def test_pool_runs_requests_at_once(nc: nats.Client, caller: nats.Client) -> None:
    # Three handlers meet at the barrier only if they run at the same time.
    barrier = threading.Barrier(3, timeout=10)
    threads: set[threading.Thread] = set()

    def meet(req: Request) -> None:
        threads.add(threading.current_thread())
        barrier.wait()
        req.respond(b"met")

    svc = add_service(nc, name="parallel", version="1.0.0", max_concurrency=3)
    svc.add_endpoint("meet", meet)
    nc.flush()
    try:
        replies = [caller.request_many("meet", max_messages=1, timeout=30) for _ in range(3)]
        assert [next(r).data for r in replies] == [b"met"] * 3
        assert len(threads) == 3 and all(t.name == "natsjs-svc-parallel-test" for t in threads)
    finally:
        svc.stop()


def test_pool_bounds_requests_in_progress_across_endpoints(nc: nats.Client, caller: nats.Client) -> None:
    lock = threading.Lock()
    active = [0]
    peak = [0]
    release = threading.Event()

    def work(req: Request) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        release.wait(30)
        with lock:
            active[0] -= 1
        req.respond(req.data)

    svc = add_service(nc, name="bounded", version="1.0.0", max_concurrency=2)
    svc.add_endpoint("a", work)
    svc.add_endpoint("b", work)
    nc.flush()
    try:
        replies = [caller.request_many(subject, f"{subject}{i}".encode(), max_messages=1, timeout=30)
                   for i in range(3) for subject in ("a", "b")]
        assert wait_until(lambda: active[0] == 2, timeout=10)
        # Four more requests are waiting; with a broken bound they would be in the handler now.
        assert not wait_until(lambda: active[0] > 2, timeout=0.5)
        release.set()
        assert sorted(next(r).data for r in replies) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]
        assert peak[0] == 2
    finally:
        release.set()
        svc.stop()


def test_pool_errors_are_answered_and_counted(nc: nats.Client, caller: nats.Client) -> None:
    def flaky(req: Request) -> None:
        if req.data == b"bad":
            raise ValueError("bad request")
        req.respond(b"good")

    svc = add_service(nc, name="flakypool", version="1.0.0", max_concurrency=4)
    svc.add_endpoint("flaky", flaky)
    nc.flush()
    try:
        bad = caller.request("flaky", b"bad", timeout=5)
        assert (bad.headers or {})["Nats-Service-Error-Code"] == "500"
        assert caller.request("flaky", b"ok", timeout=5).data == b"good"
        stats = svc.stats().endpoints[0]
        assert (stats.num_requests, stats.num_errors) == (2, 1)
    finally:
        svc.stop()


def test_stop_waits_for_pool_requests_and_ends_the_pool(nc: nats.Client, caller: nats.Client) -> None:
    entered = threading.Semaphore(0)
    release = threading.Event()

    def slow(req: Request) -> None:
        entered.release()
        release.wait(30)
        req.respond(req.data)

    svc = add_service(nc, name="poolstop", version="1.0.0", max_concurrency=2)
    svc.add_endpoint("slow", slow)
    nc.flush()
    replies = [caller.request_many("slow", str(i).encode(), max_messages=1, timeout=30) for i in range(4)]
    assert entered.acquire(timeout=10) and entered.acquire(timeout=10)
    stopper = threading.Thread(target=svc.stop)
    stopper.start()
    release.set()
    stopper.join(30)
    assert svc.stopped.is_set()
    assert sorted(next(r).data for r in replies) == [b"0", b"1", b"2", b"3"]
    assert not [t for t in threading.enumerate() if t.name.startswith("natsjs-svc-poolstop")]


def test_stop_from_a_pool_handler(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="poolquit", version="1.0.0", max_concurrency=2)

    def quit_handler(req: Request) -> None:
        svc.stop()
        req.respond(b"bye")

    svc.add_endpoint("quit", quit_handler)
    nc.flush()
    assert caller.request("quit", timeout=5).data == b"bye"
    assert svc.stopped.wait(10)


@pytest.mark.parametrize("max_concurrency", [None, 2])
def test_client_drain_from_a_handler_does_not_wait_for_that_handler(
    shared_server: object, max_concurrency: int | None
) -> None:
    from natsjs_sync.testing import NatsServer

    assert isinstance(shared_server, NatsServer)
    nc = nats.connect(shared_server.url, name="selfdrain")
    returned = threading.Event()

    def quit_handler(req: Request) -> None:
        nc.drain(timeout=30)
        returned.set()

    svc = add_service(nc, name="selfdrain", version="1.0.0", max_concurrency=max_concurrency)
    svc.add_endpoint("quit", quit_handler, subject="selfdrain.quit")
    nc.publish("selfdrain.quit", b"")
    assert returned.wait(10)  # waiting for itself would take the 30 s drain timeout
    assert wait_until(lambda: nc.is_closed, timeout=10)
    assert svc.stopped.wait(10)


@pytest.mark.parametrize("max_concurrency", [None, 3])
def test_stop_then_client_drain(shared_server: object, caller: nats.Client, max_concurrency: int | None) -> None:
    from natsjs_sync.testing import NatsServer

    assert isinstance(shared_server, NatsServer)
    nc = nats.connect(shared_server.url, name="stopdrain")
    entered, release = threading.Event(), threading.Event()

    def slow(req: Request) -> None:
        entered.set()
        release.wait(30)
        req.respond(req.data)

    svc = add_service(nc, name="stopdrain", version="1.0.0", max_concurrency=max_concurrency)
    svc.add_endpoint("slow", slow, subject="stopdrain.slow")
    nc.flush()
    replies = [caller.request_many("stopdrain.slow", str(i).encode(), max_messages=1, timeout=30)
               for i in range(3)]
    # The server routed all three before the stop's UNSUB can reach it (it answers the
    # caller's PING after its PUBs): else a late one finds no responder under load.
    caller.flush()
    assert entered.wait(10)

    def shut_down() -> None:
        svc.stop(timeout=30)
        nc.drain(timeout=30)

    stopper = threading.Thread(target=shut_down)
    stopper.start()
    release.set()
    stopper.join(30)
    assert nc.is_closed
    assert sorted(next(r).data for r in replies) == [b"0", b"1", b"2"]
