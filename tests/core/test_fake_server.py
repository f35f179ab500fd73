"""What a real server will not produce: malformed frames, silence, stalled PONGs."""

from __future__ import annotations

import threading
import time

import pytest

import natsjs_sync as nats
from tests.fakeserver import INFO, FakeServer, ScriptedConn


def test_malformed_frame_reports_protocol_error_and_closes() -> None:
    def script(conn: ScriptedConn) -> None:
        conn.handshake()
        conn.send(b"MSG foo 1 notanumber\r\n")
        time.sleep(0.5)  # hold the socket open: the client must close, not the server

    errors: list[Exception] = []
    closed = threading.Event()
    with FakeServer(script) as server:
        nc = nats.connect(server.url, error_cb=errors.append, closed_cb=closed.set, allow_reconnect=False)
        assert closed.wait(5)
        assert nc.is_closed
    assert any(isinstance(e, nats.ProtocolError) for e in errors)


def test_silent_server_times_out_connect() -> None:
    def script(conn: ScriptedConn) -> None:
        time.sleep(3)  # never sends INFO

    with FakeServer(script) as server:
        start = time.monotonic()
        with pytest.raises(nats.NoServersError) as err:
            nats.connect(server.url, connect_timeout=0.3)
        assert time.monotonic() - start < 2.5
        assert isinstance(err.value.__cause__, nats.TimeoutError)


def test_auth_error_during_handshake() -> None:
    def script(conn: ScriptedConn) -> None:
        conn.send(INFO)
        conn.read_line()
        conn.send(b"-ERR 'Authorization Violation'\r\n")

    with FakeServer(script) as server, pytest.raises(nats.AuthorizationError):
        nats.connect(server.url)


def test_connect_sends_headers_and_no_responders() -> None:
    seen: list[bytes] = []

    def script(conn: ScriptedConn) -> None:
        seen.append(conn.handshake())
        conn.read_line()

    with FakeServer(script) as server, nats.connect(server.url, name="fake-test"):
        pass
    assert seen and b'"headers":true' in seen[0] and b'"no_responders":true' in seen[0]
    assert b'"name":"fake-test"' in seen[0]


def test_server_ping_is_answered() -> None:
    answered = threading.Event()

    def script(conn: ScriptedConn) -> None:
        conn.handshake()
        conn.send(b"PING\r\n")
        if conn.read_line() == b"PONG":
            answered.set()

    with FakeServer(script) as server, nats.connect(server.url):
        assert answered.wait(5)


def test_unanswered_pings_mean_a_stale_connection() -> None:
    def script(conn: ScriptedConn) -> None:
        conn.handshake()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # read PINGs, never answer
            try:
                conn.read_line()
            except (ConnectionError, OSError):
                return

    errors: list[Exception] = []
    closed = threading.Event()
    with FakeServer(script) as server:
        nats.connect(server.url, ping_interval=0.1, max_outstanding_pings=2, error_cb=errors.append,
                     closed_cb=closed.set, allow_reconnect=False)
        assert closed.wait(5)
    assert any(isinstance(e, nats.StaleConnectionError) for e in errors)
