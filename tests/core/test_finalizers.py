"""A finalizer never takes a lock: owners collected by the cyclic garbage collector
(fetch batches, messages() contexts, request-many iterators, generators) hand
their release to the client's timer thread, which unsubscribes their inbox.

The collector runs finalizers on whatever thread's allocation crossed its
threshold, including one that holds the connection's lock (every subscribe
takes it): each test collects on a thread holding that lock. A finalizer that
takes the lock deadlocks that thread against itself, and the client with it.
"""

from __future__ import annotations

import gc
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import Stream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ..gc_kit import automatic_gc_off, collect_holding_the_lock


@pytest.fixture
def gc_off() -> Iterator[None]:
    """No automatic collection while a test builds its garbage: only the test's own collect runs."""
    with automatic_gc_off():
        yield


def cycle(obj: Any) -> None:
    """Put ``obj`` into a reference cycle: only the cyclic collector frees it then."""
    box: list[Any] = [obj]
    box.append(box)


def server_subjects(server: NatsServer, nc: nats.Client) -> list[str]:
    """The subjects the server holds for ``nc`` (its monitoring port)."""
    url = f"http://127.0.0.1:{server.monitor_port}/connz?subs=1&cid={nc.client_id}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        conns = json.load(resp)["connections"]
    return [s for c in conns for s in c.get("subscriptions_list") or []]


def client_subjects(nc: nats.Client) -> list[str]:
    return [e.subject for e in list(nc._conn.registry.entries.values())]


def released(server: NatsServer, nc: nats.Client, inbox: str) -> bool:
    """Whether ``inbox`` is gone from the client's registry and from the server, within 10 s."""
    def gone() -> bool:
        if inbox in client_subjects(nc):
            return False
        nc.flush()
        return inbox not in server_subjects(server, nc)

    return wait_until(gone, timeout=10.0)


@pytest.fixture
def client(shared_server: NatsServer) -> Iterator[nats.Client]:
    """A client of its own: when the bug is present it is wedged for good, and never closed."""
    nc = nats.connect(shared_server.url, name="finalizers")
    yield nc
    if not nc._conn.lock.locked():  # held for good by a deadlocked thread: closing would hang too
        nc.close()


def test_request_many_iterator_collected_while_the_lock_is_held(client: nats.Client, shared_server: NatsServer,
                                                                gc_off: None) -> None:
    replies = client.request_many("finalizers.nobody", timeout=30)
    inbox = replies.inbox
    client.flush()
    assert inbox in server_subjects(shared_server, client)
    cycle(replies)
    del replies
    assert collect_holding_the_lock(client), "the finalizer took the connection's lock: deadlocked"
    assert released(shared_server, client, inbox), "the collected iterator's inbox is still subscribed"
    client.flush(timeout=5)  # and the client still works


def test_fetch_batch_and_its_generator_collected_while_the_lock_is_held(client: nats.Client,
                                                                        shared_server: NatsServer,
                                                                        gc_off: None) -> None:
    js = client.jetstream()
    name = "F" + next_nuid()
    stream: Stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        js.publish(f"{name}.a", b"1")
        cons = stream.create_consumer(durable_name="C", ack_policy="none")
        before = set(client_subjects(client))
        batch = cons.fetch(5, max_wait=30)
        it = iter(batch)
        assert next(it).data == b"1"  # the generator now waits inside its try block
        (inbox,) = set(client_subjects(client)) - before
        cycle(batch)
        cycle(it)
        del batch, it
        assert collect_holding_the_lock(client), "the finalizer took the connection's lock: deadlocked"
        assert released(shared_server, client, inbox), "the collected batch's inbox is still subscribed"
    finally:
        if not client._conn.lock.locked():
            js.delete_stream(name)


def test_messages_context_collected_while_the_lock_is_held(client: nats.Client, shared_server: NatsServer,
                                                           gc_off: None) -> None:
    js = client.jetstream()
    name = "M" + next_nuid()
    stream: Stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        cons = stream.create_consumer(durable_name="C", ack_policy="none")
        before = set(client_subjects(client))
        ctx = cons.messages(expires=2.0)
        (inbox,) = set(client_subjects(client)) - before
        cycle(ctx)
        del ctx
        assert collect_holding_the_lock(client), "the finalizer took the connection's lock: deadlocked"
        assert released(shared_server, client, inbox), "the collected context's inbox is still subscribed"
    finally:
        if not client._conn.lock.locked():
            js.delete_stream(name)


def test_an_ordered_iteration_collected_unstopped_asks_its_consumer_away(client: nats.Client,
                                                                        shared_server: NatsServer,
                                                                        gc_off: None) -> None:
    """A key watch dropped without stop(): the collection releases its inbox and asks the
    server to delete its ordered consumer (without waiting for the answer, on the timer
    thread) instead of leaving it for the server to expire after its inactive threshold."""
    js = client.jetstream()
    bucket = "O" + next_nuid()
    kv = js.create_key_value(bucket=bucket, storage="memory")
    try:
        kv.put("a", b"1")
        watcher = kv.watch_all()
        assert watcher.next(timeout=5) is not None
        stream = f"KV_{bucket}"
        assert len(list(js.consumer_names(stream))) == 1
        cycle(watcher)
        del watcher
        assert collect_holding_the_lock(client), "the finalizer took the connection's lock: deadlocked"
        assert wait_until(lambda: not list(js.consumer_names(stream)), timeout=10.0), \
            "the collected watch's consumer was left on the server"
    finally:
        if not client._conn.lock.locked():
            js.delete_key_value(bucket)


def test_an_owner_collected_after_the_close_keeps_nothing(shared_server: NatsServer, gc_off: None) -> None:
    nc = nats.connect(shared_server.url)
    before = nc.request_many("finalizers.nobody", timeout=30)
    after = nc.request_many("finalizers.nobody", timeout=30)
    cycle(before)
    cycle(after)
    del before
    gc.collect()  # queued, perhaps not yet performed when the close comes
    nc.close()
    del after
    gc.collect()  # collected once the client is closed
    assert not nc._conn._releases, "a queued release outlived the close (it holds the subscription)"


def test_key_lister_generator_collected_while_the_lock_is_held(client: nats.Client, shared_server: NatsServer,
                                                               gc_off: None) -> None:
    js = client.jetstream()
    bucket = "L" + next_nuid()
    kv = js.create_key_value(bucket=bucket, storage="memory")
    try:
        kv.put("a", b"1")
        kv.put("b", b"2")
        before = set(client_subjects(client))
        lister = kv.list_keys()
        (inbox,) = set(client_subjects(client)) - before
        keys = iter(lister)
        assert next(keys) == "a"  # the generator now waits inside the block that stops the watcher
        cycle(keys)
        del keys  # the lister itself stays referenced: only the generator's close stops the watcher
        assert collect_holding_the_lock(client), "the generator's close took the connection's lock: deadlocked"
        assert released(shared_server, client, inbox), "the closed listing's inbox is still subscribed"
        assert lister._watcher._it.is_stopped
    finally:
        if not client._conn.lock.locked():
            js.delete_key_value(bucket)


def test_a_with_block_left_by_break_releases_the_fetch_inbox_at_once(client: nats.Client) -> None:
    js = client.jetstream()
    name = "W" + next_nuid()
    stream: Stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        js.publish(f"{name}.a", b"1")
        js.publish(f"{name}.a", b"2")
        cons = stream.create_consumer(durable_name="C", ack_policy="none")
        before = set(client_subjects(client))
        with cons.fetch(5, max_wait=30) as batch:
            (inbox,) = set(client_subjects(client)) - before
            for _ in batch:
                break  # the loop's generator is closed here; the block's end releases
        assert inbox not in client_subjects(client), "released only later, not by the block's end"
    finally:
        js.delete_stream(name)
