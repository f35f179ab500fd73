"""Client drain and continuous pulling: a graceful shutdown acknowledges what it was given.

``nc.drain()`` stops every ``consume()``/``messages()`` from pulling, lets the
handlers finish the messages already delivered while their acks still go out,
and only then drains the rest of the client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import natsjs_sync as nats
from natsjs_sync import Msg
from natsjs_sync.jetstream import ConsumeContext, JetStream, Stream
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until

TOTAL = 20


def _fill(js: JetStream, subject: str, n: int) -> None:
    for i in range(n):
        js.publish_async(subject, str(i).encode())
    js.publish_async_complete(timeout=10)


def _slow_handler(handled: list[int], started: threading.Event, errors: list[Exception],
                  ack: bool = True) -> Callable[[Msg], None]:
    """A handler that takes a while per message (acking it unless ``ack`` is False), so a
    drain starts while a batch is still queued; ack failures go to ``errors``."""
    pace = threading.Event()  # never set: only paces the handler

    def handler(msg: Msg) -> None:
        started.set()
        pace.wait(0.05)
        if ack:
            try:
                msg.ack()
            except nats.NatsError as exc:
                errors.append(exc)
                return
        handled.append(int(msg.data))

    return handler


def _drain_once_started(worker: nats.Client, *started: threading.Event) -> None:
    """Drain ``worker`` once every reader has begun on its messages (each within 10 s)."""
    assert all(s.wait(10) for s in started)
    worker.drain(timeout=20)


def test_drain_lets_consume_ack_what_it_was_given(shared_server: NatsServer, js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", TOTAL)
    stream.create_consumer(durable_name="D", ack_policy="explicit", ack_wait=30.0)
    handled: list[int] = []
    errors: list[Exception] = []
    started = threading.Event()
    with nats.connect(shared_server.url, name="worker") as worker:
        cons = worker.jetstream().consumer(stream.name, "D")
        ctx = cons.consume(_slow_handler(handled, started, errors), max_messages=TOTAL)
        _drain_once_started(worker, started)
    assert ctx.closed.is_set()
    assert errors == []
    # Acks are processed by the server asynchronously.
    cons = js.consumer(stream.name, "D")
    assert wait_until(lambda: cons.info().num_ack_pending == 0, timeout=5.0), cons.info()
    info = cons.info()
    assert info.num_redelivered == 0
    assert info.delivered.consumer_seq == len(handled)
    assert handled == list(range(len(handled)))


def test_drain_lets_ordered_consume_finish(shared_server: NatsServer, js: JetStream, stream: Stream) -> None:
    _fill(js, f"{stream.name}.a", TOTAL)
    handled: list[int] = []
    errors: list[Exception] = []
    started = threading.Event()
    with nats.connect(shared_server.url, name="worker") as worker:
        oc = worker.jetstream().ordered_consumer(stream.name)
        ctx = oc.consume(_slow_handler(handled, started, errors, ack=False), max_messages=TOTAL,
                         error_cb=errors.append)
        _drain_once_started(worker, started)
    assert ctx.closed.is_set()
    assert errors == []
    # Every message delivered to the client was handled, in order, before the close.
    assert handled == list(range(TOTAL))


def test_drain_ends_a_messages_iteration(shared_server: NatsServer, js: JetStream, stream: Stream) -> None:
    """An iterator stops pulling on a client drain; its loop ends instead of hanging."""
    _fill(js, f"{stream.name}.a", TOTAL)
    stream.create_consumer(durable_name="I", ack_policy="explicit")
    first = threading.Event()
    ended = threading.Event()
    got: list[int] = []
    with nats.connect(shared_server.url, name="worker") as worker:
        it = worker.jetstream().consumer(stream.name, "I").messages(max_messages=5)

        def read() -> None:
            try:
                for msg in it:
                    got.append(int(msg.data))
                    first.set()
            finally:
                ended.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        _drain_once_started(worker, first)
        assert ended.wait(10)
        reader.join(5)
    assert it.is_stopped
    assert got == list(range(len(got)))


def test_drain_lets_every_consume_of_the_client_ack(shared_server: NatsServer, js: JetStream,
                                                    stream: Stream) -> None:
    """Several consumers on one client are drained together, each acking what it was given."""
    _fill(js, f"{stream.name}.a", TOTAL)
    names = [f"M{i}" for i in range(3)]
    errors: list[Exception] = []
    with nats.connect(shared_server.url, name="worker") as worker:
        wjs = worker.jetstream()
        ctxs = []
        starts = []
        for name in names:
            stream.create_consumer(durable_name=name, ack_policy="explicit", ack_wait=30.0)
            started = threading.Event()
            starts.append(started)
            handler = _slow_handler([], started, errors)
            ctxs.append(wjs.consumer(stream.name, name).consume(handler, max_messages=TOTAL))
        _drain_once_started(worker, *starts)
    assert all(c.closed.is_set() for c in ctxs)
    assert errors == []
    for name in names:
        cons = js.consumer(stream.name, name)
        assert wait_until(lambda c=cons: c.info().num_ack_pending == 0, timeout=5.0), cons.info()
        assert cons.info().num_redelivered == 0


def test_drain_called_from_the_handler_hands_every_queued_message_over(js: JetStream, stream: Stream) -> None:
    """``ctx.drain()`` in the handler returns at once and the drain completes after it:
    every message already delivered reaches the handler (with ack none, one dropped is lost)."""
    total = 30
    _fill(js, f"{stream.name}.a", total)
    stream.create_consumer(durable_name="H", ack_policy="none")
    cons = js.consumer(stream.name, "H")
    handled: list[int] = []
    box: list[ConsumeContext] = []
    ready = threading.Event()

    def handler(msg: Msg) -> None:
        handled.append(int(msg.data))
        if len(handled) == 1:
            assert ready.wait(10)
            # Every message was sent to this client (most are queued behind this call).
            assert wait_until(lambda: cons.info().delivered.consumer_seq == total, timeout=10)
            box[0].drain()

    box.append(cons.consume(handler, max_messages=100))
    ready.set()
    assert box[0].closed.wait(10), "the drain never completed"
    assert handled == list(range(total))
