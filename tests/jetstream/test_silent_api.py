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
from natsjs_sync.jetstream import MessagesContext, Stream
from natsjs_sync.msg import Msg
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

HB = 0.2  # heartbeats of the ordered pulls: two missed take under a second
EXPIRES = 1.0
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


def _creates_of(*prefixes: str) -> Callable[[list[str]], bool]:
    """A create request of each ordered consumer (by its name prefix) was dropped: each is healing."""
    def seen(dropped: list[str]) -> bool:
        return all(any(d.startswith("CONSUMER.CREATE.") and f".{p}_" in d for d in dropped) for p in prefixes)

    return seen


def _callbacks_run(nc: nats.Client, publisher: nats.Client, n: int) -> bool:
    """Whether ``n`` core messages all reach a callback of ``nc`` within the bound."""
    subject = f"core.{next_nuid()}"
    got: list[bytes] = []
    all_in = threading.Event()

    def cb(msg: Msg) -> None:
        got.append(msg.data)
        if len(got) == n:
            all_in.set()

    sub = nc.subscribe(subject, cb=cb)
    nc.flush()
    for i in range(n):
        publisher.publish(subject, str(i).encode())
    publisher.flush()
    # With every worker held by heals the callbacks never run while JetStream is silent.
    ok = all_in.wait(10.0)
    sub.unsubscribe()
    return ok


@pytest.mark.parametrize("mode", ["messages", "consume"])
def test_heals_never_hold_the_callback_workers(shared_server: NatsServer, nc: nats.Client, relay: ApiRelay,
                                               stream: Stream, mode: str) -> None:
    """As many healing ordered consumers as callback workers: other callbacks still run."""
    reader = nats.connect(shared_server.url, name="reader", max_callback_threads=2)
    try:
        rjs = reader.jetstream(api_prefix=relay.prefix)
        contexts: list[object] = []
        for i in range(2):
            oc = rjs.ordered_consumer(stream.name, name_prefix=f"w{i}")
            if mode == "messages":
                it = oc.messages(expires=EXPIRES, heartbeat=HB)  # idle: nobody reads it
                it.start()
                contexts.append(it)
            else:
                contexts.append(oc.consume(lambda _m: None, expires=EXPIRES, heartbeat=HB))
        relay.drop_all()  # JetStream falls silent for the reader; core NATS goes on
        assert relay.wait_dropped(_creates_of("w0", "w1")), "the consumers did not start healing"
        assert _callbacks_run(reader, nc, 40), "core callbacks starved behind the heals"
        relay.forward_all()
        for c in contexts:
            c.stop()  # type: ignore[attr-defined]
    finally:
        reader.close()


def test_next_keeps_its_timeout_while_a_heal_waits(shared_server: NatsServer, relay: ApiRelay,
                                                   stream: Stream) -> None:
    reader = nats.connect(shared_server.url, name="reader")
    try:
        oc = reader.jetstream(api_prefix=relay.prefix).ordered_consumer(stream.name, name_prefix="nx")
        it: MessagesContext = oc.messages(expires=EXPIRES, heartbeat=HB)
        it.start()
        relay.drop_all()
        # The heal sends the delete of the old consumer, then waits up to 5 s for a create.
        assert relay.wait_dropped(lambda d: any(s.startswith("CONSUMER.DELETE.") for s in d))
        started = time.monotonic()
        with pytest.raises(nats.TimeoutError):
            it.next(timeout=0.2)
        elapsed = time.monotonic() - started
        assert elapsed < 2.5, f"next(timeout=0.2) returned after {elapsed:.1f} s, waiting for the heal"
        relay.forward_all()
        it.stop()
    finally:
        reader.close()


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
