"""Who waits for a socket write, and for how long, against a peer that stops reading.

A real server behind the fault proxy, which stops reading the client's bytes
(``stop_reading(close_window=True)``: the kernel buffers on the way fill at
once and stay full). The server allows 64 MiB messages, so one message is more
than every buffer on the way holds and its write stalls for good.

Only the flusher and a back-pressured publisher may wait ``write_timeout``
(30 s here, or 2 s where the stall itself is the subject); a call with a
deadline of its own keeps to it, the reader and timer threads never wait, and
a write that fails with one's own bytes is reported to the caller.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync._core.spi import link
from natsjs_sync.errors import DrainTimeoutError
from natsjs_sync.protocol import websocket as ws
from natsjs_sync.testing import FaultProxy, NatsServer

from ..certs import CertFiles, make_certs
from ..conftest import wait_until
from ..fakeserver import INFO, FakeServer, ScriptedConn

BIG = 12 * 1024 * 1024  # more than the kernel buffers on the way hold once the proxy's window is closed
HUGE = 48 * 1024 * 1024  # more than they hold with the window open
FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.0, "ping_interval": 0}
BOUND = 15.0  # generous: the bug costs the 30 s write timeout


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, max_payload=64 * 1024 * 1024) as s:
        yield s


def stalled_client(proxy: FaultProxy, write_timeout: float = 30.0, **options: Any) -> nats.Client:
    """A client whose bytes the proxy no longer reads (connected and flushed first)."""
    nc = nats.connect(proxy.url, name="stalled", write_timeout=write_timeout, **FAST, **options)
    nc.flush(timeout=5)
    proxy.stop_reading(close_window=True)
    return nc


def close_bounded(nc: nats.Client, *threads: threading.Thread) -> None:
    """Close (which cuts a stalled write) and see that it and ``threads`` end."""
    closer = threading.Thread(target=nc.close, name="test-closer", daemon=True)
    closer.start()
    closer.join(BOUND)
    assert not closer.is_alive(), "close() blocked"
    for t in threads:
        t.join(BOUND)
        assert not t.is_alive(), f"{t.name} still blocked after close()"


def in_thread(fn: Callable[[], object], name: str) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        except nats.NatsError:
            pass  # the stalled write ends with the connection

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


def test_a_request_whose_own_write_stalls_keeps_to_its_timeout(proxy: FaultProxy) -> None:
    nc = stalled_client(proxy)
    try:
        start = time.monotonic()
        with pytest.raises(nats.TimeoutError):
            nc.request("wd.req", b"x" * BIG, timeout=1)  # this thread writes it: nobody else is sending
        took = time.monotonic() - start
        assert took < BOUND, f"request(timeout=1) took {took:.1f} s: it waited for the write timeout"
        # The connection is still up: the flusher goes on with the rest of the message.
        assert nc.is_connected
    finally:
        close_bounded(nc)


def test_drain_keeps_to_its_timeout_while_the_write_side_is_stalled(proxy: FaultProxy) -> None:
    nc = stalled_client(proxy)
    for i in range(100):
        nc.subscribe(f"wd.drain.{i}")
    with pytest.raises(nats.TimeoutError):
        nc.request("wd.req", b"x" * BIG, timeout=1)  # fills every buffer on the way
    start = time.monotonic()
    with pytest.raises(DrainTimeoutError):
        nc.drain(timeout=1)
    took = time.monotonic() - start
    assert took < BOUND, f"drain(timeout=1) took {took:.1f} s"
    assert nc.is_closed


def test_publish_now_whose_bytes_cannot_be_written_raises(proxy: FaultProxy) -> None:
    lost = threading.Event()
    nc = stalled_client(proxy, write_timeout=2.0, disconnected_cb=lost.set)
    try:
        start = time.monotonic()
        with pytest.raises(nats.NatsError):
            nc.publish_now("wd.now", b"x" * BIG)
        assert time.monotonic() - start < BOUND
        assert lost.wait(BOUND)  # the stall was declared, and the connection dropped with its bytes
    finally:
        close_bounded(nc)


@pytest.mark.parametrize("how", ["publish", "publish_now"])
@pytest.mark.parametrize("where", ["reader", "timer"])
def test_the_reader_and_timer_threads_never_wait_for_a_stalled_write(proxy: FaultProxy, witness: nats.Client,
                                                                       where: str, how: str) -> None:
    """They publish past the back-pressure threshold (as stall replies and ack
    retries do), or publish_now (a reply), while the write side is stalled: the
    flusher gets their bytes, and they carry on with their next job."""
    nc = nats.connect(proxy.url, name="stalled", write_timeout=30.0, **FAST)
    core = link(nc)
    done: list[bytes] = []
    both = threading.Event()

    def job(tag: bytes) -> None:
        getattr(nc, how)("wd.out", tag)  # past the threshold: the old code waited here for the socket
        done.append(tag)
        if len(done) == 2:
            both.set()

    handle = core.route_internal("wd.in", lambda msg: job(msg.data))
    nc.publish("wd.big", b"")  # a known subject: a publish counts its bytes before it waits for the socket
    nc.flush(timeout=5)
    proxy.stop_reading(close_window=True)
    # One publisher's write stalls (it holds the send lock); a second one's bytes
    # wait in the buffer behind it, past the threshold.
    first = in_thread(lambda: nc.publish("wd.big", b"x" * BIG), "test-publisher-1")
    assert wait_until(lambda: nc.stats.out_bytes >= BIG, timeout=BOUND)
    second = in_thread(lambda: nc.publish("wd.big", b"y" * (2 * 1024 * 1024)), "test-publisher-2")
    assert wait_until(lambda: nc.stats.out_bytes >= BIG + 2 * 1024 * 1024, timeout=BOUND)
    try:
        if where == "reader":
            witness.publish("wd.in", b"1")
            witness.publish("wd.in", b"2")
            witness.flush(timeout=5)
        else:
            core.call_later(0, lambda: job(b"1"))
            core.call_later(0, lambda: job(b"2"))
        assert both.wait(BOUND), f"the {where} thread blocked on the stalled write (done: {done})"
        assert done == [b"1", b"2"]
    finally:
        handle.cancel()
        close_bounded(nc, first, second)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(certs: CertFiles) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, max_payload=64 * 1024 * 1024, tls_cert=certs.server_cert,
                    tls_key=certs.server_key) as s:
        yield s


@pytest.mark.parametrize("secure", [False, True], ids=["tcp", "tls"])
def test_what_a_timed_out_request_left_unsent_goes_out_whole_and_in_order(
        request: pytest.FixtureRequest, secure: bool) -> None:
    """The bytes a deadline left unsent are the flusher's: once the peer reads
    again the request and what followed arrive intact (no frame cut or lost;
    with TLS, the record OpenSSL had begun is finished with the same bytes)."""
    options: dict[str, Any] = {}
    if secure:
        certs: CertFiles = request.getfixturevalue("certs")
        upstream: NatsServer = request.getfixturevalue("tls_server")
        options["tls"] = ssl.create_default_context(cafile=str(certs.ca))
    else:
        upstream = request.getfixturevalue("server")
    payload = bytes(range(256)) * (HUGE // 256)
    with FaultProxy(upstream.url) as proxy, nats.connect(upstream.url, name="witness", **options) as witness:
        requests = witness.subscribe("wd.req", pending_bytes_limit=-1)
        after = witness.subscribe("wd.after")
        witness.flush(timeout=5)
        nc = nats.connect(proxy.url, name="stalled", write_timeout=60.0, **FAST, **options)
        core = link(nc)
        try:
            nc.flush(timeout=5)
            # Without a closed window the proxy's kernel keeps taking bytes for a while (up
            # to its 32 MB buffer): the message is bigger, so the request's write is cut short.
            proxy.stop_reading()
            with pytest.raises(nats.TimeoutError):
                nc.request("wd.req", payload, timeout=1)
            # The request's bytes are taken and stuck in a write (its own, cut short by its
            # deadline, or, on a loaded machine that took longer than the deadline to get
            # there, the flusher's): the socket holds part of the frame.
            w = core.writer
            assert wait_until(lambda: w.taken > len(payload) and w.sent_to < w.taken, 15), \
                "the request's bytes were not stuck in a write"
            nc.publish("wd.after", b"next")
            proxy.heal()
            nc.flush(timeout=30)
            assert requests.next_msg(timeout=10).data == payload
            assert after.next_msg(timeout=10).data == b"next"
            assert nc.is_connected and nc.stats.reconnects == 0
        finally:
            close_bounded(nc)


def _server_frame(opcode: int, payload: bytes) -> bytes:
    """An unmasked server-to-client WebSocket frame (up to 64 KiB)."""
    n = len(payload)
    size = bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")
    return bytes([0x80 | opcode]) + size + payload


def test_the_reader_answers_a_websocket_ping_without_waiting_for_a_stalled_write() -> None:
    """A WebSocket PING from the server is answered from the reader thread: it
    must not wait for the write lock a stalled write holds (what a real
    nats-server never does, so a scripted one: it stops reading, then pings)."""
    sid: list[int] = []
    ready = threading.Event()  # the test: the client's write side is stalled
    finished = threading.Event()

    def script(conn: ScriptedConn) -> None:
        while b"\r\n\r\n" not in conn.buf:
            conn.buf += conn.sock.recv(4096)
        head, _, conn.buf = conn.buf.partition(b"\r\n\r\n")
        key = next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                   if line.lower().startswith(b"sec-websocket-key:"))
        conn.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + ws.accept_for(key).encode() + b"\r\n\r\n")
        info = INFO.replace(b'"max_payload":1048576', b'"max_payload":67108864')
        conn.send(_server_frame(ws.OP_BINARY, info))
        conn.sock.recv(65536)  # CONNECT and PING (masked; not decoded)
        conn.send(_server_frame(ws.OP_BINARY, b"PONG\r\n"))
        assert ready.wait(BOUND)
        # From here on nothing the client writes is read.
        conn.send(_server_frame(ws.OP_PING, b"hi"))
        conn.send(_server_frame(ws.OP_BINARY, b"MSG wd.in %d 2\r\nok\r\n" % sid[0]))
        finished.wait(BOUND)

    with FakeServer(script) as fake:
        # Accepted connections inherit a small receive buffer: the client's writes stall at once.
        fake.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        url = f"ws://127.0.0.1:{fake.port}"
        nc = nats.connect(url, name="ws-stalled", write_timeout=30.0, allow_reconnect=False, ping_interval=0)
        writer = None
        try:
            sub = nc.subscribe("wd.in")
            sid.append(sub.sid)
            nc.publish("wd.big", b"")  # a known subject: the big publish is counted before it waits
            writer = in_thread(lambda: nc.publish("wd.big", b"x" * BIG), "test-publisher")
            assert wait_until(lambda: nc.stats.out_bytes >= BIG, timeout=BOUND)
            # Framed (masking 12 MiB takes a moment): the write holds the frame lock, stalled.
            transport = link(nc).transport
            assert wait_until(lambda: transport._wlock.locked(), timeout=BOUND)
            ready.set()
            assert sub.next_msg(timeout=BOUND).data == b"ok", "the reader blocked on the PONG"
        finally:
            finished.set()
            close_bounded(nc, *([writer] if writer is not None else []))
    assert not fake.errors


def test_publish_now_from_many_threads_leaves_nothing_behind(nc: nats.Client) -> None:
    """Threads that wait for the send lock, find their bytes written and return
    at once must not strand what others buffered meanwhile: every message
    arrives without a flush."""
    sub = nc.subscribe("wd.many", pending_msgs_limit=-1)
    nc.flush(timeout=5)
    threads, each = 8, 500

    def publish(t: int) -> None:
        for i in range(each):
            nc.publish_now("wd.many", b"%d.%d" % (t, i))

    workers = [threading.Thread(target=publish, args=(t,), name=f"test-now-{t}") for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(BOUND)
        assert not w.is_alive()
    got = [sub.next_msg(timeout=BOUND).data for _ in range(threads * each)]
    assert sorted(got) == sorted(b"%d.%d" % (t, i) for t in range(threads) for i in range(each))


def test_a_stall_is_declared_within_the_write_timeout_while_requests_keep_coming(proxy: FaultProxy) -> None:
    """Each request writes for its second and leaves the rest: the write timeout
    still counts from when the bytes first stuck, not from each new attempt."""
    lost = threading.Event()
    nc = stalled_client(proxy, write_timeout=3.0, disconnected_cb=lost.set, allow_reconnect=False)
    try:
        start = time.monotonic()
        for _ in range(30):  # 30 s at most
            try:
                nc.request("wd.req", b"x" * (BIG // 2), timeout=1)
            except nats.NatsError:
                pass
            if lost.is_set() or not nc.is_connected:
                break
        took = time.monotonic() - start
        assert lost.wait(BOUND)
        assert took < 12, f"the stall was declared after {took:.1f} s (write_timeout=3)"
    finally:
        close_bounded(nc)


# A program that restored SIGPIPE's default action (a command line piped into ``head`` does) and
# publishes while the server resets the connection: every write to the reset socket must fail
# with an error the client turns into a reconnect, never the signal that kills the process.
_SIGPIPE_PROGRAM = """
import signal, sys, threading
import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

signal.signal(signal.SIGPIPE, signal.SIG_DFL)
with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
    reconnected = threading.Event()
    nc = nats.connect(proxy.url, reconnect_time_wait=0.01, reconnect_jitter=0.0, max_reconnect_attempts=-1,
                      reconnected_cb=reconnected.set, error_cb=lambda e: None)
    stop = threading.Event()

    def publish() -> None:
        while not stop.is_set():
            try:
                nc.publish("p", b"x" * 100)
                nc.request("nobody", b"", timeout=0.5)
            except nats.errors.Error:
                pass

    workers = [threading.Thread(target=publish) for _ in range(4)]
    for w in workers:
        w.start()
    cuts = 0
    while cuts < 80:
        proxy.cut(reset=True)
        cuts += 1
        assert reconnected.wait(60), "no reconnect"
        reconnected.clear()
    stop.set()
    for w in workers:
        w.join(10)
    nc.publish("p", b"after")
    try:
        nc.flush(10)
    except nats.errors.NatsConnectionError:
        nc.flush(10)  # the first flush after a loss says that messages before it may be gone
    nc.close()
print("alive after", cuts, "resets")
"""


@pytest.mark.parametrize("pure_python", [False, True], ids=["compiled", "pure-python"])
def test_a_reset_connection_never_kills_a_program_that_restored_sigpipe(pure_python: bool) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("NATSJS_SYNC_PURE_PYTHON", None)
    if pure_python:
        env["NATSJS_SYNC_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-c", _SIGPIPE_PROGRAM], capture_output=True, text=True, timeout=600,
                          env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -13: killed by SIGPIPE
    assert done.stdout.startswith("alive after 80 resets"), done.stdout
