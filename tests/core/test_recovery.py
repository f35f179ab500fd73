"""Issue 20, core: nothing is lost in a race with a reconnect, and writes have a deadline.

The race tests do not hope to hit the window between "the new connection's
handshake is done" and "the client is connected": a :class:`ResumeWindow`
stops the client's threads at every step inside it and acts there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ..recovery import FAST, Events, ResumeWindow, StalledWrite, path_buffer_bound


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    # Big messages allowed: one message can outgrow every kernel buffer on the way.
    with NatsServer(jetstream=False, max_payload=path_buffer_bound() + (1 << 20)) as s:
        yield s


def _close_within(nc: nats.Client, seconds: float) -> bool:
    closer = threading.Thread(target=nc.close, name="test-closer", daemon=True)
    closer.start()
    closer.join(seconds)
    return not closer.is_alive()


# ---------------------------------------------------------------------- resume races


def test_subscriptions_made_while_the_client_resumes_are_never_lost(proxy: FaultProxy, witness: nats.Client) -> None:
    window = ResumeWindow(proxy, "resume-subs")
    ev = Events()
    nc = nats.connect(proxy.url, name="resume-subs", **FAST, **ev.kwargs())
    try:
        nc.flush()
        window.arm(nc)
        proxy.cut()
        subs: list[nats.Subscription] = []
        window.run(lambda turn: subs.append(nc.subscribe(f"resume.sub.{turn}")), until=ev.reconnected.is_set,
                   timeout=10)
        window.close()
        assert ev.reconnected.wait(10)
        assert len(subs) >= 3, f"only {window.stops} steps between handshake and connected: did the window move?"
        nc.flush(timeout=5)
        for sub in subs:
            witness.publish(sub.subject, b"x")
        witness.flush(timeout=5)
        nc.flush(timeout=5)  # what the server sent before this PONG is queued now
        lost = [s.subject for s in subs if s.pending_msgs == 0]
        assert not lost, f"{len(lost)} of {len(subs)} subscriptions made while resuming receive nothing: {lost}"
        assert all(s.is_valid for s in subs)
    finally:
        window.close()
        nc.close()


def test_the_first_request_made_while_the_client_resumes_gets_its_reply(proxy: FaultProxy,
                                                                        witness: nats.Client) -> None:
    witness.subscribe("resume.svc", cb=lambda m: m.respond(b"ok"))
    witness.flush()
    # The request inbox is made once, by the first request: one client per
    # step of the window, each making its first request at that step.
    step = 0
    while step < 60:
        name = f"resume-req{step}"
        window = ResumeWindow(proxy, name)
        ev = Events()
        nc = nats.connect(proxy.url, name=name, **FAST, **ev.kwargs())
        results: list[object] = []

        def ask(nc: nats.Client = nc, results: list[object] = results) -> None:
            try:
                results.append(nc.request("resume.svc", b"?", timeout=3).data)
            except nats.NatsError as exc:
                results.append(exc)

        asker = threading.Thread(target=ask, name="test-asker", daemon=True)

        def act(turn: int, step: int = step, nc: nats.Client = nc, asker: threading.Thread = asker) -> None:
            if turn != step:
                return
            before = nc.pending_data_size
            asker.start()
            # Its PUB is buffered once the inbox is decided: then the client may go on.
            wait_until(lambda: nc.pending_data_size > before, timeout=0.15, interval=0.001)

        try:
            nc.flush()
            window.arm(nc)
            proxy.cut()
            turns = window.run(act, until=ev.reconnected.is_set, timeout=10)
            window.close()
            assert ev.reconnected.wait(10)
            if turns <= step:
                break  # every step of the window was tried
            asker.join(5)
            assert results == [b"ok"], f"a first request at step {step} of the resume: {results}"
            assert nc.request("resume.svc", b"?", timeout=2).data == b"ok"
        finally:
            window.close()
            nc.close()
        step += 1
    assert step >= 3, "the window between handshake and connected was never entered"


# ---------------------------------------------------------------------- write deadlines


def test_a_peer_that_stops_reading_is_detected_and_the_client_reconnects(proxy: FaultProxy) -> None:
    ev = Events()
    nc = nats.connect(proxy.url, name="stall", ping_interval=0.5, max_outstanding_pings=2, **FAST, **ev.kwargs())
    write: StalledWrite | None = None
    try:
        nc.flush()
        proxy.stop_reading(close_window=True)
        write = StalledWrite(nc, "stall.x")
        # Two keep-alive PINGs unanswered: ~1.5 s. The bug: never.
        assert ev.disconnected.wait(10), "the client still says connected to a peer that stopped reading"
        assert any(isinstance(e, nats.StaleConnectionError) for e in ev.errors), ev.errors
        assert write.done.wait(10), "the publish stayed blocked after the connection was given up"
        assert write.error is None or isinstance(write.error, nats.NatsError), write.error
        proxy.heal()
        assert ev.reconnected.wait(10)
        try:
            nc.flush(timeout=5)
        except nats.ConnectionError as exc:  # the stalled publish may be lost: said once, before a PONG
            assert "may not have arrived" in str(exc)
            nc.flush(timeout=5)
    finally:
        proxy.cut()
        assert _close_within(nc, 10)
        if write is not None:
            write.done.wait(10)


def test_close_returns_promptly_while_a_write_is_stalled(proxy: FaultProxy) -> None:
    nc = nats.connect(proxy.url, name="stall-close", **FAST)
    write: StalledWrite | None = None
    try:
        nc.flush()
        proxy.stop_reading(close_window=True)
        write = StalledWrite(nc, "stall.x")
        assert wait_until(write.stuck, timeout=15), "the big write never started"
        # Another thread's message waits in the client's buffer, so close() has
        # something to send (from a thread of its own: it may block too).
        threading.Thread(target=nc.publish, args=("stall.y", b"one more"), name="test-one-more", daemon=True).start()
        assert wait_until(lambda: nc.pending_data_size > 0, timeout=5)
        assert _close_within(nc, 5), "close() blocked behind the stalled write"
        assert write.done.wait(5), "the stalled publish was not woken by close()"
    finally:
        proxy.cut()
        assert _close_within(nc, 10)
        if write is not None:
            write.done.wait(10)


@pytest.mark.parametrize("call", ["flush", "request"])
def test_a_call_that_sends_keeps_its_timeout_while_a_write_is_stalled(proxy: FaultProxy, call: str) -> None:
    nc = nats.connect(proxy.url, name="stall-" + call, **FAST)
    write: StalledWrite | None = None
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            if call == "flush":
                nc.flush(timeout=1.0)
            else:
                nc.request("stall.req", b"?", timeout=1.0)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    try:
        nc.flush()
        proxy.stop_reading(close_window=True)
        write = StalledWrite(nc, "stall.x")
        assert wait_until(write.stuck, timeout=15), "the big write never started"
        sender = threading.Thread(target=send, name="test-sender", daemon=True)
        sender.start()
        sender.join(5)  # timeout=1: the bug waits behind the stalled write
        assert outcome, f"{call}(timeout=1.0) still blocked after 5 s"
        assert isinstance(outcome[0], nats.NatsError), outcome
    finally:
        proxy.cut()
        assert _close_within(nc, 10)
        if write is not None:
            write.done.wait(10)
