"""Heals of continuous pulls under pressure: slow re-creations, stops and drains
that race a heal, busy errand threads, outages and a closed client.

The JetStream API of the reader is served through :class:`ApiRelay`, a second
client that passes every request on to the real ``$JS.API`` and can hold
consumer creates back: a slow or stuck JetStream as the reader meets it, while
pull requests and their messages still flow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync import Msg
from natsjs_sync._core.spi import link
from natsjs_sync._timeout import Deadline
from natsjs_sync.errors import NoHeartbeatError
from natsjs_sync.jetstream import ConsumeContext, JetStream
from natsjs_sync.jetstream._errands import ERRAND_THREADS, Errands
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until

HB = 0.2  # short heartbeats: two missed take 0.4 s
BOUND = 20.0  # seconds any one step may take on a loaded machine (each takes well under one)


class ApiRelay:
    """A JetStream API under ``prefix``, passed on to ``$JS.API`` by ``nc``.

    While :attr:`hold` is set, each consumer create waits until :attr:`release`
    is set or ``hold_for`` seconds pass (the fault: a JetStream slow to make a
    consumer), and :attr:`holding` is set once one waits. Other requests pass at once.
    """

    def __init__(self, nc: nats.Client, hold_for: float):
        self.prefix = "R" + next_nuid() + ".API"
        self.hold = threading.Event()
        self.release = threading.Event()
        self.holding = threading.Event()
        self.asked = 0  #: consumer creates asked for while held back (counted on arrival)
        self._nc = nc
        self._hold_for = hold_for
        # Two subscriptions (two callback lanes): a held create never holds back a pull request.
        self._subs = [nc.subscribe(f"{self.prefix}.CONSUMER.CREATE.>", cb=self._create),
                      nc.subscribe(f"{self.prefix}.>", cb=self._other)]
        nc.flush()

    def _pass_on(self, msg: Msg) -> None:
        self._nc.publish("$JS.API" + msg.subject[len(self.prefix):], msg.data, reply=msg.reply or None,
                         headers=msg.headers)

    def _create(self, msg: Msg) -> None:
        if self.hold.is_set():
            self.holding.set()
            self.release.wait(self._hold_for)
        self._pass_on(msg)

    def _other(self, msg: Msg) -> None:
        if ".CONSUMER.CREATE." not in msg.subject:
            self._pass_on(msg)
        elif self.hold.is_set():
            self.asked += 1

    def close(self) -> None:
        self.release.set()
        for sub in self._subs:
            sub.unsubscribe()


@pytest.fixture
def clients(nats_server: NatsServer) -> Iterator[tuple[nats.Client, nats.Client]]:
    """A reader client and an admin client of a fresh server."""
    reader = nats.connect(nats_server.url, name="reader")
    admin = nats.connect(nats_server.url, name="admin")
    try:
        yield reader, admin
    finally:
        reader.close()
        admin.close()


def _stream(js: JetStream, n: int = 0) -> str:
    name = "C" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    _publish(js, name, 0, n)
    return name


def _publish(js: JetStream, stream: str, start: int, n: int) -> None:
    for i in range(start, start + n):
        js.publish(f"{stream}.a", str(i).encode())


def _consumers(js: JetStream, stream: str) -> int:
    return js.stream_info(stream).state.consumer_count


def test_ordered_consume_recovers_when_remaking_outlasts_two_heartbeats(
        clients: tuple[nats.Client, nats.Client]) -> None:
    """Every create takes 4 heartbeats. Missed heartbeats counted while the consumer
    was being made anew threw each new consumer away on arrival, for ever."""
    reader, admin = clients
    ajs = admin.jetstream()
    relay = ApiRelay(admin, hold_for=4 * HB)
    try:
        name = _stream(ajs, 5)
        rjs = reader.jetstream(api_prefix=relay.prefix, timeout=BOUND)
        got: list[int] = []
        ten = threading.Event()

        def handler(msg: Msg) -> None:
            got.append(int(msg.data))
            if len(got) == 10:
                ten.set()

        oc = rjs.ordered_consumer(name)
        ctx = oc.consume(handler, max_messages=10, expires=2.0, heartbeat=HB)
        with ctx:
            assert wait_until(lambda: len(got) == 5, timeout=BOUND)
            relay.hold.set()  # from now on each create is slow
            first = oc.name
            assert first is not None
            ajs.delete_consumer(name, first)  # the pull waiting on it ends: the consumer is made anew
            _publish(ajs, name, 5, 5)
            assert ten.wait(BOUND)
        assert got == list(range(10))
    finally:
        relay.close()


def test_errand_lanes_take_turns(clients: tuple[nats.Client, nats.Client]) -> None:
    """Owners whose heals keep coming (each queues the next before it ends) hold
    every errand thread: another owner's errand runs after one turn of each, not
    after a batch of hundreds of theirs."""
    reader, _ = clients
    errands = Errands.of(link(reader))
    go = threading.Event()
    other_ran = threading.Event()
    waiting = threading.Semaphore(0)
    runs: list[int] = []
    runs_before_other: list[int] = []
    greedy = [errands.lane(f"greedy-{i}") for i in range(ERRAND_THREADS)]

    def heal(i: int, first: bool) -> None:
        if first:
            waiting.release()
            go.wait(BOUND)
        runs.append(i)
        if not other_ran.is_set() and len(runs) < 2000:  # bounded: the next heal of this owner
            greedy[i].put(lambda: heal(i, False))

    def other() -> None:
        runs_before_other.append(len(runs))
        other_ran.set()

    for i, lane in enumerate(greedy):
        lane.put(lambda i=i: heal(i, True))  # type: ignore[misc]
    for _ in greedy:
        assert waiting.acquire(timeout=BOUND)  # every errand thread is taken
    errands.lane("other").put(other)
    go.set()
    assert other_ran.wait(BOUND)
    assert runs_before_other[0] <= 2 * ERRAND_THREADS


def test_an_earlier_iteration_released_late_leaves_the_next_alone(clients: tuple[nats.Client, nats.Client]) -> None:
    """An iteration ended after the next one began (stopped late, or collected and
    released on the timer thread) cancelled the ordered consumer itself: it deleted
    the consumer the next iteration reads, and left that one's reads cancelled."""
    reader, admin = clients
    ajs = admin.jetstream()
    name = _stream(ajs, 10)
    oc = reader.jetstream().ordered_consumer(name)
    first = oc.messages(max_messages=1)
    assert first.next(timeout=BOUND).data == b"0"
    second = oc.messages(max_messages=1)
    first.stop()
    with second:
        assert [int(second.next(timeout=BOUND).data) for _ in range(9)] == list(range(1, 10))
        assert _consumers(ajs, name) == 1
    assert wait_until(lambda: _consumers(ajs, name) == 0, timeout=BOUND)


def test_stop_during_a_heal_in_next_deletes_what_the_heal_made(clients: tuple[nats.Client, nats.Client]) -> None:
    """stop() while next() makes the consumer anew: the consumer made after the stop
    is deleted (it stayed on the server until its inactive threshold)."""
    reader, admin = clients
    ajs = admin.jetstream()
    relay = ApiRelay(admin, hold_for=BOUND)
    try:
        name = _stream(ajs, 3)
        oc = reader.jetstream(api_prefix=relay.prefix, timeout=BOUND).ordered_consumer(name)
        it = oc.messages(max_messages=10)
        got: list[int] = []
        errors: list[BaseException] = []

        def read() -> None:
            try:
                for msg in it:
                    got.append(int(msg.data))
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=read, name="reader-loop", daemon=True)
        t.start()
        assert wait_until(lambda: len(got) == 3, timeout=BOUND)
        relay.hold.set()
        current = oc.name
        assert current is not None
        ajs.delete_consumer(name, current)  # next() makes it anew: the create waits at the relay
        assert relay.holding.wait(BOUND)
        it.stop()
        relay.release.set()  # the create goes on, after the stop
        t.join(BOUND)
        assert not t.is_alive() and errors == []
        assert wait_until(lambda: _consumers(ajs, name) == 0, timeout=BOUND)
    finally:
        relay.close()


def test_stop_during_a_heal_of_consume_deletes_what_the_heal_made(clients: tuple[nats.Client, nats.Client]) -> None:
    """The same for consume(), whose heal runs on an errand thread."""
    reader, admin = clients
    ajs = admin.jetstream()
    relay = ApiRelay(admin, hold_for=BOUND)
    try:
        name = _stream(ajs, 3)
        oc = reader.jetstream(api_prefix=relay.prefix, timeout=BOUND).ordered_consumer(name)
        got: list[int] = []
        ctx = oc.consume(lambda msg: got.append(int(msg.data)), max_messages=10)
        assert wait_until(lambda: len(got) == 3, timeout=BOUND)
        relay.hold.set()
        current = oc.name
        assert current is not None
        ajs.delete_consumer(name, current)  # the consumer is made anew: the create waits at the relay
        assert relay.holding.wait(BOUND)
        ctx.stop()
        relay.release.set()  # the create goes on, after the stop
        assert wait_until(lambda: _consumers(ajs, name) == 0, timeout=BOUND)
    finally:
        relay.close()


def test_next_keeps_its_timeout_while_a_heal_waits(clients: tuple[nats.Client, nats.Client]) -> None:
    reader, admin = clients
    ajs = admin.jetstream()
    relay = ApiRelay(admin, hold_for=BOUND)
    try:
        name = _stream(ajs, 1)
        oc = reader.jetstream(api_prefix=relay.prefix, timeout=BOUND).ordered_consumer(name)
        with oc.messages(max_messages=10) as it:
            assert it.next(timeout=BOUND).data == b"0"
            relay.hold.set()
            current = oc.name
            assert current is not None
            ajs.delete_consumer(name, current)
            with pytest.raises(nats.TimeoutError):
                for _ in range(100):  # bounded: the 409 may come after the first wait
                    it.next(timeout=0.3)
            assert relay.holding.is_set() and not relay.release.is_set()  # the create still waits
    finally:
        relay.close()


def test_drain_from_the_handler_keeps_its_deadline_while_errands_are_busy(
        clients: tuple[nats.Client, nats.Client]) -> None:
    """Every errand thread is held (other consumers' heals): a drain asked for from
    the handler still ends consumption at its deadline (it waited for a thread)."""
    reader, admin = clients
    ajs = admin.jetstream()
    name = _stream(ajs, 3)
    ajs.create_consumer(name, durable_name="D", ack_policy="none")
    errands = Errands.of(link(reader))
    busy = threading.Event()
    taken = threading.Semaphore(0)

    def heal() -> None:
        taken.release()
        busy.wait(2 * BOUND)

    try:
        for i in range(ERRAND_THREADS):
            errands.lane(f"busy-{i}").put(heal)
        for _ in range(ERRAND_THREADS):
            assert taken.acquire(timeout=BOUND)
        holder: list[ConsumeContext] = []
        ready = threading.Event()

        def handler(msg: Msg) -> None:
            assert ready.wait(BOUND)
            holder[0].drain(timeout=0.3)  # from the handler: returns at once

        holder.append(reader.jetstream().consumer(name, "D").consume(handler))
        ready.set()
        assert holder[0].closed.wait(BOUND)
        assert not busy.is_set()  # every errand thread was held throughout
    finally:
        busy.set()


def test_a_delete_made_while_reconnecting_is_sent_after_the_reconnect(nats_server: NatsServer) -> None:
    """As nats.go's: the clean-up waits in the write buffer (and the consumer has an
    inactive threshold for a delete that cannot arrive)."""
    with FaultProxy(nats_server.url) as proxy, \
            nats.connect(nats_server.url, name="admin") as admin, \
            nats.connect(proxy.url, name="reader", reconnect_time_wait=0.05, max_reconnect_attempts=-1) as reader:
        ajs = admin.jetstream()
        name = _stream(ajs, 1)
        oc = reader.jetstream().ordered_consumer(name)
        it = oc.messages(max_messages=10)
        assert oc.cached_info is not None and oc.cached_info.config.inactive_threshold == 300.0
        assert it.next(timeout=BOUND).data == b"0"
        proxy.refuse_new()
        proxy.cut()
        assert wait_until(lambda: not reader.is_connected, timeout=BOUND)
        it.stop()  # the delete waits for the connection
        assert _consumers(ajs, name) == 1
        proxy.heal()
        assert wait_until(lambda: reader.is_connected, timeout=BOUND)
        assert wait_until(lambda: _consumers(ajs, name) == 0, timeout=BOUND)


def test_nothing_is_reported_after_close(nats_server: NatsServer) -> None:
    """A close while an ordered consume() and an idle ordered iterator make their
    consumers anew (JetStream silent): the heals fail with the closed connection,
    and that is no news to the user."""
    seen: list[tuple[bool, Exception]] = []
    closed = threading.Event()
    missed = {"consume": threading.Event(), "messages": threading.Event()}

    def error_cb(source: str) -> Callable[[Exception], None]:
        def report(exc: Exception) -> None:
            seen.append((closed.is_set(), exc))
            if isinstance(exc, NoHeartbeatError):
                missed[source].set()

        return report

    with FaultProxy(nats_server.url) as proxy, nats.connect(nats_server.url, name="admin") as admin:
        ajs = admin.jetstream()
        name = _stream(ajs, 1)
        nc = nats.connect(proxy.url, name="closing", error_cb=error_cb("client"))
        got = threading.Event()
        nc.jetstream().ordered_consumer(name).consume(lambda m: got.set(), heartbeat=HB, expires=2.0,
                                                      error_cb=error_cb("consume"))
        it = nc.jetstream().ordered_consumer(name).messages(heartbeat=HB, expires=2.0, error_cb=error_cb("messages"))
        assert it.next(timeout=BOUND).data == b"0"
        assert got.wait(BOUND)
        proxy.blackhole()
        # Both heals are under way, each waiting on the silent server for its budget
        # (5 s) with heartbeats not counted meanwhile: nothing more is due from them.
        assert all(event.wait(BOUND) for event in missed.values())
        closed.set()
        nc.close()
        # Once the client's threads are gone nothing more can be reported.
        assert wait_until(lambda: not [t for t in threading.enumerate() if "-closing" in t.name], timeout=BOUND)
        assert [exc for after, exc in seen if after] == []


def test_a_create_that_timed_out_leaves_no_consumer_behind(clients: tuple[nats.Client, nats.Client]) -> None:
    """A heal whose creates time out (JetStream slow) and a JetStream that makes
    them all later: each attempt had a name of its own, so every late create left a
    consumer nobody used until its inactive threshold (5 min). nats.go asks for the
    same consumer again until one is made."""
    reader, admin = clients
    ajs = admin.jetstream()
    relay = ApiRelay(admin, hold_for=BOUND)
    try:
        name = _stream(ajs, 1)
        rjs = reader.jetstream(api_prefix=relay.prefix, timeout=0.3)
        it = rjs.ordered_consumer(name).messages(max_messages=10, expires=2.0, heartbeat=HB)
        with it:
            assert it.next(timeout=BOUND).data == b"0"
            relay.hold.set()
            ajs.delete_consumer(name, _only_consumer(ajs, name))
            assert wait_until(lambda: relay.asked >= 3, timeout=BOUND)  # two creates timed out, a third waits
            relay.hold.clear()
            relay.release.set()
            _publish(ajs, name, 1, 1)
            assert it.next(timeout=BOUND).data == b"1"  # healed
        # Every create held was passed on before the one answered (the relay serves them
        # in order), so none comes after the stop's delete: nothing may be left.
        assert wait_until(lambda: _consumers(ajs, name) == 0, timeout=BOUND)
    finally:
        relay.close()


def _only_consumer(js: JetStream, stream: str) -> str:
    names = [info.name for info in js.list_consumers(stream)]
    assert len(names) == 1
    return names[0]


def test_a_heal_of_a_stopped_iteration_leaves_the_next_alone(clients: tuple[nats.Client, nats.Client]) -> None:
    """The heal of an iteration reaches the ordered consumer after that iteration was
    stopped and the next one began (the heal runs on an errand thread): it took the
    next iteration's consumer as its own and deleted it before it saw the stop."""
    reader, admin = clients
    ajs = admin.jetstream()
    name = _stream(ajs, 2)
    oc = reader.jetstream().ordered_consumer(name)
    first = oc.messages(max_messages=1)
    assert first.next(timeout=BOUND).data == b"0"
    hooks = first._ordered  # what the first iteration's heal calls
    assert hooks is not None
    first.stop()
    with oc.messages(max_messages=1) as second:
        assert second.next(timeout=BOUND).data == b"1"
        current = oc.name
        with pytest.raises(nats.errors.BadSubscriptionError):
            hooks.recreate(Deadline(BOUND))  # the late heal of the first iteration
        assert oc.name == current
        assert [info.name for info in ajs.list_consumers(name)] == [current]
