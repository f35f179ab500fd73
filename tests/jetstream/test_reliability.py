"""Nothing acked is lost: server crash and restart, stream leader loss in a cluster.

A publisher thread publishes with msg ids and retries until each message is
acked; a consumer thread processes with explicit acks. Meanwhile a server is
SIGKILLed. At the end, every acked message was processed; redeliveries
(at-least-once) are allowed and counted, never silently ignored.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.testing import NatsCluster, NatsServer

from ..conftest import wait_until

pytestmark = pytest.mark.slow


class Publisher(threading.Thread):
    def __init__(self, js: JetStream, subject: str, total: int, deadline: float):
        super().__init__(name="test-publisher", daemon=True)
        self.js, self.subject, self.total, self.deadline = js, subject, total, deadline
        self.acked: set[int] = set()
        self.retries = 0
        self.duplicates_acked = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(self.total):
                while True:
                    if time.monotonic() > self.deadline:
                        raise AssertionError(f"publisher out of time at {i}")
                    try:
                        ack = self.js.publish(self.subject, str(i).encode(), msg_id=f"m{i}", timeout=2.0)
                    except nats.NatsError:
                        self.retries += 1  # unknown outcome: publish again, the msg id de-duplicates
                        continue
                    self.duplicates_acked += ack.duplicate
                    self.acked.add(i)
                    break
        except BaseException as exc:
            self.error = exc


class Processor(threading.Thread):
    def __init__(self, js: JetStream, stream: str, durable: str):
        super().__init__(name="test-processor", daemon=True)
        self.cons = js.create_or_update_consumer(stream, durable_name=durable, ack_wait=2.0)
        self.seen: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.errors: list[Exception] = []

    def run(self) -> None:
        with self.cons.messages(max_messages=300, expires=2.0, heartbeat=0.5,
                                ) as it:
            while not self.stop_event.is_set():
                try:
                    msg = it.next(timeout=0.5)
                except nats.TimeoutError:
                    continue
                except nats.BadSubscriptionError:
                    return
                except nats.NatsError as exc:
                    self.errors.append(exc)
                    continue
                with self.lock:
                    self.seen[int(msg.data)] += 1
                try:
                    msg.ack()
                except nats.NatsError as exc:  # not sent: it will come again
                    self.errors.append(exc)

    def processed(self) -> set[int]:
        with self.lock:
            return set(self.seen)


def _check(pub: Publisher, proc: Processor) -> None:
    assert pub.error is None, pub.error
    assert len(pub.acked) == pub.total
    assert wait_until(lambda: proc.processed() >= pub.acked, timeout=60), \
        f"missing: {sorted(pub.acked - proc.processed())[:20]}"
    proc.stop_event.set()
    proc.join(10)
    redelivered = sum(c - 1 for c in proc.seen.values())
    print(f"acked {len(pub.acked)}, publish retries {pub.retries}, duplicate acks {pub.duplicates_acked}, "
          f"processed {len(proc.seen)} (+{redelivered} redeliveries)")


@pytest.mark.timeout(600)
def test_20k_publishes_and_consume_across_server_crash(tmp_path: object) -> None:
    server = NatsServer()
    server.start()
    nc = nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1, name="reliability")
    try:
        js = nc.jetstream()
        js.create_stream(name="REL", subjects=["rel.>"], storage="file", duplicate_window=120.0)
        pub = Publisher(js, "rel.x", 20_000, time.monotonic() + 180)
        proc = Processor(js, "REL", "worker")
        proc.start()
        pub.start()
        assert wait_until(lambda: len(pub.acked) >= 6000, timeout=60)
        server.restart(kill=True)  # SIGKILL mid-stream, back on the same port and store
        assert wait_until(lambda: len(pub.acked) >= 12_000, timeout=90)
        server.restart(kill=True)  # and once more
        pub.join(180)
        _check(pub, proc)
        info = js.stream("REL").info()
        assert info.state.messages == 20_000  # msg ids kept retried publishes from duplicating
    finally:
        nc.close()
        server.close()


@pytest.mark.cluster
@pytest.mark.timeout(600)
def test_r3_stream_survives_leader_loss(nats_cluster: NatsCluster) -> None:
    nc = nats.connect(nats_cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1, name="r3")
    try:
        js = nc.jetstream(timeout=10.0)
        st = js.create_stream(name="R3", subjects=["r3.>"], num_replicas=3, duplicate_window=120.0, timeout=30)
        pub = Publisher(js, "r3.x", 5000, time.monotonic() + 180)
        proc = Processor(js, "R3", "worker")
        proc.start()
        pub.start()
        assert wait_until(lambda: len(pub.acked) >= 1500, timeout=60)
        leader = st.info().cluster.leader  # type: ignore[union-attr]
        idx = next(i for i, n in enumerate(nats_cluster.nodes) if n.server_name == leader)
        nats_cluster.kill_node(idx)
        assert wait_until(lambda: len(pub.acked) >= 3500, timeout=90)
        assert st.info().cluster.leader != leader  # type: ignore[union-attr]
        pub.join(180)
        _check(pub, proc)
        assert st.info().state.messages == 5000
    finally:
        nc.close()
