"""A waiting caller's write past an idle writer (``Writer.send_direct``).

A request, or a responder's reply, made while nothing is buffered and nobody
is sending goes from the caller's thread to the socket in one compiled call,
the buffer skipped. It must come out as a buffered write would: counted, in
order with what the same thread published before, whole on the wire when the
socket takes only part of it, its failure reported, and a signal handler that
runs while the caller still holds the send lock (the frame's rest, or others'
bytes, still to send) leaves the client usable.

Real servers; the fault proxy stops reading to fill the socket.
"""

from __future__ import annotations

import dis
import sys
import threading
import types
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync._core import writer as writer_module
from natsjs_sync.errors import NatsError
from natsjs_sync.protocol._compiled import speedups
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until

pytestmark = pytest.mark.skipif(speedups is None, reason="the direct write is the compiled extension's")

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.0, "ping_interval": 0}
BIG = 4 * 1024 * 1024  # more than the kernel buffers on the way take at once with the proxy's window closed
HUGE = 48 * 1024 * 1024  # more than they take with the window open (which stays open for the rest to pass)


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, max_payload=64 * 1024 * 1024) as s:
        yield s


class Statuses:
    """Wraps a client's compiled sender and records what each call returned."""

    def __init__(self, nc: nats.Client):
        writer = nc._conn.writer
        self.sender = writer._sender
        assert self.sender is not None
        self.seen: list[int] = []
        self.held = threading.Event()  # a call returned with the send lock still held (2 or 3)
        writer._sender = self

    def __call__(self, frame: bytes, size: int, waiter: object) -> int:
        assert self.sender is not None
        status = self.sender(frame, size, waiter)
        self.seen.append(status)
        if status >= 2:
            self.held.set()
        return status

    def until_direct(self, nc: nats.Client) -> None:
        """Publish now until one goes the direct way: the client's own threads are done with
        what they were doing (a loaded machine may keep the reader thread in the connection's
        lock a while after a flush returned), and its next waiting write finds the writer idle."""
        for _ in range(200):
            nc.publish_now("idle.probe", b"")
            if self.seen[-1] == 1:
                return
        raise AssertionError(f"the writer was never idle: {self.seen[-20:]}")


def test_a_lone_request_and_its_reply_are_counted_and_in_order_with_earlier_publishes(server: NatsServer) -> None:
    with nats.connect(server.url) as nc, nats.connect(server.url, name="watcher") as watcher:
        seen: list[tuple[str, bytes]] = []
        got = threading.Event()
        watcher.subscribe("d.>", cb=lambda m: (seen.append((m.subject, m.data)), len(seen) == 6 and got.set()))
        watcher.flush(timeout=5)
        nc.subscribe("e.svc", cb=lambda m: m.respond(m.data))
        nc.subscribe("d.svc", cb=lambda m: m.respond(m.data.upper()))
        nc.request("d.svc", b"warm", timeout=5)
        nc.flush(timeout=5)
        statuses = Statuses(nc)
        # Until a request finds the writer idle (on a loaded machine the flusher may still be
        # in its round, holding the send lock, for the first few): the direct way is taken.
        for _ in range(200):
            nc.request("e.svc", b"", timeout=5)
            if 1 in statuses.seen:
                break
        assert 1 in statuses.seen
        before = nc.stats.out_msgs, nc.stats.out_bytes
        assert nc.request("d.svc", b"one", timeout=5).data == b"ONE"  # idle, mostly: both ways direct
        nc.publish("d.p", b"1")  # buffered, for the flusher
        nc.publish("d.p", b"22")
        assert nc.request("d.svc", b"two", timeout=5).data == b"TWO"  # after them on the wire, whichever way
        nc.publish_now("d.p", b"333")
        assert got.wait(10), seen
        assert seen == [("d.svc", b"warm"), ("d.svc", b"one"), ("d.p", b"1"), ("d.p", b"22"), ("d.svc", b"two"),
                        ("d.p", b"333")]
        # The replies go to the requester's inbox, not to d.>: 2 requests, 2 replies, 3 publishes.
        assert nc.stats.out_msgs - before[0] == 7
        assert nc.stats.out_bytes - before[1] == len(b"one" + b"ONE" + b"1" + b"22" + b"two" + b"TWO" + b"333")


def test_a_request_from_one_thread_keeps_its_place_behind_that_threads_publishes(server: NatsServer) -> None:
    # The same thread publishes (buffered), then requests: the request never overtakes them.
    with nats.connect(server.url) as nc, nats.connect(server.url, name="svc") as svc:
        order: list[bytes] = []

        def serve(m: nats.Msg) -> None:  # one subscription: its callbacks run in wire order
            order.append(m.data)
            if m.reply:
                m.respond(b"ok")

        svc.subscribe("o.*", cb=serve)
        svc.flush(timeout=5)
        statuses = Statuses(nc)
        for i in range(200):
            nc.publish("o.p", b"p%d" % i)
            assert nc.request("o.req", b"r%d" % i, timeout=5).data == b"ok"
        wait_until(lambda: len(order) == 400, timeout=10)
        assert order == [x for i in range(200) for x in (b"p%d" % i, b"r%d" % i)]
        assert statuses.seen  # the sender was asked (and declined while the publish was buffered)


def _stalled(proxy: FaultProxy, close_window: bool = False) -> nats.Client:
    """A client whose bytes the proxy no longer reads. With ``close_window`` its socket is full
    at once and for good (the connection stays slow after a heal); without, the kernel takes
    some MB more, and after a heal the connection is as fast as before."""
    nc = nats.connect(proxy.url, name="stalled", write_timeout=30.0, **FAST)  # type: ignore[arg-type]
    nc.flush(timeout=5)
    Statuses(nc).until_direct(nc)
    proxy.stop_reading(close_window=close_window)
    return nc


def _flush_after_loss(nc: nats.Client) -> None:
    """Flush; the flushes asked before a new connection's first PONG report the loss."""
    for attempt in range(3):
        try:
            nc.flush(timeout=15)
            return
        except nats.errors.NatsConnectionError:
            if attempt == 2:
                raise


def test_a_reply_the_socket_takes_in_part_goes_out_whole_once_it_reads_again(server: NatsServer) -> None:
    payloads = [b"A" * HUGE, b"B" * 1000, b"C" * 10]
    with FaultProxy(server.url) as proxy, nats.connect(server.url, name="receiver") as receiver:
        got: list[bytes] = []
        done = threading.Event()
        receiver.subscribe("big", cb=lambda m: (got.append(m.data), len(got) == 3 and done.set()))
        receiver.flush(timeout=5)
        nc = _stalled(proxy)
        try:
            statuses = nc._conn.writer._sender
            assert isinstance(statuses, Statuses)
            errors: list[BaseException] = []

            def send() -> None:
                try:
                    for p in payloads:
                        nc.publish_now("big", p)  # the first fills the socket and waits for it
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            t = threading.Thread(target=send, daemon=True)
            t.start()
            assert statuses.held.wait(10), statuses.seen  # the socket took part of a frame: 3
            assert 3 in statuses.seen
            proxy.heal()
            t.join(60)
            assert not t.is_alive() and not errors, errors
            assert done.wait(60)
            assert got == payloads  # whole, in order, nothing twice
            nc.flush(timeout=10)
        finally:
            nc.close()


def test_a_request_whose_frame_the_socket_took_in_part_times_out_as_sent(server: NatsServer) -> None:
    with FaultProxy(server.url) as proxy:
        nc = nats.connect(proxy.url, name="stalled", **FAST)  # type: ignore[arg-type]
        try:
            with pytest.raises(nats.errors.NoRespondersError):
                nc.request("nobody", b"", timeout=5)  # the reply inbox is subscribed: the writer is idle now
            nc.flush(timeout=5)
            statuses = Statuses(nc)
            statuses.until_direct(nc)
            proxy.stop_reading(close_window=True)
            with pytest.raises(nats.errors.TimeoutError) as info:
                nc.request("nobody", b"x" * BIG, timeout=0.5)
            assert not isinstance(info.value, nats.errors.NotSentError)  # bytes of it were on the wire
            assert 3 in statuses.seen
            proxy.heal()
            proxy.cut()  # a fresh connection: the shrunk window stays with the old one
            _flush_after_loss(nc)
            assert nc.stats.reconnects >= 1
        finally:
            nc.close()


def test_a_direct_write_that_fails_reports_it_to_the_caller(server: NatsServer) -> None:
    with FaultProxy(server.url) as proxy:
        nc = nats.connect(proxy.url, name="cut", max_reconnect_attempts=0, **FAST)  # type: ignore[arg-type]
        try:
            nc.flush(timeout=5)
            statuses = Statuses(nc)
            statuses.until_direct(nc)
            proxy.stop_reading()
            failed: list[BaseException] = []

            def send() -> None:
                try:
                    nc.publish_now("big", b"y" * HUGE)
                except NatsError as exc:
                    failed.append(exc)

            t = threading.Thread(target=send, daemon=True)
            t.start()
            assert statuses.held.wait(10), statuses.seen
            proxy.cut(reset=True)  # the rest of the frame cannot be written: lost with the connection
            t.join(30)
            assert not t.is_alive()
            assert failed, "the lost frame was not reported"
        finally:
            nc.close()


# ---------------------------------------------------------------- a signal handler while it holds the lock

class InSendDirect:
    """A trace function that follows :meth:`Writer.send_direct` opcode by opcode; ``_local``
    says what it does there."""

    code = writer_module.Writer.send_direct.__code__

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event == "call" and frame.f_code is self.code:
            frame.f_trace_opcodes = True
            return self._local
        return None

    def _local(self, frame: types.FrameType, event: str, arg: object) -> object:
        raise NotImplementedError


class AfterHeldReturn(InSendDirect):
    """Runs ``handler`` (a signal handler on this thread) right after the compiled sender
    returned with the send lock still held, before the caller goes on: where such a
    handler's code runs. Raises :class:`Injected` after it when ``raises``."""

    def __init__(self, handler: Callable[[], object], raises: bool):
        super().__init__()
        self.handler = handler
        self.raises = raises

    def _local(self, frame: types.FrameType, event: str, arg: object) -> object:
        if (event == "opcode" and not self.fired and isinstance(frame.f_locals.get("status"), int)
                and frame.f_locals["status"] >= 2):
            self.fired = True
            self.handler()
            if self.raises:
                raise Injected("after the sender returned, the send lock held")
        return self._local


class Injected(Exception):
    """What the tracer raises, as a signal handler would."""


def _publish_now_traced(nc: nats.Client, tracer: AfterHeldReturn) -> BaseException | None:
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        nc.publish_now("big", b"z" * HUGE)
    except (Injected, NatsError) as exc:
        return exc
    finally:
        sys.settrace(previous)
    return None


def test_an_exception_raised_while_the_sender_holds_the_lock_leaves_the_rest_to_the_flusher(
        server: NatsServer) -> None:
    with FaultProxy(server.url) as proxy, nats.connect(server.url, name="receiver") as receiver:
        got: list[int] = []
        receiver.subscribe("big", cb=lambda m: got.append(len(m.data)))
        receiver.subscribe("after", cb=lambda m: got.append(-1))
        receiver.flush(timeout=5)
        nc = _stalled(proxy)
        try:
            send_lock = nc._conn.writer.send_lock
            tracer = AfterHeldReturn(lambda: None, raises=True)
            healer = threading.Timer(0.5, proxy.heal)
            healer.start()
            assert isinstance(_publish_now_traced(nc, tracer), Injected) and tracer.fired
            assert not send_lock.mine()
            healer.join()
            nc.publish("after", b"")
            nc.flush(timeout=30)  # the frame's rest went out with the flusher, whole: the stream is intact
            wait_until(lambda: got == [HUGE, -1], timeout=30)
            assert nc.stats.reconnects == 0
        finally:
            nc.close()


def test_a_handler_closing_the_client_while_the_sender_holds_the_lock_never_lets_go_of_it(
        server: NatsServer) -> None:
    with FaultProxy(server.url) as proxy:
        nc = _stalled(proxy)
        send_lock = nc._conn.writer.send_lock
        held: list[bool] = []

        def on_signal() -> None:
            nc.close()  # its last flush must not take, or let go of, this thread's hold
            held.append(send_lock.mine())

        tracer = AfterHeldReturn(on_signal, raises=False)
        outcome = _publish_now_traced(nc, tracer)
        assert tracer.fired and held == [True], (outcome, held)
        assert outcome is None or isinstance(outcome, NatsError)
        assert not send_lock.locked()


class AfterLettingGo(InSendDirect):
    """Raises :class:`Injected` right after :meth:`Writer.send_direct` lets go of the send
    lock on a thread that may not wait for the socket (the frame's rest is left to the
    flusher): where a signal handler's exception, or one raised into the thread by
    ``PyThreadState_SetAsyncExc``, can land."""

    def __init__(self) -> None:
        super().__init__()
        instructions = list(dis.get_instructions(self.code))
        first = next(i for i, ins in enumerate(instructions) if ins.argval == "release")
        call = next(i for i in range(first, len(instructions)) if instructions[i].opname.startswith("CALL"))
        self.point = instructions[call + 1].offset

    def _local(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event == "opcode" and not self.fired and frame.f_lasti == self.point:
            self.fired = True
            raise Injected("as the send lock was let go")
        return self._local


def test_an_exception_as_a_thread_that_may_not_wait_lets_go_still_leaves_the_rest_to_the_flusher(
        server: NatsServer) -> None:
    # The timer thread never waits for the socket: the rest of a frame the socket took in part
    # is the flusher's. An exception raised as that thread lets go of the send lock must not
    # leave the rest with nobody asked to send it (nothing else may write for minutes).
    with FaultProxy(server.url) as proxy, nats.connect(server.url, name="receiver") as receiver:
        got = threading.Event()
        receiver.subscribe("big", cb=lambda m: got.set())
        receiver.flush(timeout=5)
        nc = _stalled(proxy)
        try:
            outcome: list[str] = []
            done = threading.Event()
            tracer = AfterLettingGo()

            def on_timer() -> None:
                sys.settrace(tracer)
                try:
                    nc.publish_now("big", b"w" * HUGE)
                    outcome.append("returned")
                except Injected:
                    outcome.append("raised")
                finally:
                    sys.settrace(None)
                    done.set()

            nc._conn.call_later(0, on_timer)
            assert done.wait(30) and tracer.fired and outcome == ["raised"], outcome
            writer = nc._conn.writer
            with nc._conn.lock:
                # The rest cannot go out while the proxy does not read: the flusher is asked
                # to send it, or is at it already (holding the send lock until it went).
                assert writer.outlet.flush_requested or writer.send_lock.locked()
            proxy.heal()
            assert got.wait(30)
        finally:
            nc.close()


# ---------------------------------------------------------------- a transport with a write of its own

def test_a_transport_with_a_write_of_its_own_sees_every_request_and_reply(server: NatsServer) -> None:
    # A transport subclass that overrides write (a byte meter, a shaper, a tunnel) must see
    # every byte: the direct write would send past it on the socket it inherited.
    from natsjs_sync._core.opener import open_transport
    from natsjs_sync._core.options import ConnectOptions
    from natsjs_sync._core.spi import link
    from natsjs_sync._core.transport import TcpTransport

    seen: list[bytes] = []

    class Metered(TcpTransport):
        __slots__ = ()

        def write(self, data: bytes | bytearray | memoryview, deadline: object = None) -> bool:
            seen.append(bytes(data))
            return super().write(data, deadline)  # type: ignore[arg-type]

    def factory(*args: object, **kwargs: object) -> TcpTransport:
        plain = open_transport(*args, **kwargs)  # type: ignore[arg-type]
        return Metered(plain._sock, plain.addr)

    client = nats.Client(ConnectOptions.build(server.url))
    link(client).transport_factory = factory  # type: ignore[attr-defined]
    client._start()
    with client as nc:
        nc.subscribe("m.svc", cb=lambda m: m.respond(b"re:" + m.data))
        nc.request("m.svc", b"warm", timeout=5)
        nc.flush(timeout=5)
        seen.clear()
        for i in range(20):
            assert nc.request("m.svc", b"q%d" % i, timeout=5).data == b"re:q%d" % i
        wire = b"".join(seen)
        for i in range(20):
            assert b"\r\nq%d\r\n" % i in wire  # the request
            assert b"\r\nre:q%d\r\n" % i in wire  # the reply


class _Delegating:
    """A transport wrapped by delegation (a meter, as a test's counting transport is): its own
    write, everything else the wrapped transport's (``__getattr__``)."""

    def __init__(self, transport: object) -> None:
        self._transport = transport
        self.seen: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview, deadline: object = None) -> bool:
        self.seen.append(bytes(data))
        return bool(self._transport.write(data, deadline))  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


def test_a_transport_wrapped_by_delegation_sees_every_request_and_reply(server: NatsServer) -> None:
    # The wrapper's __getattr__ hands out the wrapped socket as ``direct``: a write past the
    # wrapper's write skips what it does with the bytes, and the rest of a frame the socket
    # took in part would be kept as the wrapper's backlog, which the wrapped write never sends.
    from natsjs_sync._core.spi import link

    with nats.connect(server.url) as nc:
        nc.subscribe("w.svc", cb=lambda m: m.respond(b"re:" + m.data))
        nc.request("w.svc", b"warm", timeout=5)
        nc.flush(timeout=5)
        core = link(nc)
        wrapper = _Delegating(core.transport)
        core.transport = wrapper  # type: ignore[attr-defined]
        for i in range(20):
            assert nc.request("w.svc", b"q%d" % i, timeout=5).data == b"re:q%d" % i
        nc.flush(timeout=5)
        wire = b"".join(wrapper.seen)
        for i in range(20):
            assert b"\r\nq%d\r\n" % i in wire  # the request
            assert b"\r\nre:q%d\r\n" % i in wire  # the reply


def test_a_write_patched_on_the_transport_class_sees_every_request(
        server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # A spy put on TcpTransport.write itself (a test's, an instrumentation's) is the class's
    # write as the transport is made: it is not the write the direct path stands in for.
    from natsjs_sync._core.transport import TcpTransport

    seen: list[bytes] = []
    original = TcpTransport.write

    def spy(self: TcpTransport, data: bytes | bytearray | memoryview, deadline: object = None) -> bool:
        seen.append(bytes(data))
        return original(self, data, deadline)  # type: ignore[arg-type]

    monkeypatch.setattr(TcpTransport, "write", spy)
    with nats.connect(server.url) as nc:
        nc.subscribe("s.svc", cb=lambda m: m.respond(b"ok"))
        nc.request("s.svc", b"warm", timeout=5)
        nc.flush(timeout=5)
        seen.clear()
        for i in range(20):
            assert nc.request("s.svc", b"q%d" % i, timeout=5).data == b"ok"
        wire = b"".join(seen)
        for i in range(20):
            assert b"\r\nq%d\r\n" % i in wire
