"""nats-py's exception classes are the ones raised, through the native API too
(the programs in ``programs/errors_*.py`` show the nats-py side)."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync._core.spi import link
from natsjs_sync._timeout import Deadline
from natsjs_sync.errors import ConnectionClosedError, ConnectionDrainingError
from natsjs_sync.testing import NatsServer


def test_calls_refused_in_the_last_phase_of_a_drain_raise_connection_draining_error(
        shared_server: NatsServer) -> None:
    """While a drain flushes its last publishes, a publish or a subscribe is refused with
    ConnectionDrainingError (nats-py's class), which is also a ConnectionClosedError."""
    nc = nats.connect(shared_server.url)
    raised: dict[str, BaseException] = {}

    def during_drain(deadline: Deadline) -> None:
        for what, call in (("publish", lambda: nc.publish("draining.pub", b"")),
                           ("subscribe", lambda: nc.subscribe("draining.sub"))):
            try:
                call()
            except Exception as exc:  # recorded and checked below
                raised[what] = exc

    link(nc).on_drain(during_drain)
    nc.drain(timeout=10)
    assert nc.is_closed
    assert set(raised) == {"publish", "subscribe"}, raised
    for exc in raised.values():
        assert isinstance(exc, ConnectionDrainingError), repr(exc)
        assert isinstance(exc, ConnectionClosedError)
    with pytest.raises(ConnectionClosedError) as closed:
        nc.subscribe("drained.sub")
    assert not isinstance(closed.value, ConnectionDrainingError)
