"""Routes that settle in bulk: ``after_read`` runs once a socket read's messages are routed."""

from __future__ import annotations

import threading

import natsjs_sync as nats
from natsjs_sync._core.spi import link


def test_after_read_runs_on_the_reader_after_each_reads_messages(nc: nats.Client) -> None:
    core = link(nc)
    collected: list[bytes] = []
    batches: list[int] = []
    threads: set[str] = set()
    seen = threading.Event()
    n = 2_000

    def settle() -> None:
        threads.add(threading.current_thread().name)
        batches.append(len(collected))
        collected.clear()
        if sum(batches) == n:
            seen.set()

    def route(msg: nats.Msg) -> None:
        if not collected:
            core.after_read(settle)
        collected.append(msg.data)

    handle = core.route_internal("bulk.route", route)
    try:
        nc.flush(timeout=5)
        for i in range(n):
            nc.publish("bulk.route", str(i).encode())
        nc.flush(timeout=5)
        assert seen.wait(10), f"only {sum(batches)} of {n} messages settled"
    finally:
        handle.cancel()
    # Every message was settled by a read-end call, nothing left behind, all on the reader thread
    # (or on this thread, where its flush read for the reader: requester_reads), and the reads
    # brought more than one message at a time (what the bulk settling is for).
    assert collected == []
    assert all(b > 0 for b in batches)
    assert len(batches) < n
    me = threading.current_thread().name
    assert threads and all(t.startswith("natsjs-reader") for t in threads - {me})
