"""nats-py's client behaviour beyond names: the two-step connect, failed first
connects, drain timeouts, close callbacks and force_reconnect."""

from __future__ import annotations

import threading

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
