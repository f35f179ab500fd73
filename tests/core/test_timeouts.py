"""Issue 20, one timeout rule in the core: ``None`` and ``inf`` wait for ever;
NaN, a negative number or a non-number is refused before anything is sent."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer


@dataclass
class Env:
    nc: nats.Client
    witness: nats.Client
    probe: nats.Subscription  # on the witness: sees whatever nc publishes to "to.req"
    sub: nats.Subscription  # on nc, with one message queued


@pytest.fixture
def env(shared_server: NatsServer) -> Iterator[Env]:
    with nats.connect(shared_server.url, name="timeouts") as nc, \
            nats.connect(shared_server.url, name="timeouts-witness") as witness:
        witness.subscribe("to.echo", cb=lambda m: m.respond(b"pong"))
        probe = witness.subscribe("to.req")
        witness.flush()
        sub = nc.subscribe("to.sub")
        nc.publish("to.sub", b"queued")
        nc.flush()
        yield Env(nc, witness, probe, sub)


CALLS: dict[str, Callable[[Env, Any], object]] = {
    "request": lambda e, t: e.nc.request("to.req", b"?", timeout=t),
    "flush": lambda e, t: e.nc.flush(timeout=t),
    "rtt": lambda e, t: e.nc.rtt(timeout=t),
    "next_msg": lambda e, t: e.sub.next_msg(timeout=t),
    "sub.drain": lambda e, t: e.sub.drain(timeout=t),
    "drain": lambda e, t: e.nc.drain(timeout=t),
}

BAD: dict[str, tuple[object, type[Exception]]] = {
    "nan": (math.nan, ValueError),
    "negative": (-1.0, ValueError),
    "str": ("1", TypeError),
}

@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("call", list(CALLS))
def test_a_bad_timeout_is_refused_before_anything_is_sent(env: Env, call: str, bad: str) -> None:
    value, error = BAD[bad]
    with pytest.raises(error):
        CALLS[call](env, value)
    # Nothing was sent, nothing was started: the client and its subscription are as they were.
    assert env.nc.is_connected and not env.nc.is_draining
    env.nc.flush(timeout=5)
    env.witness.flush(timeout=5)
    assert env.probe.pending_msgs == 0, "the request went out before the timeout was refused"
    assert env.sub.is_valid
    assert env.sub.next_msg(timeout=5).data == b"queued"


INF_CALLS: dict[str, Callable[[Env, Any], object]] = {
    "request": lambda e, t: e.nc.request("to.echo", b"?", timeout=t).data == b"pong",
    "flush": lambda e, t: e.nc.flush(timeout=t) is None,
    "rtt": lambda e, t: e.nc.rtt(timeout=t) >= 0,
    "next_msg": lambda e, t: e.sub.next_msg(timeout=t).data == b"queued",
    "sub.drain": lambda e, t: e.sub.drain(timeout=t) is None and not e.sub.is_valid,
    "drain": lambda e, t: e.nc.drain(timeout=t) is None and e.nc.is_closed,
}


#: inf, and finite timeouts at or above what the platform's waits accept
#: (threading.TIMEOUT_MAX, about 9.2e9 s): each means "no limit".
HUGE: list[object] = [math.inf, 1e12, 10**20, 10**400]


@pytest.mark.parametrize("timeout", HUGE, ids=["inf", "1e12", "10**20", "10**400"])
@pytest.mark.parametrize("call", list(INF_CALLS))
def test_an_infinite_timeout_waits_for_ever(env: Env, call: str, timeout: object) -> None:
    # What each call waits for is at hand: it returns, as it does with None
    # (a huge finite timeout used to raise OverflowError, the request already sent).
    assert INF_CALLS[call](env, timeout)


@pytest.mark.parametrize("timeout", [1e12, 10**20], ids=["1e12", "10**20"])
def test_a_huge_timeout_waits_for_the_reply(env: Env, timeout: object) -> None:
    # The reply comes only after the call has started waiting: the wait itself takes the huge value.
    sub = env.nc.subscribe("to.later")
    env.nc.flush(timeout=5)
    send = threading.Timer(0.1, lambda: env.witness.publish("to.later", b"late"))
    send.start()
    try:
        assert sub.next_msg(timeout=timeout).data == b"late"  # type: ignore[arg-type]
    finally:
        send.join(10)


@pytest.mark.parametrize("timeout", [1e12, 10**20], ids=["1e12", "10**20"])
def test_wait_done_with_a_huge_timeout_waits_for_the_callback(env: Env, timeout: object) -> None:
    started, release = threading.Event(), threading.Event()
    sub = env.nc.subscribe("to.done", cb=lambda _: (started.set(), release.wait(30)))
    env.nc.publish("to.done", b"")
    assert started.wait(10)
    drainer = threading.Thread(target=sub.drain, kwargs={"timeout": 30})
    drainer.start()
    releaser = threading.Timer(0.1, release.set)
    releaser.start()
    try:
        assert sub.wait_done(timeout) is True  # type: ignore[arg-type]
    finally:
        release.set()
        releaser.join(10)
        drainer.join(10)
