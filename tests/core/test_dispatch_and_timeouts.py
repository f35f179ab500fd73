"""The dispatcher (user code), the timer (internal deadlines), the back-off and the
one timeout rule, tested on their own."""

from __future__ import annotations

import math
import random
import threading
import time

import pytest

from natsjs_sync._backoff import Backoff
from natsjs_sync._core.dispatch import Dispatcher, Timer, current_lane, on_dispatcher_thread
from natsjs_sync._timeout import USE_DEFAULT, WAIT_MAX, Deadline, check_seconds, resolve

from ..conftest import wait_until


class PythonPutDispatcher(Dispatcher):
    """A dispatcher whose lanes put with the Python reference (Lane._put and
    _schedule): the compiled LanePut serves the library's own Dispatcher only."""


@pytest.fixture(params=[Dispatcher, PythonPutDispatcher], ids=["put-compiled-where-built", "put-python"])
def kind(request: pytest.FixtureRequest) -> type[Dispatcher]:
    """Each test of lanes runs with both ways a lane's put is made."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def dispatcher(kind: type[Dispatcher]) -> object:
    d = kind("t", max_workers=4, idle_timeout=0.2)
    yield d
    d.close()


def test_a_lane_runs_its_items_in_order_and_never_two_at_once(dispatcher: Dispatcher) -> None:
    seen: list[int] = []
    running = [0]
    overlap = []
    done = threading.Event()

    def handle(i: int) -> None:
        running[0] += 1
        if running[0] > 1:
            overlap.append(i)
        seen.append(i)
        running[0] -= 1
        if i == 4999:
            done.set()

    lane = dispatcher.lane(handle, "ordered")
    # One producer (like the reader thread) puts while workers drain other lanes too.
    noise = [dispatcher.lane(lambda _: None, f"noise{i}") for i in range(8)]
    for i in range(5000):
        lane.put(i)
        noise[i % 8].put(i)
    assert done.wait(10)
    assert seen == list(range(5000)) and not overlap


def test_lanes_run_in_parallel_up_to_max_workers(dispatcher: Dispatcher) -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def block(_: object) -> None:
        started.release()
        release.wait(10)

    lanes = [dispatcher.lane(block, f"l{i}") for i in range(6)]
    for lane in lanes:
        lane.put(None)
    for _ in range(4):
        assert started.acquire(timeout=5)
    assert not started.acquire(timeout=0.2)  # a fifth would need a fifth worker
    assert dispatcher.threads == 4
    release.set()
    for _ in range(2):
        assert started.acquire(timeout=5)


def _lanes_run_while_one_blocks(d: Dispatcher, others: int) -> None:
    release = threading.Event()
    a_started = threading.Event()
    handled = [threading.Event() for _ in range(others)]

    def slow(_: object) -> None:
        a_started.set()
        release.wait(30)

    try:
        a = d.lane(slow, "slow")
        bs = [d.lane(lambda _, ev=ev: ev.set(), f"quick{i}") for i, ev in enumerate(handled)]
        # One burst, as the reader thread delivers a read buffer: the slow lane first.
        a.put(None)
        for b in bs:
            b.put(None)
        assert a_started.wait(10)
        for i, ev in enumerate(handled):
            assert ev.wait(10), f"lane quick{i} waited behind the blocked lane"
        assert not release.is_set()
    finally:
        release.set()


def test_a_blocked_lane_does_not_hold_back_lanes_scheduled_in_the_same_burst(kind: type[Dispatcher]) -> None:
    d = kind("burst", max_workers=8)
    try:
        _lanes_run_while_one_blocks(d, 3)  # no worker yet: the first one is spawned for the slow lane
    finally:
        d.close()


def test_an_idle_worker_is_promised_to_one_lane_only(kind: type[Dispatcher]) -> None:
    d = kind("warm", max_workers=8)
    try:
        warm = threading.Event()
        d.lane(lambda _: warm.set(), "warm").put(None)
        assert warm.wait(10)
        # The worker that ran it is now idle: it can take one of the next lanes, not all of them.
        for _ in range(3):
            _lanes_run_while_one_blocks(d, 3)
    finally:
        d.close()


def test_lanes_queued_while_every_worker_is_busy_run_and_leave_no_phantom_idle_worker(kind: type[Dispatcher]) -> None:
    d = kind("full", max_workers=2, idle_timeout=60)
    try:
        release = threading.Event()
        started = threading.Semaphore(0)
        ran = threading.Semaphore(0)
        for i in range(2):
            d.lane(lambda _: (started.release(), release.wait(30)), f"block{i}").put(None)
        for _ in range(2):
            assert started.acquire(timeout=10)
        for i in range(3):  # no worker to promise: the next ones to finish take them
            d.lane(lambda _: ran.release(), f"queued{i}").put(None)
        release.set()
        for _ in range(3):
            assert ran.acquire(timeout=10)
        # Every worker goes back to idle, and is counted once: a count above the
        # workers there are would promise lanes to workers that never come.
        assert wait_until(lambda: len(d._idle) == d.threads == 2, timeout=10), (len(d._idle), d.threads)
        assert d._unclaimed == 0
        _lanes_run_while_one_blocks(d, 1)
    finally:
        d.close()


def test_an_exception_goes_to_the_lane_error_handler_and_the_lane_goes_on(dispatcher: Dispatcher) -> None:
    errors: list[BaseException] = []
    seen: list[int] = []
    done = threading.Event()

    def handle(i: int) -> None:
        if i == 1:
            raise RuntimeError("boom")
        seen.append(i)
        if i == 2:
            done.set()

    lane = dispatcher.lane(handle, "errors", on_error=errors.append)
    for i in range(3):
        lane.put(i)
    assert done.wait(5)
    assert seen == [0, 2] and [str(e) for e in errors] == ["boom"]


def test_current_lane_tells_a_callback_where_it_runs(dispatcher: Dispatcher) -> None:
    got: list[object] = []
    done = threading.Event()
    lane = dispatcher.lane(lambda _: (got.append(current_lane()), got.append(on_dispatcher_thread(dispatcher)),
                                      done.set()), "who")
    lane.put(None)
    assert done.wait(5)
    assert got == [lane, True]
    assert current_lane() is None and not on_dispatcher_thread()


def test_close_finishes_what_is_queued_and_ends_every_worker(kind: type[Dispatcher]) -> None:
    d = kind("closing", max_workers=2)
    seen: list[int] = []
    lane = d.lane(seen.append, "q")
    for i in range(100):
        lane.put(i)
    d.close(timeout=5)
    assert seen == list(range(100))
    assert d.threads == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("natsjs-dispatch-closing")]


def test_idle_workers_beyond_the_first_go_away(kind: type[Dispatcher]) -> None:
    d = kind("idle", max_workers=4, idle_timeout=0.05)
    try:
        release = threading.Event()
        started = threading.Semaphore(0)
        for i in range(3):
            d.lane(lambda _: (started.release(), release.wait(5)), f"b{i}").put(None)
        for _ in range(3):
            assert started.acquire(timeout=5)
        release.set()
        gone = threading.Event()
        for _ in range(200):
            if d.threads <= 1:
                gone.set()
                break
            gone.wait(0.02)
        assert d.threads <= 1
    finally:
        d.close()


def test_timer_runs_calls_in_time_order_and_cancelled_ones_never() -> None:
    timer = Timer("t")
    try:
        seen: list[str] = []
        done = threading.Event()
        # The timer's thread is held in a first call while the others are
        # scheduled and one cancelled: by the time it is let go all three are
        # due, so only their times (not how fast this thread scheduled them)
        # decide the order, and the cancelled one is due before the last.
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            holding.set()
            release.wait(10)

        def late() -> None:
            seen.append("late")
            done.set()

        timer.call_later(0, hold)
        assert holding.wait(5)
        base = time.monotonic()
        timer.call_at(base + 0.06, late)
        h = timer.call_at(base + 0.02, lambda: seen.append("cancelled"))
        timer.call_at(base + 0.01, lambda: seen.append("early"))
        h.cancel()
        release.set()
        assert done.wait(5)
        assert seen == ["early", "late"]
        ticks = threading.Semaphore(0)
        every = timer.call_every(0.01, ticks.release)
        for _ in range(3):
            assert ticks.acquire(timeout=5)
        every.cancel()
    finally:
        timer.close()


def test_backoff_grows_to_its_cap_with_bounded_jitter() -> None:
    b = Backoff(0.1, 1.0, factor=2.0, jitter=0.05, rng=random.Random(1))
    delays = [b.delay(n) for n in range(1, 8)]
    assert all(0.1 <= d <= 1.05 for d in delays)
    assert delays[0] < 0.16 and delays[-1] >= 1.0
    assert Backoff(2.0, 2.0, factor=1.0).delay(50) == 2.0
    with pytest.raises(ValueError):
        Backoff(-1, 1)


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0.0), (1.5, 1.5), (None, None), (math.inf, None),
    # At or above what the platform's waits accept: no limit, as inf.
    (WAIT_MAX, None), (1e12, None), (10**20, None), (10**400, None),
    (1e9, 1e9), (WAIT_MAX - 1024.0, WAIT_MAX - 1024.0),
])
def test_the_timeout_rule(value: object, expected: float | None) -> None:
    assert resolve(value, 9.0) == expected  # type: ignore[arg-type]
    assert check_seconds(value) == expected
    assert resolve(USE_DEFAULT, 9.0) == 9.0


def test_huge_timeouts_make_deadlines_that_never_expire() -> None:
    assert WAIT_MAX == threading.TIMEOUT_MAX
    for seconds in (WAIT_MAX, 1e12, 10**20):
        d = Deadline(seconds)  # type: ignore[arg-type]
        assert d.remaining() is None and not d.expired() and d.min(2.0) == 2.0
        assert Deadline.of(seconds, 1.0).remaining() is None  # type: ignore[arg-type]
        assert resolve(USE_DEFAULT, seconds) is None  # a huge default (a context's timeout) too  # type: ignore[arg-type]
    assert Deadline(None).min(1e12) is None and Deadline(5.0).min(10**20) <= 5.0  # type: ignore[operator]
    # Whatever a deadline has left is a wait the platform accepts.
    assert threading.Event().wait(Deadline(WAIT_MAX - 1024.0).min(0.0)) is False


def test_a_timer_call_too_far_ahead_for_any_wait_leaves_the_timer_running() -> None:
    timer = Timer("far")
    try:
        far = timer.call_later(1e12, lambda: None)  # a huge ack timeout arms one like it
        ran = threading.Event()
        timer.call_later(0.01, ran.set)
        assert ran.wait(10), "the timer thread died"
        ticks = threading.Semaphore(0)
        timer.call_later(0.01, ticks.release)
        assert ticks.acquire(timeout=10)
        far.cancel()
    finally:
        timer.close()


@pytest.mark.parametrize(("value", "error"), [(math.nan, ValueError), (-0.1, ValueError), ("1", TypeError),
                                              (True, TypeError), (object(), TypeError)])
def test_bad_timeouts_are_refused(value: object, error: type) -> None:
    with pytest.raises(error):
        check_seconds(value)


def test_a_deadline_is_spent_across_steps_and_passes_through() -> None:
    d = Deadline(10.0)
    assert Deadline.of(d, 1.0) is d and resolve(d, 1.0) is not None
    assert Deadline(None).remaining() is None and not Deadline(None).expired()
    assert Deadline(0).expired() and Deadline(0).remaining() == 0.0
    assert d.min(1.0) == 1.0 and Deadline(None).min(None) is None


def test_the_library_dispatcher_puts_with_the_compiled_lane_put_where_built() -> None:
    import os

    from natsjs_sync.protocol._compiled import speedups

    d = Dispatcher("which", max_workers=1)
    try:
        put = d.lane(lambda _: None, "l").put
        compiled = speedups is not None and not os.environ.get("NATSJS_SYNC_PURE_PYTHON")
        assert type(put).__name__ == ("LanePut" if compiled else "method")
        assert type(PythonPutDispatcher("py", max_workers=1).lane(lambda _: None, "l").put).__name__ == "method"
    finally:
        d.close()


def test_a_lane_with_a_compiled_put_is_collected() -> None:
    import gc
    import weakref

    class Handler:
        def __call__(self, _item: object) -> None:
            pass

    d = Dispatcher("gc", max_workers=1)
    try:
        handler = Handler()
        lane = d.lane(handler, "cycle")  # lane -> its put -> lane; the lane holds the handler
        ref = weakref.ref(handler)
        del lane, handler
        gc.collect()
        assert ref() is None  # the lane went with the cycle
    finally:
        d.close()


def test_a_put_from_many_threads_runs_every_item_once_per_lane_in_each_threads_order(kind: type[Dispatcher]) -> None:
    """The reader thread is one producer; Dispatcher.call and consume() controls put from
    other threads: a lane takes them all, once each, never two at once."""
    d = kind("many", max_workers=3, idle_timeout=0.05)
    try:
        per_lane: list[list[tuple[int, int]]] = [[] for _ in range(4)]
        running = [0] * 4
        overlap: list[int] = []
        done = threading.Semaphore(0)

        def handler(k: int) -> object:
            def handle(item: tuple[int, int]) -> None:
                running[k] += 1
                if running[k] > 1:
                    overlap.append(k)
                per_lane[k].append(item)
                running[k] -= 1
                if len(per_lane[k]) == 4 * 500:
                    done.release()
            return handle

        lanes = [d.lane(handler(k), f"m{k}") for k in range(4)]

        def produce(t: int) -> None:
            for i in range(500):
                for lane in lanes:
                    lane.put((t, i))

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for _ in lanes:
            assert done.acquire(timeout=30)
        assert not overlap
        for items in per_lane:
            assert sorted(items) == [(t, i) for t in range(4) for i in range(500)]
            for t in range(4):
                assert [i for (u, i) in items if u == t] == list(range(500))
        # Every worker is idle again and promised to no lane: the counts agree.
        assert wait_until(lambda: len(d._idle) == d.threads, timeout=10), (len(d._idle), d.threads)
    finally:
        d.close()
