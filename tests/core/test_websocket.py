"""NATS over WebSocket: ws:// and wss:// against nats-server's websocket listener,
with the same reconnect, TLS verification, auth and fork behaviour as TCP; and the
sans-IO framing on its own."""

from __future__ import annotations

import os
import ssl
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import natsjs_sync as nats
from natsjs_sync.errors import ProtocolError
from natsjs_sync.protocol import websocket as ws
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.server import free_port
from tests.certs import CertFiles, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("wscerts"))


def test_core_and_jetstream_over_ws() -> None:
    with NatsServer(websocket=True) as server, nats.connect(server.ws_url, name="ws") as nc:
        assert nc.connected_url == server.ws_url
        sub = nc.subscribe("ws.>")
        big = os.urandom(200_000)  # several frames' worth, split across reads
        nc.publish("ws.big", big, headers={"K": "v"})
        msg = sub.next_msg(timeout=5)
        assert msg.data == big and msg.headers == {"K": "v"}
        with nats.connect(server.url) as tcp:
            tcp.subscribe("svc", cb=lambda m: m.respond(b"tcp:" + m.data))
            tcp.flush()
            assert nc.request("svc", b"ws", timeout=5).data == b"tcp:ws"
        js = nc.jetstream()
        js.create_stream(name="WS", subjects=["wsjs.>"], storage="memory")
        assert js.publish("wsjs.1", b"stored").seq == 1
        cons = js.create_consumer("WS", durable_name="c", ack_policy="explicit")
        got = list(cons.fetch(1, max_wait=5))
        assert [m.data for m in got] == [b"stored"]
        got[0].ack_sync(timeout=5)


def test_wss_verifies_the_certificate_by_default(certs: CertFiles) -> None:
    with NatsServer(websocket=True, jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        assert server.ws_url.startswith("wss://")
        with pytest.raises(nats.NoServersError, match="verif"):
            nats.connect(server.ws_url, connect_timeout=5)
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with nats.connect(server.ws_url, tls=ctx, connect_timeout=5) as nc:
            sub = nc.subscribe("secure")
            nc.publish("secure", b"over wss")
            assert sub.next_msg(timeout=5).data == b"over wss"
        with pytest.raises(nats.SecureConnRequiredError):
            nats.connect(server.ws_url, tls=False)


def test_ws_reconnects_after_a_restart_and_restores_subscriptions() -> None:
    reconnected = threading.Event()
    with NatsServer(websocket=True, jetstream=False) as server:
        nc = nats.connect(server.ws_url, reconnect_time_wait=0.05, max_reconnect_attempts=-1,
                          reconnected_cb=reconnected.set)
        try:
            sub = nc.subscribe("after")
            nc.flush()
            server.restart()
            assert reconnected.wait(20)
            assert nc.connected_url == server.ws_url
            nc.publish("after", b"restart")
            assert sub.next_msg(timeout=5).data == b"restart"
        finally:
            nc.close()


def test_mixed_pool_of_ws_and_tcp_servers() -> None:
    dead_ws = f"ws://127.0.0.1:{free_port()}"
    with NatsServer(websocket=True, jetstream=False) as server:
        with nats.connect([dead_ws, server.url], no_randomize=True, connect_timeout=2) as nc:
            assert nc.connected_url == server.url
        with nats.connect([f"nats://127.0.0.1:{free_port()}", server.ws_url], no_randomize=True) as nc:
            assert nc.connected_url == server.ws_url


def test_auth_over_ws() -> None:
    with NatsServer(websocket=True, jetstream=False, user="u", password="p") as server:
        with pytest.raises(nats.AuthorizationError):
            nats.connect(server.ws_url, user="u", password="wrong")
        with nats.connect(server.ws_url, user="u", password="p") as nc:
            nc.flush()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_connects_over_ws_on_its_own() -> None:
    with NatsServer(websocket=True, jetstream=False) as server, nats.connect(server.ws_url) as nc:
        sub = nc.subscribe("from.child")
        nc.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                nc.publish("from.child", b"hi")
                nc.flush(timeout=5)
                os._exit(0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert sub.next_msg(timeout=5).data == b"hi"


# ---------------------------------------------------------------------- framing


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A frame as a server sends it (unmasked)."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        head = bytes([b0, n])
    elif n < 65536:
        head = bytes([b0, 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, 127]) + n.to_bytes(8, "big")
    return head + payload


def unmask(frame_bytes: bytes) -> tuple[int, bytes]:
    reader = ws.FrameReader()
    b0, b1 = frame_bytes[0], frame_bytes[1]
    assert b1 & 0x80, "client frames are masked"
    return b0 & 0x0F, reader.feed(frame_bytes) if (b0 & 0x0F) == ws.OP_BINARY else b""


@given(st.binary(max_size=70_000), st.binary(min_size=4, max_size=4))
@settings(max_examples=60, deadline=None)
def test_client_frames_round_trip_any_size(payload: bytes, key: bytes) -> None:
    opcode, data = unmask(ws.frame(ws.OP_BINARY, payload, key))
    assert opcode == ws.OP_BINARY and data == payload


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_server_frames_split_anywhere_give_the_same_stream(chunks: list[bytes], data: st.DataObject) -> None:
    wire = b"".join(server_frame(ws.OP_BINARY, c) for c in chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    reader = ws.FrameReader()
    out = b""
    prev = 0
    for cut in [*cuts, len(wire)]:
        out += reader.feed(wire[prev:cut])
        prev = cut
    assert out == b"".join(chunks)


def test_fragments_pings_and_close() -> None:
    reader = ws.FrameReader()
    wire = (server_frame(ws.OP_BINARY, b"INFO ", fin=False) + server_frame(ws.OP_PING, b"p1")
            + server_frame(ws.OP_CONTINUATION, b"{}\r\n") + server_frame(ws.OP_CLOSE, b"\x03\xe8bye"))
    assert reader.feed(wire) == b"INFO {}\r\n"
    assert reader.pongs == [b"p1"]
    assert reader.closed and reader.close_reason == "bye"


def test_refused_upgrade_and_bad_frames_are_protocol_errors() -> None:
    key = ws.new_key()
    with pytest.raises(ProtocolError, match="refused"):
        ws.check_upgrade_response(b"HTTP/1.1 403 Forbidden", key)
    ok = (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          f"Sec-WebSocket-Accept: {ws.accept_for(key)}").encode()
    ws.check_upgrade_response(ok, key)
    with pytest.raises(ProtocolError, match="Accept"):
        ws.check_upgrade_response(ok.replace(ws.accept_for(key).encode(), b"wrong"), key)
    with pytest.raises(ProtocolError, match="RSV"):
        ws.FrameReader().feed(bytes([0xC2, 0]))
