"""Issue 20, key-value watches resume at once after a reconnect (they stayed
silent for about two heartbeats, 24-30 s)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import Entry, KeyValue
from natsjs_sync.testing import NatsServer

from ..recovery import FAST, Events, Reader, restart

RESUME_BOUND = 12.0  # fails the bug (24-30 s), leaves a loaded machine room


@pytest.fixture
def restartable() -> Iterator[tuple[NatsServer, nats.Client, Events]]:
    server = NatsServer()
    server.start()
    ev = Events()
    nc = nats.connect(server.url, name="kv-resume", **FAST, **ev.kwargs())
    try:
        yield server, nc, ev
    finally:
        nc.close()
        server.close()


def _put_when_back(kv: KeyValue, key: str, value: bytes, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return kv.put(key, value, timeout=2.0)
        except nats.NatsError:
            if time.monotonic() > deadline:
                raise


def test_a_watch_resumes_at_once_after_a_server_restart(restartable: tuple[NatsServer, nats.Client, Events]) -> None:
    server, nc, ev = restartable
    kv = nc.jetstream().create_key_value(bucket="W", history=5, storage="file")
    kv.put("a", b"initial")
    watcher = kv.watch("a")

    def value(entry: Entry | None) -> bytes | None:
        return None if entry is None else entry.value

    reader = Reader(lambda: value(watcher.next()), name="test-watch", stop_on=(nats.BadSubscriptionError,))
    try:
        assert reader.wait_for(lambda: reader.values()[:2] == [b"initial", None], 10)
        kv.put("a", b"before")
        assert reader.wait_for(lambda: b"before" in reader.values(), 10)
        back = restart(server)
        assert ev.reconnected.wait(10)
        _put_when_back(kv, "a", b"after")
        reader.wait_for(lambda: b"after" in reader.values(), max(0.1, back + RESUME_BOUND - time.monotonic()))
        at = reader.first_time(lambda v: v == b"after")
        print(f"KV watch: resumed {at - back:.2f} s after the server was back" if at else "KV watch: silent")
        assert at is not None, f"the watch stayed silent {RESUME_BOUND} s after the server was back"
        # Every update once, in order: the restart neither lost nor repeated one.
        assert reader.values() == [b"initial", None, b"before", b"after"]
    finally:
        reader.stop(watcher.stop)
