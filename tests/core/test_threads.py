"""One Client shared by many threads: exact accounting, coalesced writes."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync._core import connection as connection_module
from natsjs_sync._core.spi import link
from natsjs_sync.protocol.connection import ConnState
from natsjs_sync.testing import NatsServer

PUBLISHERS = 8
PER_PUBLISHER = 5000
REQUESTERS = 4
PER_REQUESTER = 200


def test_many_threads_publish_request_and_subscribe_on_one_client(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url, name="shared")
    try:
        iter_sub = nc.subscribe("mt.data")
        cb_counts: Counter[bytes] = Counter()
        cb_done = threading.Event()
        total = PUBLISHERS * PER_PUBLISHER

        handled = [0]

        def on_msg(msg: nats.Msg) -> None:
            cb_counts[msg.data] += 1
            handled[0] += 1  # one subscription's callback never runs twice at once
            if handled[0] == total:
                cb_done.set()

        nc.subscribe("mt.data", cb=on_msg)
        nc.subscribe("mt.svc", queue="svc", cb=lambda m: m.respond(m.data[::-1]))
        nc.flush()
        failures: list[str] = []
        start = threading.Barrier(PUBLISHERS + REQUESTERS)

        def publisher(p: int) -> None:
            start.wait()
            for i in range(PER_PUBLISHER):
                nc.publish("mt.data", f"{p}:{i}".encode())

        def requester(r: int) -> None:
            start.wait()
            for i in range(PER_REQUESTER):
                body = f"r{r}-{i}".encode()
                if nc.request("mt.svc", body, timeout=10).data != body[::-1]:
                    failures.append(body.decode())

        threads = [threading.Thread(target=publisher, args=(p,)) for p in range(PUBLISHERS)]
        threads += [threading.Thread(target=requester, args=(r,)) for r in range(REQUESTERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        nc.flush()
        received = Counter(iter_sub.next_msg(timeout=5).data for _ in range(total))
        expected = Counter(f"{p}:{i}".encode() for p in range(PUBLISHERS) for i in range(PER_PUBLISHER))
        assert received == expected
        # The callback may lag far behind on a loaded machine: wait while it
        # makes progress (bounded), fail only when it stalls.
        for _ in range(60):
            before = handled[0]
            if cb_done.wait(5) or handled[0] == before:
                break
        assert cb_done.is_set(), f"callback stalled at {handled[0]} of {total}"
        assert cb_counts == expected
        assert iter_sub.pending_msgs == 0
        assert not failures
        # Order within one publisher is kept.
        assert nc.stats.out_msgs >= total + REQUESTERS * PER_REQUESTER
    finally:
        nc.close()


class _CountingTransport:
    def __init__(self, transport: Any):
        self._transport = transport
        self.writes = 0

    def write(self, data: bytes, deadline: Any = None) -> bool:
        self.writes += 1
        return bool(self._transport.write(data, deadline))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def test_small_publishes_are_coalesced_into_few_writes(nc: nats.Client) -> None:
    sub = nc.subscribe("coalesce")
    nc.flush()
    core = link(nc)
    counting = _CountingTransport(core.transport)
    core.transport = counting
    for _i in range(10_000):
        nc.publish("coalesce", b"x")
    nc.flush()
    assert counting.writes < 1000, counting.writes
    assert sum(1 for _ in range(10_000) if sub.next_msg(5)) == 10_000


@pytest.mark.parametrize("without_lock", [True, False], ids=["gil-appends", "locked-appends"])
def test_threads_publishing_at_once_lose_and_reorder_nothing(shared_server: NatsServer, without_lock: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishes append to the write buffer without the connection lock (with
    the GIL; under the lock on a free-threaded interpreter) while the flusher
    takes from it; a few large ones make the publishing threads send
    themselves (back-pressure) at the same time. Every message arrives once, in
    each thread's order, with no flush() to push out the last ones, and the
    counters are exact."""
    threads_n, per_thread = 6, 4000
    big = b"B" * (300 * 1024)  # four of these pass the flush threshold
    free = ConnState.CONNECTED if without_lock else None  # as the module decides at import
    monkeypatch.setattr(connection_module, "_APPEND_FREELY", free)  # the outlet's open flag follows it
    with nats.connect(shared_server.url) as sub_nc, nats.connect(shared_server.url) as pub_nc:
        sub = sub_nc.subscribe("order.>", pending_msgs_limit=threads_n * per_thread + 1,
                               pending_bytes_limit=-1)
        sub_nc.flush()
        # A plain publish takes the outlet's unlocked path only where the general path would.
        assert link(pub_nc).writer.outlet.open == (1 if without_lock else 0)
        start = threading.Barrier(threads_n)
        sizes = [0] * threads_n
        # Switch threads as often as the interpreter can, so that appends land
        # between any two steps of the flusher's take if they ever can.
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)

        def publisher(t: int) -> None:
            start.wait()
            for i in range(per_thread):
                payload = b"%d" % i + (big if i % 500 == 499 else b"")
                pub_nc.publish(f"order.{t}", payload)
                sizes[t] += len(payload)

        workers = [threading.Thread(target=publisher, args=(t,)) for t in range(threads_n)]
        for w in workers:
            w.start()
        try:
            for w in workers:
                w.join(120)
        finally:
            sys.setswitchinterval(switch)
        assert not any(w.is_alive() for w in workers)
        assert pub_nc.stats.out_msgs == threads_n * per_thread
        assert pub_nc.stats.out_bytes == sum(sizes)
        # No flush() here: what the publishers appended last must go out on its own.
        next_of = [0] * threads_n
        for _ in range(threads_n * per_thread):
            msg = sub.next_msg(timeout=30)
            t = int(msg.subject.rsplit(".", 1)[1])
            i = int(msg.data[:msg.data.index(b"B")] if b"B" in msg.data else msg.data)
            assert i == next_of[t], f"thread {t}: got {i}, expected {next_of[t]}"
            next_of[t] += 1
        assert next_of == [per_thread] * threads_n
        assert pub_nc.pending_data_size == 0
