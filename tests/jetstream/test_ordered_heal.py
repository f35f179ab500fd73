"""Ordered consumers heal themselves without a word to the reader.

When an ordered ``messages()`` iterator stops hearing heartbeats (the server
stalled, the node restarted, its consumer was deleted, or a foreign subscriber
on the pull subjects swallows the 503 that would have said so) it makes a new
consumer from the next stream sequence; a ``for msg in it:`` loop goes on and
sees every message once, in order, with no exception.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import NamedTuple

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import NoHeartbeatError
from natsjs_sync.jetstream import JetStream, MessagesContext, OrderedConsumer
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until

HB = 0.4  # short heartbeats: two missed take under a second
EXPIRES = 2.0
BOUND = 30.0  # seconds any one step may take on a loaded machine (each takes about one)


class Reader:
    """Reads an ordered iterator on a thread, as ``for msg in it:`` does, until ``total``."""

    def __init__(self, it: MessagesContext, total: int, go_on: threading.Event | None = None):
        self.it = it
        self.total = total
        self.got: list[int] = []
        self.errors: list[BaseException] = []
        self.go_on = go_on  # when given, the reader holds its first message until it is set
        self.held = threading.Event()  # set while the reader holds that first message
        self.thread = threading.Thread(target=self._run, name="ordered-reader", daemon=True)

    def _run(self) -> None:
        try:
            for msg in self.it:
                self.got.append(int(msg.data))
                if len(self.got) == self.total:
                    return
                if self.go_on is not None and len(self.got) == 1:
                    self.held.set()
                    if not self.go_on.wait(BOUND):
                        return
        except BaseException as exc:
            self.errors.append(exc)

    def start(self) -> Reader:
        self.thread.start()
        return self

    def finish(self) -> None:
        self.thread.join(BOUND)
        if self.thread.is_alive():
            self.it.stop()  # ends the loop (and the test) instead of hanging it
            self.thread.join(5)


@pytest.fixture
def clients(nats_server: NatsServer) -> Iterator[tuple[nats.Client, nats.Client]]:
    """A reader client and an admin client of a fresh server."""
    reader = nats.connect(nats_server.url, name="reader", reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    admin = nats.connect(nats_server.url, name="admin", reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    try:
        yield reader, admin
    finally:
        reader.close()
        admin.close()


def _stream(js: JetStream, storage: str = "memory") -> str:
    name = "H" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage=storage)
    return name


def _publish(js: JetStream, subject: str, start: int, n: int) -> None:
    for i in range(start, start + n):
        js.publish(subject, str(i).encode())


def _missed_cb(missed: threading.Event) -> object:
    """An error_cb that sets ``missed`` when missed heartbeats are reported (the heal begins)."""

    def error_cb(exc: Exception) -> None:
        if isinstance(exc, NoHeartbeatError):
            missed.set()

    return error_cb


def _ordered(js: JetStream, stream: str, error_cb: object,
             max_messages: int = 10) -> tuple[OrderedConsumer, MessagesContext]:
    oc = js.ordered_consumer(stream)
    return oc, oc.messages(max_messages=max_messages, expires=EXPIRES, heartbeat=HB, error_cb=error_cb)  # type: ignore[arg-type]


class Scene(NamedTuple):
    """What a heal test works with once the reader has its first ten messages."""

    js: JetStream  #: the admin client's JetStream (the reader's client is left alone)
    stream: str
    consumer: OrderedConsumer
    missed: threading.Event  #: set when the reader reports missed heartbeats (the heal begins)


@contextlib.contextmanager
def _reading_twenty(clients: tuple[nats.Client, nats.Client], storage: str = "memory") -> Iterator[Scene]:
    """An ordered iterator read on a thread until 20 messages: the block runs once the
    first 10 are read, makes its fault and publishes the other 10. Then the reader
    must have all 20, in order, with no exception."""
    reader_nc, admin = clients
    ajs = admin.jetstream()
    name = _stream(ajs, storage)
    _publish(ajs, f"{name}.a", 0, 10)
    missed = threading.Event()
    oc, it = _ordered(reader_nc.jetstream(), name, _missed_cb(missed))
    with it:
        r = Reader(it, 20).start()
        try:
            assert wait_until(lambda: len(r.got) == 10, timeout=BOUND)
            yield Scene(ajs, name, oc, missed)
        finally:
            r.finish()
    assert r.errors == []
    assert r.got == list(range(20))


def test_server_stall(nats_server: NatsServer, clients: tuple[nats.Client, nats.Client]) -> None:
    with _reading_twenty(clients) as scene:
        pid = nats_server.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            assert scene.missed.wait(BOUND)
        finally:
            os.kill(pid, signal.SIGCONT)
        _publish(scene.js, f"{scene.stream}.a", 10, 10)


def test_node_restart(nats_server: NatsServer, clients: tuple[nats.Client, nats.Client]) -> None:
    reader_nc, admin = clients
    # The stream survives the restart, the memory consumer does not.
    with _reading_twenty(clients, storage="file") as scene:
        nats_server.stop()
        assert scene.missed.wait(BOUND)  # the reader noticed while the server was away
        nats_server.start()
        assert wait_until(lambda: admin.is_connected and reader_nc.is_connected, timeout=BOUND)
        assert wait_until(lambda: _try_publish(scene.js, f"{scene.stream}.a", 10), timeout=BOUND)
        _publish(scene.js, f"{scene.stream}.a", 11, 9)


def _try_publish(js: JetStream, subject: str, i: int) -> bool:
    """The first publish after a restart (JetStream may take a moment to be ready)."""
    try:
        js.publish(subject, str(i).encode(), timeout=2.0)
    except nats.NatsError:
        return False
    return True


def test_consumer_deleted_mid_pull(clients: tuple[nats.Client, nats.Client]) -> None:
    with _reading_twenty(clients) as scene:
        consumer = scene.consumer.name  # the pull for more is waiting on it now
        assert consumer is not None
        scene.js.delete_consumer(scene.stream, consumer)
        _publish(scene.js, f"{scene.stream}.a", 10, 10)


def test_foreign_subscriber_on_pull_subjects(clients: tuple[nats.Client, nats.Client]) -> None:
    """The consumer goes while no pull waits on it (so no 409), and the next pull
    meets a foreign subscriber instead of no one (so no 503): only the missing
    heartbeats tell."""
    reader_nc, admin = clients
    ajs = admin.jetstream()
    name = _stream(ajs)
    _publish(ajs, f"{name}.a", 0, 6)
    foreign = admin.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{name}.>")
    go_on = threading.Event()
    missed = threading.Event()
    # One message per pull: while the reader holds a message, nothing is asked of the consumer.
    oc, it = _ordered(reader_nc.jetstream(), name, _missed_cb(missed), max_messages=1)
    with it:
        r = Reader(it, 6, go_on=go_on).start()
        try:
            assert r.held.wait(BOUND)
            consumer = oc.name
            assert consumer is not None
            ajs.delete_consumer(name, consumer)
            go_on.set()  # the next pull goes to a consumer that is gone
        finally:
            go_on.set()
            r.finish()
            foreign.unsubscribe()
    assert r.errors == []
    assert r.got == list(range(6))
