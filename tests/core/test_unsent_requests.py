"""Was it sent? A request (core, JetStream publish, JetStream API call) whose
deadline passes while its bytes are still in the client's buffer (the server is
away, or they wait behind a write the server does not take) is withdrawn and
raises NotSentError: nothing reaches the server, ever. One that was sent and
not answered raises a plain TimeoutError that says so.

The old code left every such request in the buffer and raised "no reply": it
was sent once the connection came back, so a JetStream publish was stored after
the caller had been told it failed, and a retry without msg_id stored it twice.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import natsjs_sync as nats
from natsjs_sync._core.connection import Connection
from natsjs_sync._core.options import ConnectOptions
from natsjs_sync.errors import NotSentError
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ..recovery import FAST, Events

BOUND = 15.0


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(max_payload=64 * 1024 * 1024) as s:
        yield s


def _client(proxy: FaultProxy, ev: Events | None = None, **options: Any) -> nats.Client:
    nc = nats.connect(proxy.url, name="unsent", ping_interval=0, **FAST, **(ev.kwargs() if ev else {}), **options)
    nc.flush(timeout=5)
    return nc


def _server_away(proxy: FaultProxy, ev: Events) -> None:
    """The server is gone for the client: its connection reset, new ones refused."""
    proxy.refuse_new()
    proxy.cut()
    assert ev.disconnected.wait(BOUND)


def _server_back(proxy: FaultProxy, ev: Events) -> None:
    ev.reconnected.clear()
    proxy.heal()
    assert ev.reconnected.wait(BOUND)


def test_a_request_made_while_the_server_is_away_is_withdrawn(proxy: FaultProxy, witness: nats.Client) -> None:
    seen = witness.subscribe("svc.price", cb=lambda m: m.respond(b"7.50"))
    witness.flush(timeout=5)
    ev = Events()
    nc = _client(proxy, ev)
    try:
        assert nc.request("svc.price", b"before", timeout=5).data == b"7.50"
        _server_away(proxy, ev)
        with pytest.raises(NotSentError, match="nothing was sent") as info:
            nc.request("svc.price", b"during", timeout=0.5)
        assert isinstance(info.value, nats.TimeoutError)  # an except TimeoutError still catches it
        _server_back(proxy, ev)
        assert nc.request("svc.price", b"after", timeout=5).data == b"7.50"
        nc.flush(timeout=5)
        witness.flush(timeout=5)
        assert seen.delivered == 2, "the withdrawn request reached the service after the reconnect"
        assert nc.stats.reconnects == 1
    finally:
        nc.close()


def test_a_jetstream_publish_made_while_the_server_is_away_is_never_stored(
        proxy: FaultProxy, witness: nats.Client) -> None:
    wjs = witness.jetstream()
    wjs.create_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
    ev = Events()
    nc = _client(proxy, ev)
    js = nc.jetstream(timeout=5)
    try:
        assert js.publish("orders.new", b"one").seq == 1
        _server_away(proxy, ev)
        with pytest.raises(NotSentError, match="nothing was sent"):
            js.publish("orders.new", b"two", timeout=0.5)  # no msg_id: only "not sent" makes a retry safe
        with pytest.raises(NotSentError):
            js.stream_info("ORDERS", timeout=0.5)  # an API call: the same rule
        _server_back(proxy, ev)
        assert js.publish("orders.new", b"two").seq == 2  # the retry
        nc.flush(timeout=5)
        assert [wjs.get_msg("ORDERS", seq).data for seq in (1, 2)] == [b"one", b"two"]
        assert wjs.stream_info("ORDERS").state.messages == 2, "the withdrawn publish was stored after all"
    finally:
        nc.close()
        wjs.delete_stream("ORDERS")


def test_pending_size_zero_fails_fast_while_the_server_is_away(proxy: FaultProxy, witness: nats.Client) -> None:
    """web.rst's fail-fast recipe: with pending_size=0 nothing waits for a
    reconnect; every publish and request made meanwhile is refused at once, unsent."""
    from natsjs_sync.contrib.process import error_status

    ev = Events()
    nc = _client(proxy, ev, pending_size=0)
    js = nc.jetstream(timeout=30)
    try:
        _server_away(proxy, ev)
        for call in (lambda: nc.publish("svc.x", b"core"), lambda: nc.request("svc.x", b"req", timeout=30),
                     lambda: js.publish("orders.new", b"js")):
            with pytest.raises(nats.OutboundBufferLimitError) as info:
                call()
            assert error_status(info.value)[0] == 503
        _server_back(proxy, ev)
        nc.flush(timeout=5)
    finally:
        nc.close()


def test_a_request_that_was_sent_says_so(proxy: FaultProxy, witness: nats.Client) -> None:
    witness.subscribe("svc.slow")  # takes the request, never answers
    wjs = witness.jetstream()
    wjs.create_stream(name="HELD", subjects=["held.>"], storage="memory")
    witness.flush(timeout=5)
    nc = _client(proxy)
    js = nc.jetstream(timeout=5)
    try:
        with pytest.raises(nats.TimeoutError, match="was sent") as info:
            nc.request("svc.slow", b"x", timeout=0.3)
        assert not isinstance(info.value, NotSentError)
        proxy.blackhole("to_client")  # the publish reaches the stream, its PubAck does not come back
        with pytest.raises(nats.TimeoutError, match="same msg_id") as info:
            js.publish("held.x", b"stored", msg_id="order-1", timeout=0.5)
        assert not isinstance(info.value, NotSentError)
        assert wait_until(lambda: wjs.stream_info("HELD").state.messages == 1, timeout=BOUND)
        proxy.heal()
        again = js.publish("held.x", b"stored", msg_id="order-1", timeout=5)  # the documented retry
        assert again.duplicate and again.seq == 1
    finally:
        proxy.heal()
        nc.close()
        wjs.delete_stream("HELD")


def test_a_request_behind_a_stalled_write_is_withdrawn_whole(proxy: FaultProxy, witness: nats.Client) -> None:
    """Bytes behind a write the server does not take are withdrawn exactly: the
    stalled write's frame and whatever was published after the withdrawn
    request arrive whole and in order once the peer reads again."""
    big = bytes(range(256)) * (48 * 1024 * 1024 // 256)
    got_big = witness.subscribe("wd.big", pending_bytes_limit=-1)
    requests = witness.subscribe("wd.req")
    after = witness.subscribe("wd.after")
    witness.flush(timeout=5)
    nc = _client(proxy, write_timeout=60.0)
    publisher = None
    try:
        nc.publish("wd.big", b"")  # a known subject: a publish counts its bytes before it waits for the socket
        proxy.stop_reading()
        # The publisher's own write of a message bigger than every buffer on the way
        # stalls; the request waits in the buffer behind it.
        publisher = threading.Thread(target=nc.publish, args=("wd.big", big), name="test-big-publisher")
        publisher.start()
        # Counted, then taken into the stalled write (a publish while it is still buffered
        # would wait for that write: back-pressure).
        assert wait_until(lambda: nc.stats.out_bytes >= len(big) and nc.pending_data_size == 0, timeout=BOUND)
        nc.publish("wd.after", b"before")
        with pytest.raises(NotSentError):
            nc.request("wd.req", b"withdrawn", timeout=0.5)
        nc.publish("wd.after", b"after")
        proxy.heal()
        nc.flush(timeout=30)
        assert got_big.next_msg(timeout=BOUND).data == b""
        assert got_big.next_msg(timeout=BOUND).data == big
        assert [after.next_msg(timeout=BOUND).data for _ in range(2)] == [b"before", b"after"]
        witness.flush(timeout=5)
        assert requests.pending_msgs == 0 and requests.delivered == 0
        assert nc.is_connected and nc.stats.reconnects == 0
    finally:
        nc.close()
        if publisher is not None:
            publisher.join(BOUND)


def test_a_request_buffered_when_the_connection_drops_waits_for_the_next_one(
        proxy: FaultProxy, witness: nats.Client) -> None:
    """A request whose bytes were still buffered when the connection was lost is
    sent on the next connection and gets its reply there. The old code failed it
    with "connection lost" at once, and sent it anyway after the reconnect."""
    witness.subscribe("svc.price", cb=lambda m: m.respond(b"7.50"))
    witness.flush(timeout=5)
    ev = Events()
    nc = _client(proxy, ev, write_timeout=60.0)
    outcome: list[object] = []
    publisher = requester = None
    try:
        nc.publish("wd.big", b"")  # a known subject: a publish counts its bytes before it waits for the socket
        proxy.stop_reading(close_window=True)
        publisher = threading.Thread(target=lambda: nc.publish("wd.big", b"x" * (12 * 1024 * 1024)),
                                     name="test-big-publisher")
        publisher.start()  # its write stalls and holds the send lock
        assert wait_until(lambda: nc.stats.out_bytes >= 12 * 1024 * 1024 and nc.pending_data_size == 0,
                          timeout=BOUND)

        def ask() -> None:
            try:
                outcome.append(nc.request("svc.price", b"", timeout=BOUND))
            except nats.NatsError as exc:
                outcome.append(exc)

        requester = threading.Thread(target=ask, name="test-requester")
        requester.start()
        assert wait_until(lambda: nc.stats.out_msgs >= 3, timeout=BOUND)  # the empty one, the big one, the request
        proxy.cut()  # the stalled write's bytes are lost, the request's never left the buffer
        proxy.heal()
        assert ev.reconnected.wait(BOUND)
        requester.join(BOUND)
        assert len(outcome) == 1
        assert isinstance(outcome[0], nats.Msg) and outcome[0].data == b"7.50", outcome[0]
    finally:
        proxy.heal()
        nc.close()
        for t in (publisher, requester):
            if t is not None:
                t.join(BOUND)


def test_requests_during_a_blackhole_do_not_pile_up_and_the_client_works_after_it(
        proxy: FaultProxy, witness: nats.Client) -> None:
    """A client with the default keep-alive (it does not notice a silent network for
    minutes) behind a network that holds all traffic: the requests its threads keep
    making time out, and those the socket never took are withdrawn. The old code
    kept every one for the flusher, which took them all into its next write (1.4 GB
    after 10 s of 8 threads asking with 1 MB): once the network was back the
    service got every stale request, and a flush waited behind all of them
    (flush(timeout=10) timed out with no disconnect, on a loaded machine)."""
    served = [0]
    witness.subscribe("svc.echo", cb=lambda m: (served.__setitem__(0, served[0] + 1), m.respond(b"ok")))
    witness.flush(timeout=5)
    nc = nats.connect(proxy.url, name="blackholed")  # default pings: 2 min
    stop = threading.Event()
    made = [0]

    def keep_asking() -> None:
        while not stop.is_set():
            try:
                nc.request("svc.echo", b"x" * (512 * 1024), timeout=0.05)
            except nats.TimeoutError:
                pass
            made[0] += 1

    threads = [threading.Thread(target=keep_asking, name=f"test-asker-{i}") for i in range(4)]
    try:
        nc.flush(timeout=5)
        proxy.blackhole()
        for t in threads:
            t.start()
        assert wait_until(lambda: made[0] >= 300, timeout=120)  # 150 MiB asked for in all
        stop.set()
        for t in threads:
            t.join(BOUND)
            assert not t.is_alive()
        asked = made[0]
        proxy.heal()
        nc.flush(timeout=10)
        assert nc.request("svc.echo", b"after", timeout=10).data == b"ok"
        witness.flush(timeout=10)
        # What reached the socket before the stall (the kernel's buffers on the way hold a
        # few dozen of these) is delivered late; the rest was withdrawn, never sent.
        print(f"blackhole: {served[0] - 1} of {asked} timed-out requests reached the service")
        assert served[0] - 1 <= asked // 2, f"{served[0] - 1} of {asked} timed-out requests reached the service"
        assert nc.is_connected and nc.stats.reconnects == 0
    finally:
        stop.set()
        proxy.heal()
        nc.close()
        for t in threads:
            if t.is_alive():
                t.join(BOUND)


def test_a_request_is_withdrawn_though_a_publish_was_appended_right_behind_it(
        proxy: FaultProxy, witness: nats.Client) -> None:
    """A plain publish appends without the connection's lock while connected: one
    appended between a request's own append and the reading of where that frame
    ends made the request's end offset point past its frame. At the deadline
    the withdrawal then found other bytes there and gave up: the request raised
    a plain TimeoutError and stayed in the buffer, to be sent after its deadline.
    The interleaving is forced: the requesting thread stops (a profile hook) at
    its first call after its append, until another thread's publish is in the buffer."""
    big = bytes(range(256)) * (48 * 1024 * 1024 // 256)  # more than every buffer on the way
    requests = witness.subscribe("wd.req")
    witness.flush(timeout=5)
    nc = _client(proxy, write_timeout=60.0)
    publisher = requester = None
    outcome: list[BaseException | nats.Msg] = []
    try:
        nc.publish("wd.big", b"")  # known subjects: these publishes take the lock-free path
        nc.publish("wd.noise", b"before")
        nc.flush(timeout=5)
        proxy.stop_reading()
        publisher = threading.Thread(target=nc.publish, args=("wd.big", big), name="test-big-publisher")
        publisher.start()  # its write stalls and holds the send lock: the request stays buffered
        assert wait_until(lambda: nc.stats.out_bytes >= len(big) and nc.pending_data_size == 0, timeout=BOUND)
        published = nc.stats.out_msgs
        noise: list[threading.Thread] = []

        def publish_in_between(frame: FrameType, event: str, arg: object) -> None:
            # The first call the requesting thread makes once its frame is buffered and
            # counted: the one that reads where the frame ends.
            if event == "call" and nc.stats.out_msgs > published and not noise:
                sys.setprofile(None)
                t = threading.Thread(target=nc.publish, args=("wd.noise", b"in between"), name="test-noise")
                noise.append(t)
                t.start()  # it appends, then waits for the lock this thread holds to wake the flusher
                assert wait_until(lambda: nc.stats.out_msgs >= published + 2, timeout=BOUND)

        def ask() -> None:
            sys.setprofile(publish_in_between)
            try:
                outcome.append(nc.request("wd.req", b"withdrawn", timeout=0.5))
            except BaseException as exc:  # what it was is the point of the test
                outcome.append(exc)
            finally:
                sys.setprofile(None)

        requester = threading.Thread(target=ask, name="test-requester")
        requester.start()
        requester.join(BOUND)
        assert noise, "the hook never ran"
        noise[0].join(BOUND)
        assert len(outcome) == 1 and isinstance(outcome[0], NotSentError), outcome
        proxy.heal()
        nc.flush(timeout=30)
        witness.flush(timeout=5)
        assert requests.pending_msgs == 0 and requests.delivered == 0, "the timed-out request was sent after all"
        assert nc.is_connected and nc.stats.reconnects == 0
    finally:
        proxy.heal()
        nc.close()
        for t in (publisher, requester):
            if t is not None:
                t.join(BOUND)


# ---------------------------------------------------------------------- no server: the offsets


_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40)),
    st.tuples(st.just("prepend"), st.integers(1, 40)),
    st.tuples(st.just("withdraw"), st.integers(0, 1000)),
    st.tuples(st.just("take"), st.just(0)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_a_withdrawal_takes_out_exactly_its_frame(ops: list[tuple[str, int]]) -> None:
    """Frames appended (some followed at once by another thread's publish), frames
    withdrawn anywhere, bytes put in front (a reconnect's subscriptions) and takes,
    in any order: what the writes take is exactly what was buffered minus what was
    withdrawn, in order, and a frame already taken is never withdrawn."""
    writer = Connection(ConnectOptions.build("nats://mem:4222")).writer  # nothing started: no thread
    model: list[bytes] = []  # what is buffered, in order
    frames: list[tuple[bytes, int]] = []  # every appended frame and its end offset
    taken: list[bytes] = []
    expected: list[bytes] = []
    appended = 0
    for n, (op, arg) in enumerate(ops):
        with writer.lock:
            if op == "append":
                frame = b"PUB f%d %d\r\n%b\r\n" % (n, arg, bytes([65 + n % 26]) * arg)
                at = len(writer.buffer)
                writer.buffer += frame
                appended += len(frame)
                model.append(frame)
                if arg % 3 == 0:
                    # A plain publish appended (without the lock) before the end is read.
                    noise = b"PUB n%d 0\r\n\r\n" % n
                    writer.buffer += noise
                    appended += len(noise)
                    model.append(noise)
                frames.append((frame, writer.end_of_locked(frame, at)))
            elif op == "prepend":
                front = b"SUB p%d %d\r\n" % (n, arg)
                writer.prepend_locked(front)
                model.insert(0, front)
            elif op == "withdraw" and frames:
                frame, end = frames[arg % len(frames)]
                buffered = any(f is frame for f in model)
                assert writer.withdraw_locked(frame, end) is buffered
                if buffered:
                    model = [f for f in model if f is not frame]
                    frames = [(f, e) for f, e in frames if f is not frame]
            elif op == "take":
                taken.append(writer._take_locked())
                expected.append(b"".join(model))
                model = []
    assert taken == expected
    with writer.lock:
        rest = writer._take_locked()
        assert rest == b"".join(model)
        # Offsets count every appended byte, withdrawn or not, and nothing put in front.
        assert writer.mark_locked() == writer.taken == appended
