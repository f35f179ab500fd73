"""Issue 20, JetStream names past the server's control-line limit are refused
before anything is sent; the shared connection (and its other threads) never
notice. Issue 36, a consume handler that could never run is refused, with or
without OpenTelemetry."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import InvalidCallbackTypeError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.jetstream.messages import ConsumeContext
from natsjs_sync.testing import NatsServer

from ..recovery import Guarded, guard

LONG = "N" * 5000


@pytest.fixture
def guarded(shared_server: NatsServer) -> Iterator[Guarded]:
    with guard(shared_server.url) as g:
        g.nc.jetstream().create_stream(name="BADIN", subjects=["badin.>"], storage="memory")
        try:
            yield g
        finally:
            g.witness.jetstream().delete_stream("BADIN")


CALLS: dict[str, Callable[[nats.Client], object]] = {
    "create_stream": lambda nc: nc.jetstream().create_stream(name=LONG, subjects=["badin2.>"]),
    "stream": lambda nc: nc.jetstream().stream(LONG),
    "delete_stream": lambda nc: nc.jetstream().delete_stream(LONG),
    "create_consumer": lambda nc: nc.jetstream().create_consumer("BADIN", durable_name=LONG),
    "consumer": lambda nc: nc.jetstream().consumer("BADIN", LONG),
    "delete_consumer": lambda nc: nc.jetstream().delete_consumer("BADIN", LONG),
    "publish": lambda nc: nc.jetstream().publish("badin." + LONG, b"x"),
    "publish_async": lambda nc: nc.jetstream().publish_async("badin." + LONG, b"x"),
}


@pytest.mark.usefixtures("instrumentation")
@pytest.mark.parametrize("call", list(CALLS))
def test_an_overlong_name_is_refused_before_sending(guarded: Guarded, call: str) -> None:
    with pytest.raises(ValueError):  # BadSubjectError is a ValueError
        CALLS[call](guarded.nc)
    guarded.check_untouched()


# ---------------------------------------------------------------------- consume handlers


async def _async_handler(msg: nats.Msg) -> None:  # pragma: no cover - must never be accepted
    pass


def _consumer(js: JetStream, stream: Stream, how: str) -> Any:
    if how == "pull":
        return js.create_consumer(stream.name, durable_name="pull", ack_policy="explicit")
    if how == "push":
        return js.create_push_consumer(stream.name, durable_name="push", deliver_subject=js.nc.new_inbox(),
                                       ack_policy="explicit")
    return js.ordered_consumer(stream.name)


@pytest.mark.usefixtures("instrumentation")
@pytest.mark.parametrize("how", ["pull", "push", "ordered"])
def test_a_consume_handler_that_could_never_run_is_refused(js: JetStream, stream: Stream, how: str) -> None:
    """An ``async def`` handler would never run and leave every message unacked: refused
    at once, with or without OpenTelemetry; a plain one takes and acks the messages."""
    consumer = _consumer(js, stream, how)
    for bad in (_async_handler, "not callable"):
        with pytest.raises(InvalidCallbackTypeError):
            consumer.consume(bad)
        with pytest.raises(InvalidCallbackTypeError):
            consumer.consume(handler=bad)
    js.publish(f"{stream.name}.x", b"job")
    done = threading.Event()

    def handler(msg: nats.Msg) -> None:
        if how != "ordered":
            msg.ack_sync(timeout=10)
        done.set()

    ctx: ConsumeContext = consumer.consume(handler)
    try:
        assert done.wait(10)
    finally:
        ctx.stop()
