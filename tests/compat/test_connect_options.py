"""nats-py's connect options that reach into the reconnect loop and the WebSocket
upgrade: ``reconnect_to_server_handler`` and ``ws_connection_headers``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import urlparse

import pytest

import natsjs_sync as nats
from natsjs_sync.aio.client import Server
from natsjs_sync.errors import ServerNotInPoolError
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.server import free_port

# Refused at once where nothing listens: the connect timeout only bounds connects that must succeed.
FAST = {"reconnect_time_wait": 0.1, "connect_timeout": 5, "dont_randomize": True}


def test_reconnect_to_server_handler_chooses_the_server_and_the_wait() -> None:
    with NatsServer(jetstream=False) as a, NatsServer(jetstream=False) as b:
        calls: list[tuple[list[Server], dict[str, Any]]] = []
        back = threading.Event()

        def handler(servers: list[Server], info: dict[str, Any]) -> tuple[Server | None, float]:
            calls.append((servers, info))
            return next(s for s in servers if s.uri.port == b.port), 0.05

        nc = nats.connect([a.url, b.url], reconnect_to_server_handler=handler, reconnected_cb=back.set, **FAST)
        try:
            assert nc.connected_url.port == a.port
            a.stop()
            assert back.wait(10)
            assert nc.connected_url.port == b.port
            servers, info = calls[0]
            assert sorted(s.uri.port for s in servers) == sorted([a.port, b.port])
            assert all(isinstance(s.reconnects, int) for s in servers)
            assert info.get("server_id")  # the last INFO of the server that was lost
            nc.flush(timeout=5)
        finally:
            nc.close()


def test_a_choice_outside_the_pool_is_reported_and_the_first_server_is_used() -> None:
    with NatsServer(jetstream=False) as a:
        errors: list[Exception] = []
        back = threading.Event()
        stranger = Server(uri=urlparse("nats://127.0.0.1:1"))

        nc = nats.connect(a.url, reconnect_to_server_handler=lambda servers, info: (stranger, 0.05),
                          error_cb=errors.append, reconnected_cb=back.set, **FAST)
        try:
            nc.force_reconnect()
            assert back.wait(10)
            assert nc.connected_url.port == a.port
            assert any(isinstance(e, ServerNotInPoolError) for e in errors)
        finally:
            nc.close()


def test_reconnect_to_server_handler_under_nats_py_does_the_same() -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    with NatsServer(jetstream=False) as a, NatsServer(jetstream=False) as b:

        async def main() -> tuple[int, list[int]]:
            back = asyncio.Event()
            seen: list[int] = []

            def handler(servers: list[Any], info: dict[str, Any]) -> tuple[Any, float]:
                seen.extend(s.uri.port for s in servers)
                return next(s for s in servers if s.uri.port == b.port), 0.05

            async def reconnected() -> None:
                back.set()

            nc = await nats_py.connect([a.url, b.url], reconnect_to_server_handler=handler,
                                       reconnected_cb=reconnected, **FAST)
            a.stop()
            await asyncio.wait_for(back.wait(), 10)
            port = nc.connected_url.port
            await nc.close()
            return port, seen

        port, seen = asyncio.run(main())
        assert port == b.port and b.port in seen


@pytest.mark.server("2.11")
def test_ws_connection_headers_reach_the_server() -> None:
    # The server takes the token from a cookie of the WebSocket upgrade: only a
    # client that sends the header gets in.
    port = free_port()
    ws = {"listen": f"127.0.0.1:{port}", "no_tls": True, "compression": False, "token_cookie": "tok"}
    with NatsServer(jetstream=False, token="s3cret", config={"websocket": ws}):
        url = f"ws://127.0.0.1:{port}"
        with nats.connect(url, ws_connection_headers={"Cookie": ["tok=s3cret"]}, allow_reconnect=False) as nc:
            sub = nc.subscribe("ws.hdr")
            nc.publish("ws.hdr", b"in")
            assert sub.next_msg(timeout=2).data == b"in"
        with pytest.raises(nats.AuthorizationError):
            nats.connect(url, allow_reconnect=False)


def test_bad_ws_connection_headers_are_refused_before_connecting() -> None:
    with pytest.raises(TypeError):
        nats.connect("ws://127.0.0.1:1", ws_connection_headers={"X": [1]})
    with pytest.raises(TypeError):
        nats.connect("nats://127.0.0.1:1", reconnect_to_server_handler="not callable")
