"""natsjs_sync.testing.FaultProxy: each fault seen through a real client and server.

A second client connected straight to the server (not through the proxy) is
the undisturbed witness of what did or did not get through.
"""

from __future__ import annotations

import re
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from .conftest import wait_until

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.0, "max_reconnect_attempts": -1}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "testing.rst"


class Events:
    """Connection callbacks turned into events and lists a test can wait on."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.errors: list[Exception] = []

    def kwargs(self) -> dict[str, Any]:
        return {"disconnected_cb": self.disconnected.set, "reconnected_cb": self.reconnected.set,
                "error_cb": self.errors.append}


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False) as s:
        yield s


def proxied(proxy: FaultProxy, ev: Events | None = None, **options: Any) -> nats.Client:
    return nats.connect(proxy.url, name="proxied", **FAST, **(ev.kwargs() if ev else {}), **options)


def test_forwards_both_ways_and_reports_what_it_sees(proxy: FaultProxy, server: NatsServer,
                                                     witness: nats.Client) -> None:
    assert proxy.url == f"nats://127.0.0.1:{proxy.port}"
    assert proxy.upstream == ("127.0.0.1", server.port)
    with proxied(proxy) as nc:
        assert proxy.connections == 1 and proxy.accepted == 1
        sub = nc.subscribe("fp.echo")
        nc.flush()
        witness_sub = witness.subscribe("fp.back")
        witness.flush()
        witness.publish("fp.echo", b"down", headers={"k": "v"})
        msg = sub.next_msg(timeout=5)
        assert (msg.data, msg.headers) == (b"down", {"k": "v"})
        nc.publish("fp.back", b"up")
        nc.flush()
        assert witness_sub.next_msg(timeout=5).data == b"up"
        assert proxy.server_frames("INFO") >= 1 and proxy.server_frames("HMSG") == 1
        assert proxy.server_frames("PONG") >= 2  # the handshake's and the flush's
        assert proxy.server_frames() >= 4
        assert proxy.client_frames("CONNECT") == 1 and proxy.client_frames("SUB") == 1
        assert proxy.client_frames("PUB") == 1 and proxy.client_frames("ping") >= 2
        assert "1 connections" in repr(proxy)
    assert wait_until(lambda: proxy.connections == 0)


@pytest.mark.parametrize("direction", ["to_server", "to_client", "both"])
def test_blackhole_holds_traffic_until_heal(proxy: FaultProxy, witness: nats.Client, direction: str) -> None:
    ev = Events()
    with proxied(proxy, ev) as nc:
        down = nc.subscribe("fp.down")
        up = witness.subscribe("fp.up")
        nc.flush()
        witness.flush()
        proxy.blackhole(direction)  # type: ignore[arg-type]
        nc.publish("fp.up", b"1")
        witness.publish("fp.down", b"1")
        with pytest.raises(nats.TimeoutError):
            nc.flush(timeout=0.5)  # the PING or its PONG is held
        witness.flush()
        if direction in ("to_server", "both"):
            with pytest.raises(nats.TimeoutError):
                up.next_msg(timeout=0.3)
        else:
            assert up.next_msg(timeout=5).data == b"1"
        if direction in ("to_client", "both"):
            with pytest.raises(nats.TimeoutError):
                down.next_msg(timeout=0.3)
        else:
            assert down.next_msg(timeout=5).data == b"1"
        assert proxy.connections == 1 and not ev.disconnected.is_set()
        proxy.heal()
        nc.flush(timeout=5)  # the held bytes arrive, in order, on the same connection
        if direction in ("to_server", "both"):
            assert up.next_msg(timeout=5).data == b"1"
        if direction in ("to_client", "both"):
            assert down.next_msg(timeout=5).data == b"1"
        assert not ev.disconnected.is_set() and nc.stats.reconnects == 0


def test_blackhole_with_pings_makes_the_client_reconnect(proxy: FaultProxy) -> None:
    ev = Events()
    with proxied(proxy, ev, ping_interval=0.2, max_outstanding_pings=2) as nc:
        sub = nc.subscribe("fp.after")
        nc.flush()
        proxy.blackhole()
        assert ev.disconnected.wait(10), "the stale connection was never noticed"
        assert any(isinstance(e, nats.StaleConnectionError) for e in ev.errors)
        proxy.heal()
        assert ev.reconnected.wait(10)
        nc.publish("fp.after", b"x")
        assert sub.next_msg(timeout=5).data == b"x"


def test_stop_reading_stalls_the_clients_writes_while_the_server_still_talks(
        proxy: FaultProxy, witness: nats.Client) -> None:
    with proxied(proxy) as nc:
        down = nc.subscribe("fp.down")
        up = witness.subscribe("fp.up")
        nc.flush()
        witness.flush()
        proxy.stop_reading()
        payload = b"x" * 256 * 1024
        done = threading.Event()

        def publish_a_lot() -> None:
            for i in range(64):  # 16 MB: more than every kernel buffer on the way holds
                nc.publish("fp.up", b"%02d" % i + payload)
            done.set()

        publisher = threading.Thread(target=publish_a_lot, name="test-publisher", daemon=True)
        publisher.start()
        assert not done.wait(2.0), "the client's writes did not stall"
        # The other direction is untouched: what the server sends arrives.
        witness.publish("fp.down", b"still here")
        assert down.next_msg(timeout=5).data == b"still here"
        proxy.heal()
        assert done.wait(20)
        publisher.join(5)
        got = [up.next_msg(timeout=10).data[:2] for _ in range(64)]
        assert got == [b"%02d" % i for i in range(64)]


def test_stop_reading_with_a_closed_window_holds_a_big_write_until_cut(proxy: FaultProxy,
                                                                       witness: nats.Client) -> None:
    ev = Events()
    with proxied(proxy, ev) as nc:
        nc.flush()
        proxy.stop_reading(close_window=True)
        done = threading.Event()

        def publish_a_lot() -> None:
            try:
                for _ in range(24):  # 6 MB
                    nc.publish("fp.up", b"x" * 256 * 1024)
                done.set()
            except nats.OutboundBufferLimitError:
                pass  # after the cut: the rest does not fit the reconnect buffer

        publisher = threading.Thread(target=publish_a_lot, name="test-publisher", daemon=True)
        publisher.start()
        assert not done.wait(2.0), "the client's writes did not stall"
        proxy.heal()
        proxy.cut()  # the shrunk window stays with that connection: a new one is fast
        assert ev.reconnected.wait(10)
        publisher.join(10)
        up = witness.subscribe("fp.up2")
        witness.flush()
        nc.publish("fp.up2", b"y" * 512 * 1024)
        assert up.next_msg(timeout=10).data == b"y" * 512 * 1024


def test_stop_reading_from_the_server(proxy: FaultProxy, witness: nats.Client) -> None:
    with proxied(proxy) as nc:
        sub = nc.subscribe("fp.down")
        nc.flush()
        proxy.stop_reading("to_client")
        witness.publish("fp.down", b"1")
        witness.flush()
        with pytest.raises(nats.TimeoutError):
            sub.next_msg(timeout=0.3)
        proxy.heal()
        assert sub.next_msg(timeout=5).data == b"1"


@pytest.mark.parametrize("reset", [True, False])
def test_cut_closes_every_connection_and_clients_reconnect(proxy: FaultProxy, reset: bool) -> None:
    ev1, ev2 = Events(), Events()
    with proxied(proxy, ev1) as nc1, proxied(proxy, ev2) as nc2:
        sub = nc1.subscribe("fp.cut")
        nc1.flush()
        assert proxy.cut(reset=reset) == 2
        assert proxy.connections == 0 or proxy.accepted > 2  # the clients may be back already
        for ev in (ev1, ev2):
            assert ev.disconnected.wait(5) and ev.reconnected.wait(10)
        if reset:
            assert any("reset" in str(e).lower() for e in ev1.errors), ev1.errors
        assert proxy.accepted >= 4
        nc1.flush(timeout=5)  # the restored SUB has reached the server
        nc2.publish("fp.cut", b"after")
        assert sub.next_msg(timeout=5).data == b"after"


def test_refuse_new_connections(proxy: FaultProxy) -> None:
    with proxied(proxy) as nc:
        proxy.refuse_new()
        with pytest.raises(nats.NoServersError, match="refused"):
            nats.connect(proxy.url, connect_timeout=2)
        nc.flush(timeout=5)  # the open connection is not touched
        proxy.heal()
        with proxied(proxy) as again:
            again.flush(timeout=5)


def test_drop_new_connections(proxy: FaultProxy) -> None:
    with proxied(proxy) as nc:
        proxy.drop_new()
        with pytest.raises(nats.NoServersError):
            nats.connect(proxy.url, connect_timeout=2)
        assert proxy.accepted == 2 and proxy.connections == 1
        nc.flush(timeout=5)
        proxy.heal()
        with proxied(proxy) as again:
            again.flush(timeout=5)


def test_a_reconnect_held_open_by_a_blackholed_handshake(proxy: FaultProxy) -> None:
    ev = Events()
    # 2 s for each attempt's handshake: the first connect's too, which a loaded machine can take 0.5 s for.
    with proxied(proxy, ev, connect_timeout=2) as nc:
        proxy.blackhole()
        proxy.cut()
        assert ev.disconnected.wait(5)
        # Each attempt connects and then waits for an INFO that never comes.
        assert wait_until(lambda: any("INFO" in str(e) for e in ev.errors), timeout=10), ev.errors
        assert not nc.is_connected
        proxy.heal()
        assert ev.reconnected.wait(10)
        nc.flush(timeout=5)


@pytest.mark.parametrize("direction", ["to_client", "to_server", "both"])
def test_trickle_delivers_every_frame_split_into_bytes(proxy: FaultProxy, witness: nats.Client,
                                                       direction: str) -> None:
    with proxied(proxy) as nc:
        down = nc.subscribe("fp.down")
        up = witness.subscribe("fp.up")
        nc.flush()
        witness.flush()
        proxy.trickle(chunk_size=3, pause=0.0, direction=direction)  # type: ignore[arg-type]
        for i in range(5):
            witness.publish("fp.down", b"d%d" % i * 100, headers={"n": str(i)})
            nc.publish("fp.up", b"u%d" % i * 100)
        nc.flush(timeout=10)
        for i in range(5):
            msg = down.next_msg(timeout=10)
            assert (msg.data, msg.headers) == (b"d%d" % i * 100, {"n": str(i)})
            assert up.next_msg(timeout=10).data == b"u%d" % i * 100


def test_latency_delays_each_direction(proxy: FaultProxy) -> None:
    with proxied(proxy) as nc:
        nc.flush()
        proxy.latency(0.2, "to_server")
        # A lower bound on an injected delay cannot be broken by a slow machine.
        assert nc.rtt(timeout=10) >= 0.2
        proxy.latency(0.2)
        assert nc.rtt(timeout=10) >= 0.4
        proxy.heal()
        nc.flush(timeout=5)


def _raw_client(proxy: FaultProxy) -> socket.socket:
    """A bare socket speaking just enough NATS to subscribe."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    buf = b""
    while b"\r\n" not in buf:
        buf += sock.recv(4096)
    sock.sendall(b'CONNECT {"verbose":false}\r\nSUB fp.raw 1\r\nPING\r\n')
    while b"PONG\r\n" not in buf:
        buf += sock.recv(4096)
    return sock


@pytest.mark.parametrize("reset", [False, True])
def test_cut_mid_frame_delivers_part_of_the_next_frame(proxy: FaultProxy, witness: nats.Client,
                                                       reset: bool) -> None:
    sock = _raw_client(proxy)
    try:
        payload = b"p" * 10_000
        frame = b"MSG fp.raw 1 10000\r\n" + payload + b"\r\n"
        proxy.cut_mid_frame(reset=reset)
        witness.publish("fp.raw", payload)
        witness.flush()
        got = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            assert reset
        else:
            assert not reset
        assert 0 < len(got) < len(frame) and frame.startswith(got)
    finally:
        sock.close()
    # A real client: the cut frame is lost with its connection, the client resumes.
    ev = Events()
    with proxied(proxy, ev) as nc:
        sub = nc.subscribe("fp.mid")
        nc.flush()
        proxy.cut_mid_frame()
        witness.publish("fp.mid", b"lost" * 1000)
        assert ev.disconnected.wait(5) and ev.reconnected.wait(10)
        nc.flush(timeout=5)  # the restored SUB has reached the server
        witness.publish("fp.mid", b"after")
        assert sub.next_msg(timeout=5).data == b"after"


def test_heal_lifts_every_fault_at_once(proxy: FaultProxy, witness: nats.Client) -> None:
    with proxied(proxy) as nc:
        sub = nc.subscribe("fp.heal")
        nc.flush()
        proxy.latency(5.0)
        proxy.trickle(1, 0.5)
        proxy.blackhole("to_client")
        proxy.stop_reading()
        witness.publish("fp.heal", b"x")
        proxy.heal()
        nc.flush(timeout=3)
        assert sub.next_msg(timeout=3).data == b"x"


def test_a_dead_upstream_resets_new_connections_until_it_is_back() -> None:
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        ev = Events()
        with proxied(proxy, ev) as nc:
            server.kill()
            assert ev.disconnected.wait(5)
            with pytest.raises(nats.NoServersError):
                nats.connect(proxy.url, connect_timeout=1)
            server.start()
            assert ev.reconnected.wait(10)
            nc.flush(timeout=5)


def test_close_ends_and_joins_every_thread(server: NatsServer) -> None:
    proxy = FaultProxy(server.url).start()
    clients = [proxied(proxy) for _ in range(3)]
    names = [t.name for t in threading.enumerate() if t.name.startswith(f"natsjs-faultproxy-{proxy.port}-")]
    assert len(names) == 1 + 2 * 3
    assert any(n.endswith("-accept") for n in names)
    assert sum(n.endswith("-up") for n in names) == sum(n.endswith("-down") for n in names) == 3
    proxy.close()
    assert not [t for t in threading.enumerate() if t.name.startswith(f"natsjs-faultproxy-{proxy.port}-")]
    proxy.close()  # idempotent
    with pytest.raises(RuntimeError):
        proxy.start()
    for c in clients:
        c.close()


def test_bad_arguments_are_refused(server: NatsServer) -> None:
    for upstream in ("", "a:1,b:2", "nats://host-without-port", "nats://h:99999"):
        with pytest.raises(ValueError):
            FaultProxy(upstream)
    for bad in (None, 4222, ("h", "1")):
        with pytest.raises(TypeError):
            FaultProxy(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FaultProxy(server.url, max_buffer=0)
    with pytest.raises(ValueError):
        FaultProxy(server.url, port=70000)
    assert FaultProxy(("127.0.0.1", server.port)).url.startswith("nats://127.0.0.1:")
    assert FaultProxy(f"127.0.0.1:{server.port}").upstream == ("127.0.0.1", server.port)
    with FaultProxy(server.url) as proxy:
        with pytest.raises(ValueError):
            proxy.blackhole("sideways")  # type: ignore[arg-type]
        for seconds in (-1.0, float("nan"), float("inf"), "1"):
            with pytest.raises(ValueError):
                proxy.latency(seconds)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            proxy.trickle(chunk_size=0)
        with pytest.raises(ValueError):
            proxy.trickle(pause=-1)


def test_the_pytest_fixture(nats_fault_proxy: FaultProxy, nats_server: NatsServer) -> None:
    assert nats_fault_proxy.upstream == ("127.0.0.1", nats_server.port)
    with nats.connect(nats_fault_proxy.url) as nc:
        nc.flush()
        assert nats_fault_proxy.connections == 1


def test_the_example_on_the_testing_page_runs(nats_fault_proxy: FaultProxy) -> None:
    text = DOCS.read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    example = next(b for b in blocks if "nats_fault_proxy" in b and "def test_" in b)
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(example), str(DOCS), "exec"), namespace)
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 1
    start = time.monotonic()
    tests[0](nats_fault_proxy)
    assert time.monotonic() - start < 30
