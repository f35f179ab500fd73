"""An ordered subscription with ``idle_heartbeat`` heals while nobody reads: its
consumer, deleted between reads, is made anew in the background from the next
stream sequence (as docs/migrating.rst promises), so the next read finds it."""

from __future__ import annotations

import threading

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until


def test_deleted_consumer_is_recreated_while_nobody_reads(nats_server: NatsServer) -> None:
    nc = nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        js.add_stream(name="IDLE", subjects=["idle.>"])
        js.publish("idle.a", b"1")
        sub = js.subscribe("idle.>", ordered_consumer=True, idle_heartbeat=0.5)
        try:
            assert sub.next_msg(timeout=5).data == b"1"
            first = sub.consumer_info().name
            js.delete_consumer("IDLE", first)

            # Nobody reads now: the consumer must come back on its own (after a few missed
            # heartbeats, about 1.5 s; without the background heal, never).
            names: list[str] = []

            def recreated() -> bool:
                names[:] = [c.name for c in js.consumers_info("IDLE")]
                return bool(names)

            assert wait_until(recreated, timeout=20, interval=0.05), "no consumer re-created within 20 s"
            assert first not in names, names

            js.publish("idle.a", b"2")
            assert sub.next_msg(timeout=5).data == b"2"
        finally:
            sub.unsubscribe()
    finally:
        nc.close()


def test_an_idle_ordered_subscription_keeps_its_consumer(nats_server: NatsServer) -> None:
    """Heartbeats queued while nobody reads are not taken for silence: the consumer
    stays the same and the messages queued ahead of them are read in order."""
    nc = nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        js.add_stream(name="QUIET", subjects=["quiet.>"])
        # A 1 s interval: at 0.2 s the reader thread taking one heartbeat 0.4 s
        # late on a loaded machine was real silence and the consumer re-created.
        sub = js.subscribe("quiet.>", ordered_consumer=True, idle_heartbeat=1.0)
        try:
            js.publish("quiet.a", b"0")
            assert sub.next_msg(timeout=5).data == b"0"
            first = sub.consumer_info().name
            for i in range(1, 4):
                js.publish("quiet.a", str(i).encode())
            # Several heartbeat intervals pass with nobody reading (heartbeats and three
            # messages queue up); the check runs on every interval meanwhile. Idle time is
            # the scenario itself, not a wait for something: a slower machine idles longer.
            threading.Event().wait(4.0)
            assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"1", b"2", b"3"]
            assert sub.consumer_info().name == first
        finally:
            sub.unsubscribe()
    finally:
        nc.close()


def test_reads_and_background_heals_take_turns(nats_server: NatsServer) -> None:
    """A reader that waits in next() for messages that trickle in, with short pauses
    between bursts as a consumer loop has, while the background check runs on every
    short heartbeat interval: the check never takes a message from under a reader
    (nor the reader from under the check), so every message comes once and in order."""
    nc = nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        js.add_stream(name="TURNS", subjects=["turns.>"])
        n = 1000
        sub = js.subscribe("turns.>", ordered_consumer=True, idle_heartbeat=0.05)
        pace = threading.Event()  # never set: the pauses are the scenario

        def trickle() -> None:
            for i in range(n):
                js.publish("turns.a", str(i).encode())
                if i % 20 == 19:
                    pace.wait(0.005)

        publisher = threading.Thread(target=trickle)
        publisher.start()
        try:
            got = []
            for i in range(n):
                got.append(int(sub.next_msg(timeout=10).data))
                if i % 100 == 99:
                    pace.wait(0.12)  # a few heartbeat intervals with nobody reading
            assert got == list(range(n))
        finally:
            publisher.join(30)
            sub.unsubscribe()
    finally:
        nc.close()
