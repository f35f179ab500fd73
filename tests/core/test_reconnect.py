"""Reconnects against real servers: restart, buffering, restore, clusters, lame duck."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsCluster, NatsServer

from ..conftest import wait_until

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "max_reconnect_attempts": -1}


class Events:
    """Connection callbacks turned into events a test can wait on."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()
        self.errors: list[Exception] = []

    def kwargs(self) -> dict[str, object]:
        return {
            "disconnected_cb": self.disconnected.set,
            "reconnected_cb": self.reconnected.set,
            "closed_cb": self.closed.set,
            "error_cb": self.errors.append,
        }


def test_restart_restores_subscriptions_and_delivers_buffered_publishes() -> None:
    ev = Events()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            plain = nc.subscribe("rc.plain")
            grouped = nc.subscribe("rc.grouped", queue="q")
            limited = nc.subscribe("rc.limited", max_msgs=5)
            for _ in range(2):
                nc.publish("rc.limited", b"before")
            nc.flush()
            server.kill()
            assert ev.disconnected.wait(5)
            assert nc.is_reconnecting
            # Published while disconnected: held in the buffer.
            for i in range(100):
                nc.publish("rc.plain", str(i).encode())
                nc.publish("rc.grouped", str(i).encode())
            for _ in range(10):
                nc.publish("rc.limited", b"after")
            assert nc.pending_data_size > 0
            server.start()
            assert ev.reconnected.wait(10)
            nc.flush(timeout=5)
            assert [plain.next_msg(2).data for _ in range(100)] == [str(i).encode() for i in range(100)]
            assert [grouped.next_msg(2).data for _ in range(100)] == [str(i).encode() for i in range(100)]
            # max_msgs=5 was restored as "3 more": 2 before + 3 after.
            assert [m.data for m in limited] == [b"before"] * 2 + [b"after"] * 3
            assert nc.stats.reconnects == 1
            assert nc.is_connected
        finally:
            nc.close()


def test_reconnect_buffer_is_bounded_and_says_so() -> None:
    ev = Events()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, pending_size=10_000, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            sub = nc.subscribe("rc.bound")
            nc.flush()
            server.kill()
            assert ev.disconnected.wait(5)
            accepted = 0
            with pytest.raises(nats.OutboundBufferLimitError):
                for i in range(1000):
                    nc.publish("rc.bound", b"%04d" % i + b"x" * 96)
                    accepted += 1
            assert 50 < accepted < 100
            server.start()
            assert ev.reconnected.wait(10)
            nc.flush(timeout=5)
            got = [sub.next_msg(2).data[:4] for _ in range(accepted)]
            assert got == [b"%04d" % i for i in range(accepted)]  # every accepted one, in order
        finally:
            nc.close()


def test_request_in_flight_fails_fast_when_the_connection_breaks() -> None:
    ev = Events()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            got_request = threading.Event()
            responder = nats.connect(server.url, allow_reconnect=False)
            responder.subscribe("rc.slow", cb=lambda m: got_request.set())  # never answers
            responder.flush()
            result: list[BaseException] = []

            def ask() -> None:
                try:
                    nc.request("rc.slow", b"?", timeout=30)
                except BaseException as exc:
                    result.append(exc)

            t = threading.Thread(target=ask)
            t.start()
            assert got_request.wait(5)
            server.kill()
            t.join(5)
            assert not t.is_alive()
            assert isinstance(result[0], nats.ConnectionError)
            assert not isinstance(result[0], nats.TimeoutError)
            responder.close()
        finally:
            nc.close()


def test_request_made_while_reconnecting_is_sent_after_the_reconnect() -> None:
    ev = Events()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            nc.subscribe("rc.echo", cb=lambda m: m.respond(m.data))
            nc.request("rc.echo", b"warm", timeout=2)
            server.kill()
            assert ev.disconnected.wait(5)
            restarter = threading.Timer(0.3, server.start)
            restarter.start()
            assert nc.request("rc.echo", b"later", timeout=10).data == b"later"
            restarter.join()
        finally:
            nc.close()


def test_gives_up_after_max_reconnect_attempts() -> None:
    ev = Events()
    server = NatsServer(jetstream=False).start()
    try:
        nc = nats.connect(server.url, reconnect_time_wait=0.05, max_reconnect_attempts=3, **ev.kwargs())  # type: ignore[arg-type]
        server.kill()
        assert ev.closed.wait(10)
        assert nc.is_closed
        assert any(isinstance(e, nats.NoServersError) for e in ev.errors)
        with pytest.raises(nats.ConnectionClosedError):
            nc.publish("x", b"")
    finally:
        server.close()


@pytest.mark.slow
def test_every_flushed_message_arrives_once_across_a_server_restart() -> None:
    """8 threads publish in batches and flush while the server is killed and restarted.

    A batch whose flush returned is confirmed: each of its messages must reach
    the subscriber exactly once. A batch whose flush failed may be lost in part,
    but nothing is ever delivered twice.
    """
    threads_n, batches, batch_size = 8, 40, 25
    ev = Events()
    with NatsServer(jetstream=False) as server:
        nc = nats.connect(server.url, pending_size=64 * 1024 * 1024, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            sub = nc.subscribe("rc.many", pending_msgs_limit=1_000_000)
            nc.flush()
            confirmed: set[bytes] = set()
            uncertain: set[bytes] = set()
            lock = threading.Lock()
            halfway = threading.Barrier(threads_n + 1)

            def publisher(t: int) -> None:
                for b in range(batches):
                    if b == batches // 2:
                        halfway.wait(30)
                    batch = [f"{t}.{b}.{i}".encode() for i in range(batch_size)]
                    for body in batch:
                        nc.publish("rc.many", body)
                    try:
                        nc.flush(timeout=20)
                        with lock:
                            confirmed.update(batch)
                    except nats.NatsError:
                        with lock:
                            uncertain.update(batch)

            threads = [threading.Thread(target=publisher, args=(t,)) for t in range(threads_n)]
            for t in threads:
                t.start()
            halfway.wait(30)
            server.kill()
            assert ev.disconnected.wait(5)
            server.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads)
            assert ev.reconnected.wait(10)  # its callback runs on the dispatcher, maybe after the publishers ended
            nc.flush(timeout=10)
            received: Counter[bytes] = Counter()
            while True:
                try:
                    received[sub.next_msg(timeout=0.5).data] += 1
                except nats.TimeoutError:
                    break
            assert len(confirmed) + len(uncertain) == threads_n * batches * batch_size
            assert confirmed, "no batch was confirmed"
            missing = confirmed - set(received)
            assert not missing, f"{len(missing)} confirmed messages lost"
            assert max(received.values()) == 1, "a message was delivered twice"
            assert set(received) <= confirmed | uncertain
        finally:
            nc.close()


@pytest.mark.cluster
def test_cluster_node_killed_client_moves_on(nats_cluster: NatsCluster) -> None:
    ev = Events()
    nc = nats.connect(nats_cluster.urls, no_randomize=True, **FAST, **ev.kwargs())  # type: ignore[arg-type]
    try:
        first = nc.connected_url
        assert first == nats_cluster.urls[0]
        sub = nc.subscribe("cl.x")
        nc.flush()
        nats_cluster.kill_node(0)
        assert ev.reconnected.wait(10)
        assert nc.connected_url in nats_cluster.urls[1:]
        nc.publish("cl.x", b"after failover")
        nc.flush()
        assert sub.next_msg(timeout=5).data == b"after failover"
    finally:
        nc.close()


@pytest.mark.cluster
def test_discovered_servers_join_the_pool(nats_cluster: NatsCluster) -> None:
    with nats.connect(nats_cluster.urls[0]) as nc:
        # A peer whose route forms after we connected is announced by a later INFO.
        assert wait_until(lambda: set(nats_cluster.urls[1:]) <= set(nc.discovered_servers), timeout=10)
        assert set(nats_cluster.urls[1:]) <= set(nc.servers)


@pytest.mark.cluster
def test_lame_duck_moves_the_client_to_another_server() -> None:
    with NatsCluster(size=2, jetstream=False, lame_duck_duration="30s", lame_duck_grace_period="1s") as cluster:
        ev = Events()
        ldm = threading.Event()
        nc = nats.connect(cluster.urls, no_randomize=True, lame_duck_mode_cb=ldm.set, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            assert nc.connected_url == cluster.urls[0]
            cluster.nodes[0].lame_duck()
            assert ldm.wait(10)
            assert ev.reconnected.wait(10)
            assert nc.connected_url == cluster.urls[1]
            nc.flush()
        finally:
            nc.close()


def test_a_flush_after_an_outage_that_swallowed_a_publish_fails() -> None:
    # A publish written to the socket, then the connection lost before any PONG: the message
    # may be gone with it. A flush asked for during the outage (or just after it) must not
    # then report success on the next connection's PONG (it did: the message never arrived).
    ev = Events()
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        watcher = nats.connect(server.url)
        nc = nats.connect(proxy.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            sub = watcher.subscribe("swallowed")
            watcher.flush()
            nc.flush()
            proxy.blackhole("to_server")
            nc.publish("swallowed", b"lost")
            assert wait_until(lambda: proxy.client_frames("PUB") >= 1, timeout=10)  # left the client
            proxy.cut()  # the held bytes die with the connection
            proxy.heal()
            assert ev.disconnected.wait(10)
            with pytest.raises(nats.ConnectionError, match="may not have arrived"):
                nc.flush(timeout=30)
            assert ev.reconnected.wait(10)  # its callback runs on the dispatcher, maybe after the flush raised
            nc.flush(timeout=10)  # the next one vouches for the new connection again
            with pytest.raises(nats.TimeoutError):
                sub.next_msg(timeout=0.5)  # it was indeed lost
        finally:
            nc.close()
            watcher.close()


def test_a_keepalive_pong_after_an_outage_does_not_vouch_for_a_swallowed_publish() -> None:
    # The new connection's first PONG answered a keep-alive, not a flush: nobody was told
    # that the publish may be gone, so the flush after it must still say so (it returned).
    ev = Events()
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        watcher = nats.connect(server.url)
        nc = nats.connect(proxy.url, ping_interval=0.1, max_outstanding_pings=1000,  # type: ignore[arg-type]
                          **FAST, **ev.kwargs())
        try:
            sub = watcher.subscribe("swallowed")
            watcher.subscribe("echo", cb=lambda m: m.respond(b"ok"))
            watcher.flush()
            nc.flush()
            proxy.blackhole("to_server")
            nc.publish("swallowed", b"lost")
            assert wait_until(lambda: proxy.client_frames("PUB") >= 1, timeout=10)  # left the client
            proxy.cut()
            proxy.heal()
            assert ev.reconnected.wait(10)
            pongs = proxy.server_frames("PONG")  # the handshake's included
            assert wait_until(lambda: proxy.server_frames("PONG") > pongs, timeout=10)  # a keep-alive's
            nc.request("echo", b"?", timeout=10)  # its reply came after that PONG: the client read it
            with pytest.raises(nats.ConnectionError, match="may not have arrived"):
                nc.flush(timeout=10)
            nc.flush(timeout=10)  # said once: the next one vouches again
            with pytest.raises(nats.TimeoutError):
                sub.next_msg(timeout=0.2)  # it was indeed lost
        finally:
            nc.close()
            watcher.close()


def test_a_request_withdrawn_during_an_outage_is_no_message_a_later_loss_swallowed() -> None:
    # A withdrawn request never went out, though its bytes keep their stream offsets:
    # losing the next connection, on which nothing but restored subscriptions was
    # written, loses no message, and the flush after it must succeed (it failed).
    ev = Events()
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        nc = nats.connect(proxy.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            nc.flush()
            proxy.refuse_new()
            proxy.cut()
            assert ev.disconnected.wait(10)
            with pytest.raises(nats.NotSentError):
                nc.request("nobody", b"?", timeout=0.2)
            proxy.heal()
            assert ev.reconnected.wait(10)
            ev.reconnected.clear()
            proxy.cut()
            assert ev.reconnected.wait(10)
            nc.flush(timeout=10)
        finally:
            nc.close()


def test_draining_a_subscription_after_an_outage_neither_fails_nor_uses_up_the_word_of_a_loss() -> None:
    # The drain's flush is a barrier for its UNSUB: a publish the outage swallowed is not
    # its business (it raised), and the user's next flush must still say so (it vouched).
    ev = Events()
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        watcher = nats.connect(server.url)
        nc = nats.connect(proxy.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            lost = watcher.subscribe("swallowed")
            watcher.flush()
            sub = nc.subscribe("drained")
            nc.flush()
            proxy.blackhole("to_server")
            nc.publish("swallowed", b"lost")
            assert wait_until(lambda: proxy.client_frames("PUB") >= 1, timeout=10)  # left the client
            proxy.cut()
            proxy.heal()
            assert ev.reconnected.wait(10)
            sub.drain(timeout=10)
            with pytest.raises(nats.ConnectionError, match="may not have arrived"):
                nc.flush(timeout=10)
            nc.flush(timeout=10)
            with pytest.raises(nats.TimeoutError):
                lost.next_msg(timeout=0.2)  # it was indeed lost
        finally:
            nc.close()
            watcher.close()


def test_a_drain_after_an_outage_that_swallowed_a_publish_tells_error_cb_and_drains() -> None:
    # The drain's last flush hears that a publish may be lost: it raised that (a drain
    # raises only TimeoutError) and skipped what the drain waits for before the close.
    ev = Events()
    with NatsServer(jetstream=False) as server, FaultProxy(server.url) as proxy:
        nc = nats.connect(proxy.url, **FAST, **ev.kwargs())  # type: ignore[arg-type]
        try:
            nc.flush()
            proxy.blackhole("to_server")
            nc.publish("swallowed", b"lost")
            assert wait_until(lambda: proxy.client_frames("PUB") >= 1, timeout=10)  # left the client
            proxy.cut()
            proxy.heal()
            assert ev.reconnected.wait(10)
            nc.drain(timeout=10)
            assert ev.closed.wait(10)
            assert any("may not have arrived" in str(e) for e in ev.errors), ev.errors
        finally:
            nc.close()
