"""A Client made before os.fork(): the child gets a connection of its own."""

from __future__ import annotations

import multiprocessing
import os
import select
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ..fork_kit import run_in_child

# Forking a process that has threads is what these tests are about (3.12+ warns).
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


def test_child_connects_afresh_and_parent_is_untouched(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url, name="forker")
    try:
        parent_sub = nc.subscribe("fork.data")
        nc.subscribe("fork.echo", cb=lambda m: m.respond(b"parent:" + m.data))
        nc.flush()
        parent_id = nc.client_id

        def child() -> dict[str, object]:
            try:
                parent_sub.next_msg(timeout=0.1)
                inherited = "readable"
            except nats.BadSubscriptionError as exc:
                inherited = str(exc)
            nc.publish("fork.data", b"from child")
            reply = nc.request("fork.echo", b"hi", timeout=5)
            nc.flush()
            out = {"client_id": nc.client_id, "reply": reply.data.decode(), "inherited": inherited}
            nc.close()
            return out

        result = run_in_child(child)
        assert "error" not in result, result
        assert result["client_id"] != parent_id
        assert result["reply"] == "parent:hi"
        assert "parent process before fork" in str(result["inherited"])
        # The parent's connection survived the child closing its copy.
        assert parent_sub.next_msg(timeout=5).data == b"from child"
        nc.publish("fork.data", b"parent still works")
        assert parent_sub.next_msg(timeout=5).data == b"parent still works"
        assert nc.client_id == parent_id
    finally:
        nc.close()


def _worker(url_and_n: tuple[int, int]) -> int:
    n, count = url_and_n
    for i in range(count):
        SHARED.publish("fork.pool", f"{n}:{i}".encode())
    SHARED.flush(timeout=5)
    return os.getpid()


SHARED: nats.Client


def test_multiprocessing_fork_pool_shares_one_inherited_client(shared_server: NatsServer) -> None:
    global SHARED
    SHARED = nats.connect(shared_server.url, name="pool-parent")
    try:
        sub = SHARED.subscribe("fork.pool")
        SHARED.flush()
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(3) as pool:
            pids = pool.map(_worker, [(n, 50) for n in range(6)])
        assert len(set(pids)) >= 1 and os.getpid() not in pids
        got = sorted(sub.next_msg(timeout=5).data for _ in range(300))
        assert got == sorted(f"{n}:{i}".encode() for n in range(6) for i in range(50))
    finally:
        SHARED.close()


@pytest.mark.parametrize("closed_first", [True, False])
def test_closed_client_stays_closed_in_the_child(shared_server: NatsServer, closed_first: bool) -> None:
    nc = nats.connect(shared_server.url)
    if closed_first:
        nc.close()

    def child() -> dict[str, object]:
        try:
            nc.publish("fork.closed", b"x")
            return {"published": True}
        except nats.ConnectionClosedError:
            return {"published": False}

    result = run_in_child(child)
    assert result == {"published": not closed_first}
    nc.close()


def test_a_fork_while_another_thread_makes_a_log_adapter_leaves_the_child_able_to_log(
        shared_server: NatsServer) -> None:
    # The per-connection log adapters are made under a lock; a fork while another
    # thread of the parent holds it must not leave the child's copy locked for good.
    nc = nats.connect(shared_server.url, name="fork-logs")
    logs = nc._conn.logs
    try:
        with logs._lock:  # as another thread making an adapter at the moment of the fork

            def child() -> dict[str, object]:
                import threading

                done = threading.Event()

                def make() -> None:
                    logs.to("natsjs_sync.tests.fork")
                    done.set()

                threading.Thread(target=make, daemon=True).start()
                return {"made": done.wait(10.0)}

            result = run_in_child(child)
        assert result == {"made": True}
    finally:
        nc.close()


def test_a_flush_in_the_child_does_not_vouch_for_a_publish_its_lost_connection_swallowed(
        shared_server: NatsServer) -> None:
    # The parent's connection confirmed far more bytes than the child will write: the
    # child's offsets count from 0 again, and must not be taken as confirmed by the parent's.
    watcher = nats.connect(shared_server.url)
    sub = watcher.subscribe("fork.swallowed")
    watcher.flush()
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    with FaultProxy(shared_server.url) as proxy:
        nc = nats.connect(proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        try:
            for _ in range(100):
                nc.publish("fork.filler", b"x" * 1000)
            nc.flush()

            def child() -> dict[str, object]:
                nc.flush(timeout=10)  # the child's own connection, confirmed once
                reconnects = nc.stats.reconnects
                os.write(to_parent_w, b"r")
                os.read(to_child_r, 1)  # blackholed
                nc.publish("fork.swallowed", b"lost")
                os.write(to_parent_w, b"p")
                os.read(to_child_r, 1)  # cut and healed
                # The flush comes after the loss is noticed (else its PING, written to
                # the dead socket, fails for that reason instead: a race of two threads).
                wait_until(lambda: nc.stats.reconnects > reconnects, timeout=20)
                try:
                    nc.flush(timeout=20)
                    outcome = "vouched"
                except nats.ConnectionError as exc:
                    outcome = str(exc)
                return {"outcome": outcome}

            def heard() -> bool:  # bounded: a child that failed early says nothing more
                return bool(select.select([to_parent_r], [], [], 30)[0]) and bool(os.read(to_parent_r, 1))

            def orchestrate() -> None:
                if not heard():
                    return
                pubs = proxy.client_frames("PUB")
                proxy.blackhole("to_server")
                os.write(to_child_w, b"b")
                if not heard():
                    return
                wait_until(lambda: proxy.client_frames("PUB") > pubs, timeout=10)  # left the child
                proxy.cut()
                proxy.heal()
                os.write(to_child_w, b"c")

            helper = threading.Thread(target=orchestrate, daemon=True)
            helper.start()
            result = run_in_child(child)
            helper.join(10)
            assert "may not have arrived" in str(result.get("outcome")), result
            with pytest.raises(nats.TimeoutError):
                sub.next_msg(timeout=0.2)  # it was indeed lost
        finally:
            nc.close()
            watcher.close()
            for fd in (to_parent_r, to_parent_w, to_child_r, to_child_w):
                os.close(fd)
