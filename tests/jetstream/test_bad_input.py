"""Issue 20, JetStream names past the server's control-line limit are refused
before anything is sent; the shared connection (and its other threads) never
notice."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
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


@pytest.mark.parametrize("call", list(CALLS))
def test_an_overlong_name_is_refused_before_sending(guarded: Guarded, call: str) -> None:
    with pytest.raises(ValueError):  # BadSubjectError is a ValueError
        CALLS[call](guarded.nc)
    guarded.check_untouched()
