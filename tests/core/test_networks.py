"""Networks between the client and its servers: a SOCKS5 proxy (a real proxy process on
127.0.0.1: ours, from the RFCs, and pproxy when installed), a custom dialer, a local
address, ignoring discovered servers, WebSocket compression and a WebSocket proxy path;
and each option refused on bad input before anything is opened."""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync._connect import connect_options
from natsjs_sync.errors import InvalidCallbackTypeError
from natsjs_sync.testing import NatsCluster, NatsServer
from natsjs_sync.testing.server import free_port

_SOCKS_SERVER = Path(__file__).resolve().parent.parent / "socks5_server.py"


@dataclass
class Proxy:
    """A SOCKS5 proxy process; ``lines``: what it printed (ours: one ``CONNECT host port`` a connection)."""

    proc: subprocess.Popen[str]
    port: int
    #: Ours (it logs each CONNECT, answers RFC 1929's status, and replies only once the
    #: server is reached); pproxy replies success first and closes on a failure.
    ours: bool
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def url(self, user: str | None = None, password: str | None = None) -> str:
        cred = f"{user}:{password}@" if user is not None else ""
        return f"socks5://{cred}127.0.0.1:{self.port}"


def _our_proxy(*args: str) -> Proxy:
    proc = subprocess.Popen([sys.executable, str(_SOCKS_SERVER), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # printed once it listens
    assert first.startswith("PORT "), first
    proxy = Proxy(proc, int(first.split()[1]), ours=True)

    def collect() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            proxy.lines.put(line.strip())

    threading.Thread(target=collect, daemon=True).start()
    return proxy


def _pproxy(user: str | None = None, password: str | None = None) -> Proxy:
    pytest.importorskip("pproxy")
    port = free_port()
    auth = f"#{user}:{password}" if user is not None else ""
    proc = subprocess.Popen([sys.executable, "-m", "pproxy", "-l", f"socks5://127.0.0.1:{port}{auth}",
                             "--auth", "0"],  # no trust of an address that authenticated before
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    for _ in range(500):  # bounded: until it listens (its start takes a moment)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            try:
                proc.wait(0.02)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail("pproxy exited at start")
    else:
        pytest.fail("pproxy never listened")
    return Proxy(proc, port, ours=False)


def _stop(proxy: Proxy) -> None:
    proxy.proc.kill()
    proxy.proc.wait(10)
    for stream in (proxy.proc.stdin, proxy.proc.stdout):
        if stream is not None:
            stream.close()


@pytest.fixture(params=["ours", "pproxy"])
def socks(request: pytest.FixtureRequest) -> Iterator[Proxy]:
    proxy = _our_proxy() if request.param == "ours" else _pproxy()
    yield proxy
    _stop(proxy)


@pytest.fixture(params=["ours", "pproxy"])
def socks_auth(request: pytest.FixtureRequest) -> Iterator[Proxy]:
    proxy = _our_proxy("--user", "alice", "--password", "s3cret") if request.param == "ours" else _pproxy(
        "alice", "s3cret")
    yield proxy
    _stop(proxy)


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False) as s:
        yield s


def _round_trip(nc: nats.Client, subject: str = "through") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"via the proxy")
    assert sub.next_msg(timeout=5).data == b"via the proxy"
    sub.unsubscribe()


# ---------------------------------------------------------------------------- SOCKS5


def test_connect_through_a_socks5_proxy_with_the_name_resolved_by_the_proxy(socks: Proxy,
                                                                           server: NatsServer) -> None:
    url = f"nats://localhost:{server.port}"
    with nats.connect(url, socks_proxy=socks.url(), connect_timeout=10) as nc:
        _round_trip(nc)
        assert nc.connected_url == url
    if socks.ours:  # ours logs what it was asked to reach
        assert socks.lines.get(timeout=10) == f"CONNECT localhost {server.port}"  # a name: remote DNS


def test_socks5_user_and_password(socks_auth: Proxy, server: NatsServer) -> None:
    with nats.connect(server.url, socks_proxy=socks_auth.url("alice", "s3cret"), connect_timeout=10) as nc:
        _round_trip(nc)
    with pytest.raises(nats.NoServersError) as err:
        nats.connect(server.url, socks_proxy=socks_auth.url("alice", "wrong"), connect_timeout=10,
                     allow_reconnect=False)
    assert "wrong" not in str(err.value)
    if socks_auth.ours:  # pproxy closes instead of answering RFC 1929's status
        assert "refused the user name and password" in str(err.value)
    else:
        assert "closed the connection" in str(err.value)
    with pytest.raises(nats.NoServersError) as err:  # no credentials given to a proxy that wants them
        nats.connect(server.url, socks_proxy=socks_auth.url(), connect_timeout=10)
    if socks_auth.ours:
        assert "accepts none of the methods offered (no authentication)" in str(err.value)


def test_reconnect_through_the_proxy_after_a_server_restart(socks: Proxy) -> None:
    reconnected = threading.Event()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, socks_proxy=socks.url(), reconnect_time_wait=0.05,
                          max_reconnect_attempts=-1, reconnected_cb=reconnected.set, connect_timeout=10)
        try:
            sub = nc.subscribe("after")
            nc.flush(timeout=5)
            server.restart()
            assert reconnected.wait(30)
            nc.publish("after", b"restart")
            assert sub.next_msg(timeout=5).data == b"restart"
        finally:
            nc.close()
    if socks.ours:
        assert [socks.lines.get(timeout=10), socks.lines.get(timeout=10)] == [
            f"CONNECT 127.0.0.1 {server.port}"] * 2  # both connections went through the proxy


def test_a_proxy_that_cannot_reach_the_server_fails_the_attempt(socks: Proxy) -> None:
    port = free_port()  # nobody listens there
    with pytest.raises(nats.NoServersError) as err:
        nats.connect(f"nats://127.0.0.1:{port}", socks_proxy=socks.url(), connect_timeout=10)
    if socks.ours:
        assert "SOCKS5 proxy" in str(err.value) and "connection refused" in str(err.value)


def test_a_host_name_socks5_cannot_carry_fails_that_server_only(socks: Proxy, server: NatsServer) -> None:
    # SOCKS5 carries a host name of at most 255 bytes: a longer one fails its server's attempt
    # (as a connect error, so the next server is tried), not the whole connect.
    too_long = "nats://" + "a" * 300 + ":4222"
    with nats.connect(servers=[too_long, server.url], socks_proxy=socks.url(), dont_randomize=True,
                      connect_timeout=10) as nc:
        _round_trip(nc)
    with pytest.raises(nats.NoServersError, match="255 bytes"):
        nats.connect(too_long, socks_proxy=socks.url(), connect_timeout=10)


def test_connect_timeout_covers_the_proxy_handshake(server: NatsServer) -> None:
    # A "proxy" that takes the TCP connection (the kernel does) and never answers.
    with socket.create_server(("127.0.0.1", 0)) as mute:
        proxy = f"socks5://127.0.0.1:{mute.getsockname()[1]}"
        with pytest.raises(nats.NoServersError, match="timed out during the proxy's handshake"):
            nats.connect(server.url, socks_proxy=proxy, connect_timeout=0.3)


def test_a_context_socks_proxy_is_used(socks: Proxy, server: NatsServer, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from natsjs_sync import natscontext

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    natscontext.save("proxied", url=server.url, socks_proxy=f"127.0.0.1:{socks.port}")
    with nats.connect(context="proxied", connect_timeout=10) as nc:
        _round_trip(nc)
    if socks.ours:
        assert socks.lines.get(timeout=10) == f"CONNECT 127.0.0.1 {server.port}"


# ---------------------------------------------------------------------------- dialer, local address


def test_a_custom_dialer_makes_every_connection(server: NatsServer) -> None:
    calls: list[tuple[str, int, float | None]] = []

    def dialer(host: str, port: int, timeout: float | None) -> socket.socket:
        calls.append((host, port, timeout))
        return socket.create_connection((host, port), timeout=timeout)

    with nats.connect(server.url, custom_dialer=dialer, connect_timeout=7) as nc:
        _round_trip(nc)
    assert len(calls) == 1 and calls[0][:2] == ("127.0.0.1", server.port)
    assert calls[0][2] is not None and 0 < calls[0][2] <= 7


class _MeteredSocket(socket.socket):
    """A dialer's socket with a send and a sendall of its own (a meter, as a shaper or a tunnel
    has), each with the one argument the client has always passed."""

    def __init__(self, fileno: int) -> None:
        super().__init__(fileno=fileno)
        self.metered = 0

    def send(self, data: bytes) -> int:  # type: ignore[override]
        sent = super().send(data)
        self.metered += sent
        return sent

    def sendall(self, data: bytes) -> None:  # type: ignore[override]
        super().sendall(data)
        self.metered += len(memoryview(data).cast("B"))


def test_a_dialers_socket_with_its_own_send_gets_every_byte(server: NatsServer) -> None:
    # The client writes through the socket's own send and sendall, as it is given them: a write
    # past them (straight to the descriptor) would skip what the subclass does with the bytes.
    dialed: list[_MeteredSocket] = []

    def dialer(host: str, port: int, timeout: float | None) -> socket.socket:
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.settimeout(None)
        dialed.append(_MeteredSocket(raw.detach()))
        return dialed[-1]

    with nats.connect(server.url, custom_dialer=dialer) as nc:
        _round_trip(nc)
        with pytest.raises(nats.errors.NoRespondersError):
            nc.request("nobody.home", b"?", timeout=5)  # a deadline-bounded write
        nc.flush(timeout=5)
        [sock] = dialed
        assert sock.metered > len(b"PUB through 13\r\nvia the proxy\r\n")


def test_a_failing_dialer_fails_the_attempt(server: NatsServer) -> None:
    def refuses(host: str, port: int, timeout: float | None) -> socket.socket:
        raise RuntimeError("no route for you")

    with pytest.raises(nats.NoServersError, match="no route for you"):
        nats.connect(server.url, custom_dialer=refuses)

    def not_a_socket(host: str, port: int, timeout: float | None) -> socket.socket:
        return "127.0.0.1"  # type: ignore[return-value]

    with pytest.raises(nats.NoServersError, match="not a connected socket"):
        nats.connect(server.url, custom_dialer=not_a_socket)


def test_a_dialer_that_returns_a_closed_socket_fails_the_attempt(server: NatsServer) -> None:
    def closed(host: str, port: int, timeout: float | None) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.close()
        return sock

    with pytest.raises(nats.NoServersError, match="closed socket"):
        nats.connect(server.url, custom_dialer=closed)


def test_reconnect_goes_on_when_the_dialer_returns_a_closed_socket() -> None:
    # The first connection is sound; every reconnect gets a closed socket. Each attempt must
    # fail as a connect (reported), until the attempts run out and the client closes.
    calls: list[float | None] = []
    errors: list[Exception] = []
    closed_for_good = threading.Event()

    def dialer(host: str, port: int, timeout: float | None) -> socket.socket:
        calls.append(timeout)
        if len(calls) > 1:
            # Closed without connecting: whether the restarting server is up yet or not
            # (a connect to it could be refused first, and the attempts run out).
            sock = socket.socket()
            sock.close()
            return sock
        return socket.create_connection((host, port), timeout=timeout)

    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, custom_dialer=dialer, reconnect_time_wait=0.01, max_reconnect_attempts=2,
                          error_cb=errors.append, closed_cb=closed_for_good.set)
        try:
            nc.flush(timeout=5)
            server.restart()
            assert closed_for_good.wait(30), "the reconnect loop stopped without closing the client"
        finally:
            nc.close()
    assert len(calls) == 3  # the first connect and both reconnect attempts
    assert any("closed socket" in str(e) for e in errors), errors


def _dialer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("natsjs-dialer-")]


def test_a_dialer_that_does_not_return_is_cut_by_the_connect_timeout(
        server: NatsServer, caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    returned: list[socket.socket] = []

    def stuck(host: str, port: int, timeout: float | None) -> socket.socket:
        release.wait(30)  # ignores its timeout, as a dialer blocked in user code does
        sock = socket.create_connection((host, port), timeout=5)
        returned.append(sock)
        return sock

    # 2 s: the bound below (the timeout counted twice would be 4 s) leaves a loaded machine 1.8 s.
    connect_timeout = 2.0
    try:
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="natsjs_sync.connection"), \
                pytest.raises(nats.NoServersError, match="the custom dialer did not return in time"):
            nats.connect(server.url, name="stuck", custom_dialer=stuck, connect_timeout=connect_timeout)
        elapsed = time.monotonic() - start
        [thread] = _dialer_threads()  # the call goes on, on a thread that says whose it is
        assert thread.name == "natsjs-dialer-stuck" and thread.is_alive()
        assert any("natsjs-dialer-stuck" in r.getMessage() for r in caplog.records), caplog.records
    finally:
        release.set()
    thread.join(10)
    assert not thread.is_alive()
    assert elapsed < 1.9 * connect_timeout, f"connect() took {elapsed:.2f} s with connect_timeout={connect_timeout}"
    assert len(returned) == 1 and returned[0].fileno() == -1  # the socket that came too late was closed


def test_reconnects_wait_for_a_hung_dialer_call_instead_of_calling_it_again() -> None:
    # Every attempt after the first connect hangs in the dialer: each reconnect attempt is cut
    # by connect_timeout, and they all wait for the one call already running.
    release = threading.Event()
    hang = threading.Event()  # set once connected: every call after that hangs
    calls: list[float | None] = []

    def dialer(host: str, port: int, timeout: float | None) -> socket.socket:
        if hang.is_set():
            calls.append(timeout)
            release.wait(10)
        return socket.create_connection((host, port), timeout=5)

    def connect(url: str) -> tuple[nats.Client, list[Exception], threading.Event]:
        # 0.3 s cuts each reconnect attempt short; for the first connect's handshake it is within
        # a loaded machine's reach: tried again (bounded), each try with callbacks of its own.
        for _ in range(10):
            errors: list[Exception] = []
            closed = threading.Event()
            try:
                return nats.connect(url, name="hung", custom_dialer=dialer, connect_timeout=0.3,
                                    reconnect_time_wait=0.01, max_reconnect_attempts=4, error_cb=errors.append,
                                    closed_cb=closed.set), errors, closed
            except nats.NoServersError:
                continue
        raise AssertionError("no first connect in 10 tries")

    with NatsServer(jetstream=False) as server:
        nc, errors, closed_for_good = connect(server.url)
        try:
            nc.flush(timeout=5)
            hang.set()
            server.restart()
            assert closed_for_good.wait(20), "the reconnect loop did not give up"
            threads = _dialer_threads()
        finally:
            release.set()
            nc.close()
        for thread in threads:
            thread.join(10)
    assert len(calls) == 1, calls  # one call all four attempts waited for
    assert [t.name for t in threads] == ["natsjs-dialer-hung"]
    assert sum("did not return in time" in str(e) for e in errors) == 4, errors


def _client_ports(server: NatsServer) -> list[int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/connz", timeout=10) as answer:
        return [c["port"] for c in json.load(answer)["connections"]]


def test_source_address_binds_the_local_end(server: NatsServer) -> None:
    local = free_port()
    with nats.connect(server.url, source_address=("127.0.0.1", local)) as nc:
        nc.flush(timeout=5)
        assert local in _client_ports(server)
    with nats.connect(server.url, source_address="127.0.0.1") as nc:  # a host alone: any port
        _round_trip(nc)


# ---------------------------------------------------------------------------- discovered servers


def test_ignore_discovered_servers_keeps_the_pool_as_given() -> None:
    announced = threading.Event()
    with NatsCluster(2, jetstream=False) as cluster:
        cluster.wait_routes()
        with nats.connect(cluster.urls[0], discovered_server_cb=announced.set) as nc:
            assert nc.discovered_servers  # the route's peer, from the handshake's INFO
        with nats.connect(cluster.urls[0], ignore_discovered_servers=True) as nc:
            assert nc.discovered_servers == [] and nc.servers == [cluster.urls[0]]
            cluster.restart_node(1)  # the first node announces its peer again
            cluster.wait_routes()
            nc.flush(timeout=5)
            assert nc.discovered_servers == []


# ---------------------------------------------------------------------------- WebSocket


class _CountingDialer:
    """A custom dialer that hands out one end of a socket pair and relays it to the
    server, counting the bytes the server sends (a Unix socket: no TCP options)."""

    def __init__(self) -> None:
        self.from_server = 0
        self.threads: list[threading.Thread] = []
        self.to_close: list[socket.socket] = []

    def __call__(self, host: str, port: int, timeout: float | None) -> socket.socket:
        upstream = socket.create_connection((host, port), timeout=timeout)
        upstream.settimeout(None)
        mine, theirs = socket.socketpair()

        def pump(src: socket.socket, dst: socket.socket, count: bool) -> None:
            try:
                while data := src.recv(65536):
                    if count:
                        self.from_server += len(data)
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                if count:  # the other pump ends too (its source is shut down); both sockets closed once
                    self.to_close += [src, dst]

        for args in ((upstream, theirs, True), (theirs, upstream, False)):
            t = threading.Thread(target=pump, args=args, daemon=True)
            t.start()
            self.threads.append(t)
        return mine

    def join(self) -> None:
        for t in self.threads:
            t.join(10)
        for s in self.to_close:
            s.close()


def _ws_server(compression: bool) -> tuple[NatsServer, str]:
    port = free_port()
    server = NatsServer(jetstream=False, config={
        "websocket": {"listen": f"127.0.0.1:{port}", "no_tls": True, "compression": compression}})
    return server, f"ws://127.0.0.1:{port}"


@pytest.mark.parametrize("server_compresses", [True, False])
def test_websocket_compression(server_compresses: bool) -> None:
    payload = b"compressible " * 20_000  # 260 kB that deflate shrinks a lot
    server, url = _ws_server(server_compresses)
    with server:
        counts = {}
        for offered in (False, True):
            dialer = _CountingDialer()
            with nats.connect(url, ws_compression=offered, custom_dialer=dialer) as nc:
                sub = nc.subscribe("big")
                for _ in range(3):
                    nc.publish("big", payload, headers={"K": "v"})
                for _ in range(3):
                    msg = sub.next_msg(timeout=10)
                    assert msg.data == payload and msg.headers == {"K": "v"}
                with nats.connect(server.url) as tcp:  # a TCP client sees what was published, uncompressed
                    tcp_sub = tcp.subscribe("back")
                    tcp.flush(timeout=5)
                    nc.publish("back", payload)
                    assert tcp_sub.next_msg(timeout=10).data == payload
            dialer.join()
            counts[offered] = dialer.from_server
    if server_compresses:
        assert counts[True] * 10 < counts[False], counts
    else:  # the server declines the offer: plain frames, same bytes
        assert counts[True] > 3 * len(payload)


def test_ws_proxy_path_is_the_upgrade_requests_path() -> None:
    # A server that records the upgrade request's first line, answers 404: the path is what counts.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        seen: list[bytes] = []

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                seen.append(data)
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        port = listener.getsockname()[1]
        with pytest.raises(nats.NoServersError, match="refused the WebSocket upgrade"):
            nats.connect(f"ws://127.0.0.1:{port}/ignored", ws_proxy_path="nats/ws", ws_compression=True,
                         allow_reconnect=False)
        t.join(10)
    head = seen[0].decode()
    assert head.startswith("GET /nats/ws HTTP/1.1\r\n")
    assert "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; " \
           "client_no_context_takeover\r\n" in head


def test_ws_proxy_path_against_a_real_server() -> None:
    with NatsServer(jetstream=False, websocket=True) as server:  # nats-server serves any path
        with nats.connect(server.ws_url, ws_proxy_path="/behind/the/proxy") as nc:
            _round_trip(nc)


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"socks_proxy": 1080}, TypeError, "socks_proxy must be a str"),
    ({"socks_proxy": "http://proxy:3128"}, ValueError, "socks5://"),
    ({"socks_proxy": "socks5://:1080"}, ValueError, "names no host"),
    ({"socks_proxy": "socks5://proxy:99999"}, ValueError, "bad port"),
    # A '#', '/' or '?' in a password not percent-encoded ends the address part early: what is
    # then read as the port is the password's start, and the message must not quote it.
    ({"socks_proxy": "socks5://alice:s3cret#x@proxy:1080"}, ValueError, "percent-encoded"),
    ({"socks_proxy": "socks5://alice:s3cret/x@proxy:1080"}, ValueError, "percent-encoded"),
    ({"socks_proxy": "socks5://alice:s3cret?x@proxy:1080"}, ValueError, "percent-encoded"),
    ({"socks_proxy": "socks5://alice@proxy:1080"}, ValueError, "no password"),
    ({"socks_proxy": "socks5://proxy:1080/path"}, ValueError, "no path"),
    ({"socks_proxy": "socks5://" + "u" * 256 + ":p@proxy:1080"}, ValueError, "255 bytes"),
    ({"custom_dialer": "dial"}, InvalidCallbackTypeError, "custom_dialer must be callable"),
    ({"custom_dialer": lambda h, p, t: None, "socks_proxy": "socks5://p:1080"}, ValueError, "not both"),
    ({"custom_dialer": lambda h, p, t: None, "source_address": "127.0.0.1"}, ValueError, "not both"),
    ({"source_address": 5}, TypeError, "source_address"),
    ({"source_address": ("127.0.0.1", 70000)}, ValueError, "port must be 0 to 65535"),
    ({"source_address": ("127.0.0.1", "80")}, TypeError, "source_address"),
    ({"ignore_discovered_servers": "yes"}, TypeError, "ignore_discovered_servers must be a bool"),
    ({"ws_compression": 1}, TypeError, "ws_compression must be a bool"),
    ({"ws_proxy_path": b"/p"}, TypeError, "ws_proxy_path must be a str"),
    ({"ws_proxy_path": "/a b"}, ValueError, "ws_proxy_path"),
    ({"ws_proxy_path": "/a\r\nX: y"}, ValueError, "ws_proxy_path"),
    ({"ws_proxy_path": ""}, ValueError, "ws_proxy_path"),
])
def test_bad_network_options_are_refused_before_anything_is_opened(kwargs: dict[str, object],
                                                                  error: type[Exception], match: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0)
        with pytest.raises(error, match=match) as err:
            nats.connect(f"nats://127.0.0.1:{listener.getsockname()[1]}", **kwargs)  # type: ignore[arg-type]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody came
    assert "s3cret" not in str(err.value)


def test_a_proxy_password_stays_out_of_reprs() -> None:
    options = connect_options("nats://127.0.0.1:4222", socks_proxy="socks5://alice:s3cret@proxy:1080")
    assert "s3cret" not in repr(options) and "s3cret" not in repr(options.network)
    assert options.network.socks_proxy is not None and options.network.socks_proxy.url == (
        "socks5://alice:***@proxy:1080")
    assert os.fspath(_SOCKS_SERVER)  # the proxy the tests run is a file of the repository
