"""Fork safety of the instrumentation: a child forked while a thread of the parent holds one of the
instrumentation's locks does not wait on it for ever (a pre-fork server forking while its master
records a subscription or its metric reader collects)."""

from __future__ import annotations

import threading

import natsjs_sync as nats
from natsjs_sync.otel.spans import _Live
from natsjs_sync.testing import NatsServer

from ..fork_kit import run_in_child
from .conftest import Telemetry


def test_a_child_forked_while_a_parent_thread_holds_the_state_locks_can_subscribe(
        otel: Telemetry, nats_server: NatsServer) -> None:
    state = _Live.current
    assert state is not None
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        # The locks are held only for a moment in use; holding them here makes that moment the fork's.
        with state._lock, state.metrics._lock:
            held.set()
            release.wait(60)

    def child() -> dict[str, object]:
        got: list[bytes] = []
        done = threading.Event()

        def use() -> None:
            with nats.connect(nats_server.url) as nc:
                sub = nc.subscribe("after.fork")  # records the subscription: takes both locks
                nc.publish("after.fork", b"hi")
                got.append(sub.next_msg(timeout=10).data)
            done.set()

        threading.Thread(target=use, daemon=True).start()
        return {"done": done.wait(20), "got": got[0].decode() if got else None}

    holder = threading.Thread(target=hold, name="holds-the-locks")
    holder.start()
    try:
        assert held.wait(30)
        result = run_in_child(child)
    finally:
        release.set()
        holder.join(30)
    assert result == {"done": True, "got": "hi"}, "the child hung on a lock of the instrumentation"
    # The parent's locks are its own still: released by their holder, usable again.
    assert state._lock.acquire(timeout=5) and state.metrics._lock.acquire(timeout=5)
    state._lock.release()
    state.metrics._lock.release()
