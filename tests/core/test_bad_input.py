"""Issue 20, bad input never costs other threads their connection.

Each test shares one client between a neighbour thread doing request/reply
round trips and the bad call; the neighbour must not notice, and the client
must neither be disconnected nor reconnect.
"""

from __future__ import annotations

import array
import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ..recovery import Events, Guarded, guard

LONG = "a" * 5000  # any control line with this in it is past the server's 4096-byte limit


@pytest.fixture
def guarded(shared_server: NatsServer) -> Iterator[Guarded]:
    with guard(shared_server.url) as g:
        yield g


# ---------------------------------------------------------------------- control-line overflow

OVERLONG: dict[str, Callable[[nats.Client], object]] = {
    "publish subject": lambda nc: nc.publish(LONG, b"x"),
    "publish subject with headers": lambda nc: nc.publish(LONG, b"x", headers={"k": "v"}),
    "publish reply": lambda nc: nc.publish("bi.x", b"x", reply=LONG),
    "subscribe subject": lambda nc: nc.subscribe(LONG),
    "subscribe queue": lambda nc: nc.subscribe("bi.x", queue=LONG),
    "request subject": lambda nc: nc.request(LONG, b"x", timeout=1),
}


@pytest.mark.usefixtures("instrumentation")
@pytest.mark.parametrize("what", list(OVERLONG))
def test_a_protocol_line_past_the_servers_limit_is_refused_before_sending(guarded: Guarded, what: str) -> None:
    with pytest.raises(ValueError):  # BadSubjectError is a ValueError
        OVERLONG[what](guarded.nc)
    guarded.check_untouched()


def test_a_long_subject_within_the_limit_is_fine(guarded: Guarded) -> None:
    sub = guarded.nc.subscribe("a" * 4000)
    guarded.nc.publish("a" * 4000, b"x")
    assert sub.next_msg(timeout=5).data == b"x"
    guarded.check_untouched()


# ---------------------------------------------------------------------- payload framing

PAYLOADS: dict[str, Callable[[], Any]] = {
    "array of ints": lambda: array.array("i", [1, 2, 3]),
    "array of doubles": lambda: array.array("d", [0.5] * 100),
    "memoryview of ints": lambda: memoryview(array.array("q", range(10))),
    "2-D memoryview": lambda: memoryview(b"abcdef").cast("B", shape=[2, 3]),
}


@pytest.mark.parametrize("headers", [None, {"k": "v"}], ids=["PUB", "HPUB"])
@pytest.mark.parametrize("what", list(PAYLOADS))
def test_a_payload_of_wide_items_is_framed_by_its_byte_count(guarded: Guarded, what: str,
                                                             headers: dict[str, str] | None) -> None:
    payload = PAYLOADS[what]()
    sub = guarded.witness.subscribe("bi.payload")
    guarded.witness.flush()
    guarded.nc.publish("bi.payload", payload, headers=headers)
    guarded.nc.flush(timeout=5)
    assert sub.next_msg(timeout=5).data == memoryview(payload).tobytes()
    reply = guarded.nc.request("bi.echo", payload, timeout=5)
    assert reply.data == memoryview(payload).tobytes()
    guarded.check_untouched()


# ---------------------------------------------------------------------- pending limits


@pytest.mark.parametrize("where", ["subscribe", "connect"])
def test_a_negative_pending_limit_means_no_limit(shared_server: NatsServer, where: str) -> None:
    ev = Events()
    limits = {"pending_msgs_limit": -1, "pending_bytes_limit": -1}
    with nats.connect(shared_server.url, **(limits if where == "connect" else {}), **ev.kwargs()) as nc:
        sub = nc.subscribe("bi.limits", **(limits if where == "subscribe" else {}))
        for i in range(1000):
            nc.publish("bi.limits", b"%d" % i)
        nc.flush(timeout=5)
        assert [sub.next_msg(timeout=5).data for _ in range(1000)] == [b"%d" % i for i in range(1000)]
        assert sub.dropped == 0
        assert not [e for e in ev.errors if isinstance(e, nats.SlowConsumerError)]


# ---------------------------------------------------------------------- slow consumers


def test_each_slow_consumer_episode_is_reported(shared_server: NatsServer) -> None:
    ev = Events()
    with nats.connect(shared_server.url, **ev.kwargs()) as nc:
        sub = nc.subscribe("bi.slow", pending_msgs_limit=5)

        def slow_reports() -> int:
            return sum(isinstance(e, nats.SlowConsumerError) for e in ev.errors)

        for episode in (1, 2, 3):
            for i in range(20):
                nc.publish("bi.slow", b"%d" % i)
            nc.flush(timeout=5)
            assert wait_until(lambda episode=episode: slow_reports() >= episode, timeout=5), \
                f"episode {episode} of dropping messages was not reported ({slow_reports()} reports)"
            # Catch up: the queue is read empty and a message gets through again.
            for _ in range(5):
                sub.next_msg(timeout=5)
            nc.publish("bi.slow", b"caught up")
            assert sub.next_msg(timeout=5).data == b"caught up"
        assert sub.dropped == 3 * 15


# ---------------------------------------------------------------------- connection callbacks


async def _async_callback(*args: object) -> None:  # pragma: no cover - must never run
    pass


CALLBACKS = ["error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "discovered_server_cb",
             "lame_duck_mode_cb"]


# Should closed_cb be accepted again, it would be called and make a coroutine
# nobody awaits: it is collected inside the test, so its warning stays here.
@pytest.mark.filterwarnings("ignore:coroutine '_async_callback' was never awaited:RuntimeWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("name", CALLBACKS)
def test_an_async_connection_callback_is_refused(shared_server: NatsServer, name: str) -> None:
    try:
        with pytest.raises(TypeError, match="async"):
            nc = nats.connect(shared_server.url, **{name: _async_callback})  # type: ignore[arg-type]
            nc.close()
    finally:
        gc.collect()
