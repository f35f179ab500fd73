"""nats-py's client behaviour beyond names: the two-step connect, failed first
connects, drain timeouts, close callbacks and force_reconnect."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.aio.client import NATS
from natsjs_sync.errors import DrainTimeoutError, NoServersError, TimeoutError
from natsjs_sync.testing import NatsServer


def test_client_exists_before_and_after_a_failed_connect() -> None:
    errors: list[Exception] = []
    nc = NATS()
    assert not nc.is_connected and not nc.is_closed and nc.last_error is None
    assert nc.stats["in_msgs"] == 0
    with pytest.raises(NoServersError):
        nc.connect("nats://127.0.0.1:1", error_cb=errors.append, allow_reconnect=False, connect_timeout=0.5)
    assert len(errors) == 1 and isinstance(errors[0], NoServersError)
    assert nc.last_error is errors[0]
    assert not nc.is_connected


def test_failed_first_connect_goes_to_error_cb() -> None:
    errors: list[Exception] = []
    with pytest.raises(NoServersError) as info:
        nats.connect("nats://127.0.0.1:1", error_cb=errors.append, allow_reconnect=False, connect_timeout=0.5)
    assert errors == [info.value]


def test_two_step_connect_then_use(shared_server: NatsServer) -> None:
    nc = NATS()
    nc.connect(servers=[shared_server.url], dont_randomize=True, name="two-step")
    try:
        sub = nc.subscribe("two.step")
        nc.publish("two.step", b"x")
        assert sub.next_msg(timeout=2).data == b"x"
        assert nc.connected_url is not None and nc.connected_url.port == shared_server.port
        assert nc.connected_server_version.major >= 2
        assert nc.jsm().account_info() is not None
    finally:
        nc.close()
    assert nc.is_closed


def _client_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("natsjs")}


def test_connect_after_close_leaves_no_thread_of_the_first_connection(shared_server: NatsServer) -> None:
    """nats-py's ``nc.close()`` then ``nc.connect()``: a new connection, the old one's threads gone."""
    before = _client_threads()
    nc = nats.connect(shared_server.url)
    nc.close()
    with pytest.raises(NoServersError):  # a failed connect closes the client as well
        nc.connect("nats://127.0.0.1:1", allow_reconnect=False, connect_timeout=0.5)
    nc.connect(shared_server.url)
    try:
        with pytest.raises(nats.errors.NatsConnectionError, match="connected already"):
            nc.connect(shared_server.url)
        sub = nc.subscribe("after.close")
        nc.publish("after.close", b"x")  # the plain publish of the new connection's outlet
        assert sub.next_msg(timeout=2).data == b"x"
        assert nc.stats["out_msgs"] == 1
    finally:
        nc.close()
    assert _client_threads() <= before


def test_two_threads_connecting_a_closed_client_make_one_connection(shared_server: NatsServer) -> None:
    """Both connects passed the check before either put its connection in place: both
    connected, and the first connection was never closed (its threads ran on for good)."""
    before = _client_threads()
    nc = NATS()
    nc.connect(shared_server.url)
    nc.close()
    reading, release, second_done = threading.Event(), threading.Event(), threading.Event()
    outcomes: list[str] = []

    def servers() -> Iterator[str]:  # read while the first connect checks its arguments
        reading.set()
        release.wait(10)
        yield shared_server.url

    def connect(pool: Any) -> None:
        try:
            nc.connect(pool)
            outcomes.append("connected")
        except nats.errors.NatsConnectionError:
            outcomes.append("refused")

    first = threading.Thread(target=connect, args=(servers(),))
    first.start()
    assert reading.wait(10)
    # The first goes on when the second has returned, or after 2 s if the second waits for
    # it (the fix): either order gives one connection.
    releaser = threading.Thread(target=lambda: (second_done.wait(2), release.set()))
    releaser.start()
    try:
        connect([shared_server.url])
    finally:
        second_done.set()
        first.join(15)
        releaser.join(15)
    try:
        assert sorted(outcomes) == ["connected", "refused"]
    finally:
        nc.close()
    assert _client_threads() <= before


def test_close_reports_disconnected_then_closed(shared_server: NatsServer) -> None:
    events: list[str] = []
    done = threading.Event()

    def closed() -> None:
        events.append("closed")
        done.set()

    nc = nats.connect(shared_server.url, disconnected_cb=lambda: events.append("disconnected"), closed_cb=closed)
    nc.close()
    assert done.wait(5)
    assert events == ["disconnected", "closed"]


def test_drain_timeout_goes_to_error_cb_and_the_caller(shared_server: NatsServer) -> None:
    errors: list[Exception] = []
    got = threading.Event()
    release = threading.Event()

    def slow(msg: nats.Msg) -> None:
        got.set()
        release.wait(10)

    nc = nats.connect(shared_server.url, error_cb=errors.append, drain_timeout=0.3)
    try:
        nc.subscribe("slow.drain", cb=slow)
        nc.publish("slow.drain", b"")
        assert got.wait(5)
        with pytest.raises(DrainTimeoutError) as info:
            nc.drain()
        assert isinstance(info.value, TimeoutError)
    finally:
        release.set()
        nc.close()
    assert any(isinstance(e, DrainTimeoutError) for e in errors)


def test_force_reconnect_reconnects_without_an_error(shared_server: NatsServer) -> None:
    back = threading.Event()
    events: list[object] = []
    nc = nats.connect(shared_server.url, reconnected_cb=back.set, reconnect_time_wait=0.1,
                      disconnected_cb=lambda: events.append("disconnected"), error_cb=events.append)
    try:
        nc.force_reconnect()
        assert back.wait(10)
        assert nc.stats["reconnects"] == 1
        nc.flush(timeout=5)
        assert events == ["disconnected"]
    finally:
        nc.close()


# The grace period is the time before a lame-duck server starts closing its
# clients: 20 s covers the checks below on a loaded machine (1 s did not).
LAME_DUCK_DURATION, LAME_DUCK_GRACE = "30s", "20s"


def test_lame_duck_without_another_server_is_reported_and_the_client_stays() -> None:
    with NatsServer(jetstream=False, lame_duck_duration=LAME_DUCK_DURATION,
                    lame_duck_grace_period=LAME_DUCK_GRACE) as server:
        announced = threading.Event()
        events: list[object] = []
        nc = NATS()
        nc.connect(servers=[server.url], lame_duck_mode_cb=announced.set, error_cb=events.append,
                   disconnected_cb=lambda: events.append("disconnected"))
        try:
            url = nc.connected_url
            sub = nc.subscribe("ldm.still")
            server.lame_duck()
            assert announced.wait(10)
            # nats-py does not move when there is nowhere to go: same server, still working.
            assert nc.is_connected and nc.connected_url == url
            nc.publish("ldm.still", b"x")
            nc.flush(timeout=5)
            assert sub.next_msg(timeout=2).data == b"x"
            assert nc.stats["reconnects"] == 0 and events == []
        finally:
            nc.close()


def test_lame_duck_under_nats_py_does_the_same() -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    import asyncio

    with NatsServer(jetstream=False, lame_duck_duration=LAME_DUCK_DURATION,
                    lame_duck_grace_period=LAME_DUCK_GRACE) as server:

        async def main() -> tuple[bool, bool, int]:
            announced = asyncio.Event()

            async def ldm() -> None:
                announced.set()

            nc = await nats_py.connect(server.url, lame_duck_mode_cb=ldm)
            server.lame_duck()
            await asyncio.wait_for(announced.wait(), 10)
            await nc.flush(timeout=5)
            result = (nc.is_connected, nc.connected_url.port == server.port, nc.stats["reconnects"])
            await nc.close()
            return result

        assert asyncio.run(main()) == (True, True, 0)


def test_bad_credentials_are_reported_to_error_cb_before_the_raise() -> None:
    with NatsServer(jetstream=False, token="s3cret") as server:
        errors: list[Exception] = []
        with pytest.raises(nats.AuthorizationError) as info:
            nats.connect(server.url, token=lambda: "wrong", error_cb=errors.append, reconnect_time_wait=0.1)
        assert errors == [info.value]


def test_bad_credentials_with_retry_report_each_try_until_they_are_right() -> None:
    with NatsServer(jetstream=False, token="s3cret") as server:
        tries: list[int] = []
        errors: list[Exception] = []
        up = threading.Event()

        def token() -> str:
            tries.append(1)
            return "s3cret" if len(tries) >= 4 else "wrong"

        nc = nats.connect(server.url, token=token, retry_on_failed_connect=True, reconnect_time_wait=0.1,
                          error_cb=errors.append, reconnected_cb=up.set)
        try:
            assert up.wait(10) and nc.is_connected
            assert len(tries) == 4 and len(errors) == 3  # one report per refused try
            assert all(isinstance(e, (nats.AuthorizationError, NoServersError)) for e in errors)
        finally:
            nc.close()


def test_subscribe_future_gets_the_first_message(shared_server: NatsServer) -> None:
    """nats-py's ``subscribe(future=)``: the first message settles the future; under
    the migration rule the future is a concurrent.futures.Future (an asyncio one is
    settled on its loop)."""
    import asyncio
    import concurrent.futures

    nc = nats.connect(shared_server.url)
    try:
        fut: concurrent.futures.Future[nats.Msg] = concurrent.futures.Future()
        nc.subscribe("fut.one", None, None, fut)
        nc.publish("fut.one", b"first")
        nc.publish("fut.one", b"second")
        assert fut.result(timeout=10).data == b"first"

        cancelled: concurrent.futures.Future[nats.Msg] = concurrent.futures.Future()
        assert cancelled.cancel()
        nc.subscribe("fut.cancelled", future=cancelled)
        nc.publish("fut.cancelled", b"x")
        nc.flush()

        async def on_a_loop() -> bytes:
            afut: asyncio.Future[nats.Msg] = asyncio.get_running_loop().create_future()
            nc.subscribe("fut.aio", future=afut, max_msgs=1)
            nc.publish("fut.aio", b"aio")
            return (await asyncio.wait_for(afut, 10)).data

        assert asyncio.run(on_a_loop()) == b"aio"
    finally:
        nc.close()
