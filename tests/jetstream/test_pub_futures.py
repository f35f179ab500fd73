"""The futures of async publishes, in both of their forms: the shared-condition
one (made from CPython's private Future fields, where they are laid out as
expected) and the plain public Future every other interpreter gets. Whatever
the form, ``wait``, ``as_completed``, callbacks, cancellation and timeouts
behave as a Future's, and a wait that runs out raises the library's error."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import PubAckTimeoutError
from natsjs_sync.jetstream import JetStream, PubAck, pub_futures, publish_async
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer


@pytest.fixture(params=["shared", "public"])
def future_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with both future classes (a client's mux takes the class when made)."""
    if request.param == "public":
        monkeypatch.setattr(publish_async, "PUB_FUTURE", pub_futures._PubFuture)
    else:
        if not pub_futures.shared_condition_fits():
            pytest.skip("this interpreter's Future is not the layout the shared-condition future was written for")
        monkeypatch.setattr(publish_async, "PUB_FUTURE", pub_futures._SharedConditionFuture)
    return str(request.param)


@pytest.fixture
def kind_js(future_kind: str, shared_server: NatsServer) -> Iterator[JetStream]:
    """A JetStream context on a fresh client (made after the future class is chosen)."""
    with nats.connect(shared_server.url, name="futures") as nc:
        yield nc.jetstream(publish_async_timeout=30)


@pytest.fixture
def subjects(kind_js: JetStream) -> Iterator[str]:
    """A memory stream; yields its subject prefix."""
    name = "F" + next_nuid()
    kind_js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    yield name
    kind_js.delete_stream(name)


def _held(js: JetStream) -> str:
    """A subject somebody subscribes to but never answers: its publishes stay pending."""
    subject = "held." + next_nuid()
    js.nc.subscribe(subject)
    js.nc.flush(timeout=5)
    return subject


def test_the_chosen_class_is_the_one_used(future_kind: str, kind_js: JetStream, subjects: str) -> None:
    fut = kind_js.publish_async(f"{subjects}.a", b"x")
    expected = pub_futures._SharedConditionFuture if future_kind == "shared" else pub_futures._PubFuture
    assert type(fut) is expected and isinstance(fut, Future)
    assert fut.result(timeout=10).seq == 1


def test_wait_and_as_completed(kind_js: JetStream, subjects: str) -> None:
    futs = [kind_js.publish_async(f"{subjects}.a", b"%d" % i) for i in range(200)]
    done, not_done = concurrent.futures.wait(futs, timeout=20)
    assert not not_done and len(done) == 200
    seqs = sorted(f.result(timeout=0).seq for f in concurrent.futures.as_completed(futs, timeout=20))
    assert seqs == list(range(1, 201))
    kind_js.publish_async_complete(timeout=10)


def test_done_callbacks_run_on_the_dispatcher(kind_js: JetStream, subjects: str) -> None:
    seen: list[tuple[int, str]] = []
    all_in = threading.Event()

    def on_done(fut: Future[PubAck]) -> None:
        seen.append((fut.result(timeout=0).seq, threading.current_thread().name))
        if len(seen) == 20:
            all_in.set()

    for i in range(20):
        kind_js.publish_async(f"{subjects}.a", b"%d" % i).add_done_callback(on_done)
    assert all_in.wait(20), f"{len(seen)} of 20 callbacks ran"
    assert sorted(seq for seq, _ in seen) == list(range(1, 21))
    assert all("reader" not in name for _, name in seen), seen
    late = threading.Event()
    settled = kind_js.publish_async(f"{subjects}.a", b"late")
    settled.result(timeout=10)
    settled.add_done_callback(lambda _: late.set())  # added after it settled: still runs
    assert late.wait(10)


def test_a_wait_that_runs_out_raises_the_library_timeout(kind_js: JetStream) -> None:
    fut = kind_js.publish_async(_held(kind_js), b"x")
    for wait in (fut.result, fut.exception):
        with pytest.raises(nats.TimeoutError, match="no PubAck") as info:
            wait(0.05)
        assert isinstance(info.value, PubAckTimeoutError)
        assert isinstance(info.value, concurrent.futures.TimeoutError)  # as a plain future's (3.10 too)
        assert isinstance(info.value, TimeoutError)
    assert not fut.done()  # a wait running out leaves the publish pending


def test_the_ack_timeout_fails_the_future_with_the_library_timeout(future_kind: str,
                                                                   shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url, name="futures") as nc:
        js = nc.jetstream(publish_async_timeout=0.2)
        fut = js.publish_async(_held(js), b"x")
        exc = fut.exception(timeout=10)
        assert isinstance(exc, PubAckTimeoutError) and isinstance(exc, concurrent.futures.TimeoutError), exc
        with pytest.raises(nats.TimeoutError):
            fut.result(timeout=0)


@pytest.mark.parametrize("huge", [1e10, 10**20, float("inf"), None])
def test_a_wait_follows_the_one_timeout_rule(future_kind: str, shared_server: NatsServer,
                                             huge: float | None) -> None:
    """A wait beyond what a lock accepts waits until settled (here: the ack
    timeout fails the publish); a negative, NaN or non-number wait is refused at
    once and leaves the publish pending. The plain future raised OverflowError
    for 1e10 (the lock's limit is about 9.2e9 s)."""
    with nats.connect(shared_server.url, name="futures") as nc:
        js = nc.jetstream(publish_async_timeout=2)
        fut = js.publish_async(_held(js), b"x")
        for bad, error in ((-1, ValueError), (float("nan"), ValueError), ("1", TypeError)):
            with pytest.raises(error):
                fut.result(timeout=bad)  # type: ignore[arg-type]
            with pytest.raises(error):
                fut.exception(timeout=bad)  # type: ignore[arg-type]
        assert not fut.done()
        assert isinstance(fut.exception(timeout=huge), PubAckTimeoutError)  # the ack timeout's, after 2 s
        with pytest.raises(PubAckTimeoutError):
            fut.result(timeout=huge)


def test_cancellation(kind_js: JetStream) -> None:
    subject = _held(kind_js)
    fut = kind_js.publish_async(subject, b"x")
    called = threading.Event()
    fut.add_done_callback(lambda _: called.set())
    assert fut.cancel() and fut.cancelled() and fut.done()
    with pytest.raises(concurrent.futures.CancelledError):
        fut.result(timeout=1)
    assert called.wait(10), "the done-callback of a cancelled future did not run"
    # As for any Future nobody has told of its cancellation yet (an executor
    # does that when it would run it), wait() does not count it as done...
    assert concurrent.futures.wait([fut], timeout=0).not_done == {fut}
    # ... until the publish is settled (here: by the connection closing): then
    # it is told, and stays cancelled.
    kind_js.nc.close()
    done, _ = concurrent.futures.wait([fut], timeout=10)
    assert done == {fut} and fut.cancelled()


def test_a_future_laid_out_otherwise_selects_the_plain_future() -> None:
    class Changed(Future):  # type: ignore[type-arg]
        """A Future as a later CPython might make it: one field more."""

        def __init__(self) -> None:
            super().__init__()
            self._loop_hint = None

    class Slotted:
        """A Future whose fields are slots: no instance dict at all."""

        __slots__ = ("_condition", "_done_callbacks", "_exception", "_result", "_state", "_waiters")

    assert not pub_futures.shared_condition_fits(Changed)
    assert not pub_futures.shared_condition_fits(Slotted)
    assert pub_futures.shared_condition_fits() == (pub_futures.PUB_FUTURE is pub_futures._SharedConditionFuture
                                                  or os.environ.get("NATSJS_SYNC_PUBLIC_FUTURES", "") not in ("", "0"))


def test_the_environment_can_force_the_plain_future() -> None:
    code = "from natsjs_sync.jetstream import pub_futures; print(pub_futures.PUB_FUTURE.__name__)"
    env = {**os.environ, "NATSJS_SYNC_PUBLIC_FUTURES": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "_PubFuture"
