"""Consumers never starve the client while JetStream is silent.

The reader's JetStream context reaches the API through a relay: another
client that serves ``<prefix>.>`` by forwarding each request to ``$JS.API``
with its reply subject kept (an imported JetStream API works the same way).
When the relay drops what it is sent, JetStream falls silent for the reader
while core NATS goes on: heals of ordered consumers wait on requests that get
no answer. None of that waiting may happen on the client's shared threads:
the dispatcher's workers (every user callback) and the timer (every
deadline).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.msg import Msg
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

BOUND = 30.0  # seconds any one step may take on a loaded machine (each takes about one)


class ApiRelay:
    """Serves the JetStream API under ``prefix`` by forwarding to ``$JS.API``; :meth:`drop`
    silences what a predicate selects (:meth:`drop_all`: everything). Thread-safe."""

    def __init__(self, url: str):
        self.prefix = f"R{next_nuid()}.API"
        self.nc = nats.connect(url, name="relay")
        self._drop: Callable[[str], bool] = lambda _suffix: False
        self._cond = threading.Condition()
        self.dropped: list[str] = []  #: the API suffixes dropped (``CONSUMER.CREATE.<stream>.<name>``...)
        self.nc.subscribe(f"{self.prefix}.>", cb=self._forward)
        self.nc.flush()

    def _forward(self, msg: Msg) -> None:
        suffix = msg.subject[len(self.prefix) + 1:]
        if self._drop(suffix):
            with self._cond:
                self.dropped.append(suffix)
                self._cond.notify_all()
            return
        self.nc.publish(f"$JS.API.{suffix}", msg.data, reply=msg.reply, headers=msg.headers)

    def drop(self, predicate: Callable[[str], bool]) -> None:
        self._drop = predicate

    def drop_all(self) -> None:
        self.drop(lambda _suffix: True)

    def forward_all(self) -> None:
        self.drop(lambda _suffix: False)

    def wait_dropped(self, predicate: Callable[[list[str]], bool], timeout: float = BOUND) -> bool:
        """Wait until what was dropped satisfies ``predicate``."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(list(self.dropped)), timeout)

    def __enter__(self) -> ApiRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.nc.close()


@pytest.fixture
def relay(shared_server: NatsServer) -> Iterator[ApiRelay]:
    with ApiRelay(shared_server.url) as r:
        yield r


def test_closing_key_listers_never_holds_the_timer(shared_server: NatsServer, nc: nats.Client,
                                                   relay: ApiRelay) -> None:
    """A key lister closed early hands its stop to the timer thread; the consumer delete
    it sends must not make the timer wait for an answer (every deadline would be late)."""
    bucket = "B" + next_nuid()
    nc.jetstream().create_key_value(bucket=bucket, storage="memory")
    reader = nats.connect(shared_server.url, name="reader")
    silent = nats.connect(shared_server.url, name="silent")
    try:
        silent.subscribe("nobody.acks")  # takes the publish and never answers
        silent.flush()
        kv = reader.jetstream(api_prefix=relay.prefix).key_value(bucket)
        for k in ("a", "b", "c"):
            kv.put(k, b"1")
        relay.drop(lambda suffix: suffix.startswith("CONSUMER.DELETE."))  # deletes go unanswered
        for _ in range(10):
            keys = iter(kv.list_keys())
            assert next(keys) in ("a", "b", "c")
            keys.close()  # early: the stop goes to the timer thread
        fut = reader.jetstream(publish_async_timeout=0.5).publish_async("nobody.acks", b"x")
        started = time.monotonic()
        assert isinstance(fut.exception(timeout=BOUND), nats.TimeoutError)
        elapsed = time.monotonic() - started
        # Ten deletes waited for on the timer thread held it for 10 s.
        assert elapsed < 4.0, f"a 0.5 s ack timeout fired after {elapsed:.1f} s"
        # The deletes were sent all the same.
        assert relay.wait_dropped(lambda d: sum(s.startswith("CONSUMER.DELETE.") for s in d) >= 10)
    finally:
        silent.close()
        reader.close()
        nc.jetstream().delete_key_value(bucket)
