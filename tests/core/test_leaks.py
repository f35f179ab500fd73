"""No zombies, no leaks: a failed subscription drain still ends the subscription,
a draining one is never restored by a reconnect, and a closed client is freed
even when its callbacks refer back to its owner."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from ..recovery import FAST, Events, connz


def server_subjects(server: NatsServer, nc: nats.Client) -> list[str]:
    return list(connz(server, nc).get("subscriptions_list") or [])


def test_a_sub_drain_whose_flush_times_out_ends_the_subscription(shared_server: NatsServer) -> None:
    events = Events()
    started, go_on = threading.Event(), threading.Event()
    handled: list[bytes] = []

    def slow(msg: nats.Msg) -> None:
        started.set()
        go_on.wait(30)
        handled.append(msg.data)

    with FaultProxy(shared_server.url) as proxy, \
            nats.connect(proxy.url, name="leaks-drain", ping_interval=60, **FAST, **events.kwargs()) as nc, \
            nats.connect(shared_server.url) as other:
        sub = nc.subscribe("leaks.drain")
        cb_sub = nc.subscribe("leaks.drain.cb", cb=slow)
        nc.flush()
        other.publish("leaks.drain.cb", b"queued")
        other.flush()
        assert started.wait(10)
        try:
            proxy.blackhole("both")  # the server never confirms the UNSUBs

            with pytest.raises(nats.TimeoutError):
                sub.drain(timeout=0.3)
            assert not sub.is_valid, "a failed drain left the subscription valid"
            assert sub.sid not in nc._conn.registry.entries, "a failed drain left the subscription registered"
            sub.drain(timeout=0.3)  # a retry: the subscription has ended, nothing is left to wait for

            with pytest.raises(nats.TimeoutError):
                cb_sub.drain(timeout=0.3)
            assert not cb_sub.is_valid and cb_sub.sid not in nc._conn.registry.entries
            go_on.set()
            cb_sub.drain(timeout=10)  # a retry waits for the callback to finish the queue, and it does
            assert handled == [b"queued"]

            proxy.heal()
            events.reconnected.clear()
            proxy.cut()
            assert events.reconnected.wait(10), "no reconnect"
            nc.flush(timeout=10)
            subjects = server_subjects(shared_server, nc)
            assert "leaks.drain" not in subjects and "leaks.drain.cb" not in subjects, "restored after the reconnect"
            other.publish("leaks.drain", b"late")
            other.flush()
            with pytest.raises(nats.BadSubscriptionError):
                sub.next_msg(timeout=1)
        finally:
            go_on.set()  # never leave the callback blocked


def test_a_draining_subscription_is_not_restored_by_a_reconnect(shared_server: NatsServer) -> None:
    events = Events()
    with FaultProxy(shared_server.url) as proxy, \
            nats.connect(proxy.url, name="leaks-restore", ping_interval=60, **FAST, **events.kwargs()) as nc:
        sub = nc.subscribe("leaks.restore")
        kept = nc.subscribe("leaks.kept")
        nc.flush()
        sub.mark_draining()  # as a drain does once its UNSUB is queued, before the server confirms it
        proxy.cut()
        assert events.reconnected.wait(10), "no reconnect"
        nc.flush(timeout=10)
        subjects = server_subjects(shared_server, nc)
        assert "leaks.kept" in subjects
        assert "leaks.restore" not in subjects, "a draining subscription was subscribed again"
        assert not sub.is_valid and sub.sid not in nc._conn.registry.entries
        with pytest.raises(nats.BadSubscriptionError):
            sub.next_msg(timeout=1)
        assert kept.is_valid


class _Owner:
    """An application object whose client's callbacks are its own bound methods."""

    def __init__(self, url: str):
        self.errors: list[Exception] = []
        self.nc = nats.connect(url, name="leaks-owner", error_cb=self.on_error, closed_cb=self.on_closed,
                               disconnected_cb=self.on_closed)
        self.sub = self.nc.subscribe("leaks.owner", cb=self.on_msg)

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)

    def on_closed(self) -> None:
        pass

    def on_msg(self, msg: nats.Msg) -> None:
        pass


def test_closed_clients_with_callbacks_to_their_owner_are_freed(shared_server: NatsServer) -> None:
    refs: list[tuple[weakref.ref[Any], weakref.ref[Any]]] = []
    for _ in range(30):
        owner = _Owner(shared_server.url)
        owner.nc.jetstream()
        owner.nc.close()
        refs.append((weakref.ref(owner), weakref.ref(owner.nc)))
        del owner
    for t in threading.enumerate():  # a thread still ending holds its client: not what this test is about
        if t.name.endswith("-leaks-owner") or "-leaks-owner-" in t.name:
            t.join(10)
    gc.collect()
    alive = sum(o() is not None or c() is not None for o, c in refs)
    assert alive == 0, f"{alive} of 30 closed clients (or their owners) are still alive"
