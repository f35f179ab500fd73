"""Connect, auth, flush, drain, close, and what waiters see when the client closes."""

from __future__ import annotations

import socket
import sys
import threading
from types import FrameType

import pytest

import natsjs_sync as nats
from natsjs_sync._core.pool import ServerAddress
from natsjs_sync._core.spi import link
from natsjs_sync._core.transport import TcpTransport
from natsjs_sync._timeout import Deadline
from natsjs_sync.testing import NatsServer, free_port


def test_connect_to_nothing_raises_no_servers() -> None:
    port = free_port()
    with pytest.raises(nats.NoServersError, match=str(port)):
        nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=1)


def test_server_pool_skips_dead_servers(shared_server: NatsServer) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    with nats.connect([dead, shared_server.url]) as nc:
        assert nc.connected_url == shared_server.url


def test_nats_url_environment_variable(shared_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", shared_server.url)
    with nats.connect() as nc:
        assert nc.connected_url == shared_server.url


@pytest.mark.parametrize("bad", ["http://127.0.0.1:4222", "nats://127.0.0.1:notaport", ""])
def test_bad_urls(bad: str) -> None:
    with pytest.raises(ValueError):
        nats.connect(bad)


def test_user_password_and_wrong_password() -> None:
    with NatsServer(user="alice", password="s3cret-pw", jetstream=False) as server:
        with nats.connect(server.url, user="alice", password="s3cret-pw") as nc:
            nc.flush()
        host = server.url.split("//")[1]
        with nats.connect(f"nats://alice:s3cret-pw@{host}") as nc:
            nc.flush()
            assert "s3cret-pw" not in repr(nc) and "s3cret-pw" not in repr(nc._options)
        with pytest.raises(nats.AuthorizationError) as err:
            nats.connect(server.url, user="alice", password="wrong-pw")
        assert "Authorization Violation" in str(err.value)
        assert "wrong-pw" not in str(err.value)


def test_token_auth() -> None:
    with NatsServer(token="tok-123", jetstream=False) as server:
        with nats.connect(server.url, token="tok-123") as nc:
            nc.flush()
        host = server.url.split("//")[1]
        with nats.connect(f"nats://tok-123@{host}") as nc:
            nc.flush()
        with pytest.raises(nats.AuthorizationError):
            nats.connect(server.url, token="nope")


def test_flush_rtt_and_server_info(nc: nats.Client) -> None:
    nc.flush(timeout=2)
    assert 0 < nc.rtt() < 1
    assert nc.server_info["version"]
    assert nc.is_connected and not nc.is_closed
    assert nc.client_id is not None


def test_close_wakes_every_waiter(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url)
    sub = nc.subscribe("close.wait")
    nc.subscribe("close.svc")  # never answers
    results: dict[str, BaseException | None] = {}
    started = threading.Barrier(3)

    def wait_msg() -> None:
        started.wait()
        try:
            sub.next_msg(timeout=30)
        except BaseException as exc:
            results["next_msg"] = exc

    def wait_req() -> None:
        started.wait()
        try:
            nc.request("close.svc", b"x", timeout=30)
        except BaseException as exc:
            results["request"] = exc

    threads = [threading.Thread(target=wait_msg), threading.Thread(target=wait_req)]
    for t in threads:
        t.start()
    started.wait()
    # Both are now blocking (or about to): closing must release them promptly.
    nc.flush()
    nc.close()
    for t in threads:
        t.join(5)
        assert not t.is_alive()
    assert isinstance(results["next_msg"], nats.ConnectionClosedError)
    assert isinstance(results["request"], nats.ConnectionClosedError)
    with pytest.raises(nats.ConnectionClosedError):
        nc.publish("x", b"")
    with pytest.raises(nats.ConnectionClosedError):
        nc.flush()
    with pytest.raises(nats.ConnectionClosedError):
        nc.subscribe("x")
    nc.close()  # idempotent


def test_context_manager_closes_and_calls_closed_cb(shared_server: NatsServer) -> None:
    closed = threading.Event()
    with nats.connect(shared_server.url, closed_cb=closed.set) as nc:
        nc.publish("cm.x", b"")
    assert nc.is_closed
    assert closed.wait(2)


def test_close_sends_what_was_buffered(shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url) as receiver:
        sub = receiver.subscribe("close.flush")
        receiver.flush()
        sender = nats.connect(shared_server.url)
        for i in range(1000):
            sender.publish("close.flush", str(i).encode())
        sender.close()
        assert [sub.next_msg(5).data for _ in range(1000)] == [str(i).encode() for i in range(1000)]


def test_drain_lets_callbacks_finish_then_closes(shared_server: NatsServer) -> None:
    handled: list[bytes] = []
    gate = threading.Event()

    def handler(msg: nats.Msg) -> None:
        gate.wait(5)
        handled.append(msg.data)

    with nats.connect(shared_server.url) as pub:
        nc = nats.connect(shared_server.url)
        nc.subscribe("drain.cb", cb=handler)
        it = nc.subscribe("drain.iter")
        nc.flush()
        for i in range(50):
            pub.publish("drain.cb", str(i).encode())
            pub.publish("drain.iter", str(i).encode())
        pub.flush()
        nc.flush()  # every message is in our queues now
        gate.set()
        nc.drain(timeout=10)
        assert nc.is_closed
        assert handled == [str(i).encode() for i in range(50)]
        assert [m.data for m in it] == [str(i).encode() for i in range(50)]


def test_subscription_drain(nc: nats.Client) -> None:
    got: list[bytes] = []
    sub = nc.subscribe("subdrain", cb=lambda m: got.append(m.data))
    for i in range(20):
        nc.publish("subdrain", str(i).encode())
    sub.drain(timeout=5)
    nc.publish("subdrain", b"after")
    nc.flush()
    assert got == [str(i).encode() for i in range(20)]
    assert not sub.is_valid


def test_server_crash_without_reconnect_fails_waiters_instead_of_hanging() -> None:
    server = NatsServer(jetstream=False).start()
    disconnected = threading.Event()
    try:
        nc = nats.connect(server.url, disconnected_cb=disconnected.set, allow_reconnect=False)
        sub = nc.subscribe("crash.x")
        nc.flush()
        server.kill()
        with pytest.raises(nats.ConnectionClosedError):
            sub.next_msg(timeout=5)
        assert disconnected.wait(5)
        assert nc.is_closed
        with pytest.raises(nats.ConnectionClosedError):
            nc.request("crash.y", b"", timeout=5)
    finally:
        server.close()


def test_closing_after_the_reader_closed_the_socket_is_best_effort(shared_server: NatsServer) -> None:
    """close() sends what is buffered if it can; when the socket is already
    closed (the reader closes it as the connection ends, which can happen while
    close() runs) that last flush gives up quietly instead of raising OSError
    out of close() and leaving its threads behind (seen once under load)."""
    nc = nats.connect(shared_server.url)
    try:
        conn = link(nc)
        sock = socket.create_connection(("127.0.0.1", shared_server.port))
        sock.close()
        gone = TcpTransport(sock, conn.transport.addr)
        with pytest.raises(nats.NatsError):
            gone.set_write_timeout(1.0)
        nc.publish("left.behind", b"x")
        conn.writer.final_flush(gone, 1.0)  # raised OSError (EBADF) before
    finally:
        nc.close()
    assert nc.is_closed


@pytest.mark.parametrize("seconds", [None, 5.0], ids=["flusher", "deadline"])
def test_a_write_never_lands_on_the_descriptor_number_reused_after_the_reader_closed_it(
        shared_server: NatsServer, seconds: float | None) -> None:
    """The reader closes the socket as a connection ends, while a writer may be writing, and the
    number is reused at once (the reconnect's socket takes the lowest free one). A write that read
    the number, then let that thread run (any Python code, any release of the GIL may) before it
    sent, put its bytes on the other connection."""
    sock = socket.create_connection(("127.0.0.1", shared_server.port))
    number = sock.fileno()
    transport = TcpTransport(sock, ServerAddress("nats", "127.0.0.1", shared_server.port))
    reused: list[socket.socket] = []

    def close_and_reuse() -> None:
        transport.close()
        reused.extend(socket.socketpair())

    closer = threading.Thread(target=close_and_reuse, name="test-closer", daemon=True)

    def closing_thread_runs(frame: FrameType, event: str, arg: object) -> None:
        # Right before the write's sending call: the closing thread gets its chance.
        if event == "c_call" and not closer.ident and getattr(arg, "__name__", "") in _SENDING:
            closer.start()
            closer.join(0.5)  # done by then, unless the close waits for the send (as it must)

    sys.setprofile(closing_thread_runs)
    try:
        transport.write(b"PING\r\n", None if seconds is None else Deadline(seconds))
    except nats.errors.NatsConnectionError:
        pass  # closed first: nothing sent, which is fine
    finally:
        sys.setprofile(None)
        closer.join(10)
    try:
        assert closer.ident and not closer.is_alive()
        assert number in [s.fileno() for s in reused], "the number was not reused: the test proves nothing"
        for s in reused:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                assert not s.recv(1024), "the write went to the connection that reused the number"
    finally:
        for s in reused:
            s.close()


#: The calls of a write that send (the compiled one, and the socket's own).
_SENDING = ("send_nowait", "send", "sendall")
