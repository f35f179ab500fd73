"""The core's I/O half against an in-memory server: handshake, replay, stale and
stalled connections, with no socket and no nats-server (as httpcore tests its
layers with a mock backend)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync._core.options import ConnectOptions
from natsjs_sync._core.spi import link
from natsjs_sync.client import Client

from ..memserver import MemoryServer

FAST = {"reconnect_time_wait": 0.01, "reconnect_jitter": 0.0, "max_reconnect_attempts": -1}


class Events:
    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()
        self.errors: list[Exception] = []

    def kwargs(self) -> dict[str, Any]:
        return {"disconnected_cb": self.disconnected.set, "reconnected_cb": self.reconnected.set,
                "closed_cb": self.closed.set, "error_cb": self.errors.append}


def mem_connect(server: MemoryServer, **kwargs: Any) -> Client:
    client = Client(ConnectOptions.build("nats://mem:4222", **kwargs))
    link(client).transport_factory = server.open  # type: ignore[attr-defined]
    client._start()
    return client


@pytest.fixture
def server() -> Iterator[MemoryServer]:
    yield MemoryServer()


def test_handshake_sends_connect_then_ping(server: MemoryServer) -> None:
    with mem_connect(server, name="mem", no_echo=True) as nc:
        assert nc.is_connected
        lines = server.current.lines()
        assert lines[0].startswith("CONNECT ") and lines[1] == "PING"
        fields = server.connects[0]
        assert fields["name"] == "mem" and fields["echo"] is False
        assert fields["headers"] is True and fields["no_responders"] is True and fields["lang"] == "python-sync"
        assert nc.server_info["server_id"] == "MEM"


def test_messages_flow_through_the_in_memory_server(server: MemoryServer) -> None:
    with mem_connect(server) as nc:
        sub = nc.subscribe("a.*")
        nc.publish("a.b", b"hello", headers={"K": "v"})
        msg = sub.next_msg(timeout=5)
        assert (msg.subject, msg.data, msg.headers) == ("a.b", b"hello", {"K": "v"})


def test_reconnect_replays_subscriptions_before_buffered_publishes(server: MemoryServer) -> None:
    ev = Events()
    with mem_connect(server, **FAST, **ev.kwargs()) as nc:
        nc.subscribe("one")
        nc.subscribe("two", queue="q")
        capped = nc.subscribe("three")
        capped.unsubscribe(limit=5)
        nc.flush(timeout=5)
        first = server.current
        server.refusing = True
        first.cut()
        assert ev.disconnected.wait(5)
        nc.publish("buffered", b"x")  # waits in the buffer while reconnecting
        assert nc.is_reconnecting
        server.refusing = False
        assert ev.reconnected.wait(5)
        nc.flush(timeout=5)
        second = server.current
        assert second is not first
        lines = second.lines()
        assert lines[:2][0].startswith("CONNECT") and lines[1] == "PING"
        after = lines[2:]
        subs = [ln for ln in after if ln.startswith(("SUB", "UNSUB"))]
        assert subs[:4] == ["SUB one 1", "SUB two q 2", "SUB three 3", "UNSUB 3 5"]
        assert after.index("PUB buffered 1") > after.index("UNSUB 3 5")


def test_a_subscribe_racing_the_resume_is_restored(server: MemoryServer) -> None:
    """A subscribe made while the reconnect attaches the new connection lands either in
    the replay or behind it: its SUB reaches the new connection exactly once."""
    ev = Events()
    with mem_connect(server, **FAST, **ev.kwargs()) as nc:
        made: list[nats.Subscription] = []

        def subscribe_now(_: Any) -> None:
            # On the reconnecting thread, between the handshake and the resume.
            t = threading.Thread(target=lambda: made.append(nc.subscribe("raced")))
            t.start()
            t.join(5)

        server.handshake_hook = subscribe_now  # before the cut: the reconnect may be quick
        server.current.cut()
        assert ev.disconnected.wait(5)
        assert ev.reconnected.wait(5)
        server.handshake_hook = None
        nc.flush(timeout=5)
        sids = [ln for ln in server.current.lines() if ln.startswith("SUB raced")]
        assert len(sids) == 1
        nc.publish("raced", b"here")
        assert made[0].next_msg(timeout=5).data == b"here"


def test_unanswered_pings_make_the_connection_stale_and_it_reconnects(server: MemoryServer) -> None:
    ev = Events()
    with mem_connect(server, ping_interval=0.05, max_outstanding_pings=2, **FAST, **ev.kwargs()) as nc:
        first = server.current
        server.answer_pings = False
        assert ev.disconnected.wait(10)
        assert any(isinstance(e, nats.StaleConnectionError) for e in ev.errors)
        server.answer_pings = True
        assert ev.reconnected.wait(10)
        assert server.current is not first and nc.is_connected


def test_a_peer_that_stops_reading_costs_the_writer_at_most_the_write_timeout(server: MemoryServer) -> None:
    ev = Events()
    nc = mem_connect(server, write_timeout=0.2, ping_interval=0, **FAST, **ev.kwargs())
    try:
        first = server.current
        first.stalled.set()
        nc.publish("x", b"y" * 2_000_000)  # over the flush threshold: written from this thread
        assert ev.disconnected.wait(10)
        assert any(isinstance(e, nats.TimeoutError) for e in ev.errors)
        assert ev.reconnected.wait(10) and server.current is not first
    finally:
        closer = threading.Thread(target=nc.close)
        closer.start()
        closer.join(10)
        assert not closer.is_alive(), "close() blocked"


def test_close_returns_while_the_writer_is_stuck(server: MemoryServer) -> None:
    nc = mem_connect(server, write_timeout=None, ping_interval=0, allow_reconnect=False)
    server.current.stalled.set()
    writer = threading.Thread(target=lambda: _swallow(nc.publish, "x", b"y" * 2_000_000), daemon=True)
    writer.start()
    closer = threading.Thread(target=nc.close, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "close() blocked behind a write the peer never reads"
    assert nc.is_closed
    writer.join(10)
    assert not writer.is_alive(), "the stuck write was not woken by close()"


def _swallow(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except nats.NatsError:
        pass


def test_retry_on_failed_connect_keeps_trying_in_the_background(server: MemoryServer) -> None:
    ev = Events()
    server.refusing = True
    nc = mem_connect(server, retry_on_failed_connect=True, **FAST, **ev.kwargs())
    try:
        assert nc.is_reconnecting and not server.transports
        sub = nc.subscribe("early")
        nc.publish("early", b"buffered")
        server.refusing = False
        assert sub.next_msg(timeout=10).data == b"buffered"
        assert ev.reconnected.is_set() or ev.reconnected.wait(5)
    finally:
        nc.close()


def test_failed_first_connect_without_retry_raises_and_leaves_no_thread(server: MemoryServer) -> None:
    server.refusing = True
    with pytest.raises(nats.NoServersError, match="refused"):
        mem_connect(server)
