"""A fetch read slowly hands over every message its pull delivered in time.

The caller is made slow deterministically: the test holds the batch's iterator
and reads the next item only once the server's messages are in the client
(counted in ``stats.in_msgs``) and the clock the fetch would give up on has
certainly passed.
"""

from __future__ import annotations

import itertools
import time

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, Stream

from ..conftest import wait_until


def _fill(js: JetStream, subject: str, n: int) -> None:
    for i in range(n):
        js.publish_async(subject, str(i).encode())
    js.publish_async_complete(timeout=10)


def test_fetch_read_after_its_deadline_hands_over_what_arrived_in_time(nc: nats.Client, js: JetStream,
                                                                       stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 5)
    cons = stream.create_consumer(durable_name="LATE", ack_policy="none")  # a message lost is lost for good
    before = nc.stats["in_msgs"]
    start = time.monotonic()
    max_wait = 1.0
    with cons.fetch(10, max_wait=max_wait) as batch:
        it = iter(batch)
        got = [int(next(it).data)]
        # The 5 messages and the server's 408 at its expiry (which follows them on the
        # connection) are in the client, and the fetch's own deadline has passed.
        assert wait_until(lambda: nc.stats["in_msgs"] >= before + 6, timeout=10)
        assert wait_until(lambda: time.monotonic() > start + max_wait + 0.05, timeout=10)
        got += [int(m.data) for m in it]
        assert batch.error is None
    assert got == [0, 1, 2, 3, 4]
    assert list(cons.fetch_no_wait(10)) == []  # each handed over once


def test_fetch_read_slower_than_its_heartbeat_hands_over_what_is_queued(nc: nats.Client, js: JetStream,
                                                                        stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", 5)
    cons = stream.create_consumer(durable_name="SLOW", ack_policy="none")
    before = nc.stats["in_msgs"]
    hb = 0.5
    with cons.fetch(10, max_wait=10, heartbeat=hb) as batch:
        it = iter(batch)
        got = [int(next(it).data)]
        taken = time.monotonic()
        # A handler slower than two heartbeats: the other 4 messages wait in the client.
        assert wait_until(lambda: nc.stats["in_msgs"] >= before + 5, timeout=10)
        assert wait_until(lambda: time.monotonic() > taken + 2 * hb + 0.05, timeout=10)
        got += [int(m.data) for m in itertools.islice(it, 4)]
        assert batch.error is None
    assert got == [0, 1, 2, 3, 4]
    assert list(cons.fetch_no_wait(10)) == []
