"""User code on the client's dispatcher, against a real server: a callback that
blocks holds its own subscription back, never another one, and a callback may
wait for a reply that another callback of the same client sends.

Each test first lets one callback run to its end, so the client has an idle
worker: the case where two lanes scheduled in one burst both counted on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer


@pytest.fixture
def clients(shared_server: NatsServer) -> Iterator[tuple[nats.Client, nats.Client]]:
    with nats.connect(shared_server.url, name="lanes") as nc, \
            nats.connect(shared_server.url, name="lanes-publisher") as pub:
        yield nc, pub


def _warm(nc: nats.Client) -> None:
    """Run one callback to its end: its worker is then idle."""
    ran = threading.Event()
    sub = nc.subscribe("lanes.warm", cb=lambda _: ran.set())
    nc.publish("lanes.warm", b"")
    assert ran.wait(10)
    sub.unsubscribe()
    nc.flush(timeout=10)


def test_a_blocked_callback_does_not_hold_back_another_subscription(
        clients: tuple[nats.Client, nats.Client]) -> None:
    nc, pub = clients
    release = threading.Event()
    a_started = threading.Event()
    seen: dict[str, list[bytes]] = {"b": [], "c": []}
    handled = {"b": threading.Event(), "c": threading.Event()}

    def slow(_: nats.Msg) -> None:
        a_started.set()
        release.wait(30)

    def quick(name: str) -> object:
        def handle(msg: nats.Msg) -> None:
            seen[name].append(msg.data)
            if len(seen[name]) == 3:
                handled[name].set()
        return handle

    nc.subscribe("lanes.a", cb=slow)
    nc.subscribe("lanes.b", cb=quick("b"))  # type: ignore[arg-type]
    nc.subscribe("lanes.c", cb=quick("c"))  # type: ignore[arg-type]
    nc.flush(timeout=10)
    try:
        for _ in range(3):
            _warm(nc)
            a_started.clear()
            for name in ("b", "c"):
                seen[name].clear()
                handled[name].clear()
            # One write, one burst on nc's reader: the blocking callback's message first.
            pub.publish("lanes.a", b"")
            for i in range(3):
                pub.publish("lanes.b", b"%d" % i)
                pub.publish("lanes.c", b"%d" % i)
            pub.flush(timeout=10)
            assert a_started.wait(10)
            for name in ("b", "c"):
                assert handled[name].wait(10), f"lanes.{name} waited behind the blocked callback"
                assert seen[name] == [b"0", b"1", b"2"]  # each subscription's order kept
            assert not release.is_set()
            release.set()
            release = threading.Event()
    finally:
        release.set()


def test_a_callback_gets_the_reply_of_a_service_on_the_same_client(
        clients: tuple[nats.Client, nats.Client]) -> None:
    nc, pub = clients
    nc.subscribe("lanes.svc", cb=lambda m: m.respond(b"re:" + m.data))
    answers: list[bytes] = []
    errors: list[BaseException] = []
    done = threading.Semaphore(0)

    def asks(msg: nats.Msg) -> None:
        try:
            answers.append(nc.request("lanes.svc", msg.data, timeout=10).data)
        except BaseException as exc:  # reported below, with what it was
            errors.append(exc)
        finally:
            done.release()

    nc.subscribe("lanes.x", cb=asks)
    nc.subscribe("lanes.y", cb=asks)
    nc.flush(timeout=10)
    for round_ in range(3):
        _warm(nc)
        pub.publish("lanes.x", b"x%d" % round_)
        pub.publish("lanes.y", b"y%d" % round_)
        pub.flush(timeout=10)
        for _ in range(2):
            assert done.acquire(timeout=30)
        assert not errors, errors
    assert sorted(answers) == sorted(b"re:%s%d" % (n, r) for r in range(3) for n in (b"x", b"y"))
