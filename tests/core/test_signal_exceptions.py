"""Exceptions that signal handlers raise into the main thread (Ctrl-C, a SIGALRM
timeout, a Celery soft time limit) land at any check point CPython has (after a
call returns, at a function's entry, after a backward jump): between taking the
send lock and the code that lets go of it too, between taking bytes for a write
and writing them, between recording a PING and buffering it. The client must stay
usable: no send lock left held by a thread that has moved on (every later write
would wait for it for ever), none released while another thread holds it, no
PING counted that never went out (every later flush would wait a PING too long).

Two tests: a program in a child process (a hang is a bounded failure) whose
SIGALRM handler raises into a loop of requests, flushes and publishes; and,
in this process, each operation with an exception raised at each of its check
points in turn (a trace function raising stands for the signal handler).
"""

from __future__ import annotations

import dis
import itertools
import json
import os
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync._core import connection as connection_module
from natsjs_sync._core import reader as reader_module
from natsjs_sync._core import requests as requests_module
from natsjs_sync._core import transport as transport_module
from natsjs_sync._core import writer as writer_module
from natsjs_sync.errors import NatsConnectionError, NatsError
from natsjs_sync.protocol import connection as ledger_module
from natsjs_sync.protocol._compiled import speedups
from natsjs_sync.testing import NatsServer

REPO = Path(__file__).resolve().parents[2]

#: The child: ``argv`` = url, rounds, timer interval (s). It prints one JSON line.
#: The handler raises only while an operation runs (``armed``): the loop's own
#: bookkeeping is never cut. Every 500 rounds the timer stops and a flush checks
#: the client; a flush that finds no answer ends the loop early (a client whose
#: send lock is stuck never answers again).
CHILD = r"""
import json, os, signal, sys, threading, time
import natsjs_sync as nats
from natsjs_sync.errors import NatsConnectionError, NatsError, TimeoutError

class Tick(Exception):
    pass

armed = False

def on_alarm(signum, frame):
    global armed
    if armed:
        armed = False
        raise Tick()

url, rounds, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
result = {"ok": False, "failed": "hung"}

def report(code):
    print(json.dumps(result), flush=True)
    os._exit(code)

watchdog = threading.Timer(60.0, report, (4,))  # a publish that waits for ever for the send lock
watchdog.daemon = True
watchdog.start()

def flush(timeout):
    for attempt in range(3):
        try:
            nc.flush(timeout=timeout)
            return
        except TimeoutError:
            raise
        except NatsConnectionError:
            # A connection lost meanwhile (a Tick that cut a read or a write short): the flushes
            # asked for before the new connection's first PONG say so, the next one vouches.
            if attempt == 2:
                raise

responder = nats.connect(url, name="responder")
responder.subscribe("echo", cb=lambda m: m.respond(m.data))
responder.flush()
nc = nats.connect(url, name="interrupted", reconnect_time_wait=0.01, reconnect_jitter=0)
signal.signal(signal.SIGALRM, on_alarm)
ticks = done = 0
stuck = None
while done < rounds and stuck is None:
    signal.setitimer(signal.ITIMER_REAL, interval, interval)
    for i in range(500):
        try:
            armed = True
            step = i % 4
            if step == 1:
                nc.flush(timeout=0.5)
            elif step == 2:
                nc.publish("sink", b"p")
            else:
                nc.request("echo", b"r", timeout=0.5)
            armed = False
        except Tick:
            ticks += 1
        except NatsError:
            armed = False
    done += 500
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    armed = False
    try:
        flush(2.0)
    except TimeoutError as exc:
        stuck = str(exc)
result.update(rounds=done, ticks=ticks, stuck=stuck)
try:
    nc.publish("sink", b"after")
    flush(10.0)
    reply = nc.request("echo", b"after", timeout=10)
    assert reply.data == b"after", reply.data
    result.update(ok=True, failed=None)
except BaseException as exc:
    result.update(failed=f"{type(exc).__name__}: {exc}")
report(0 if result["ok"] else 3)
"""


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False) as s:
        yield s


@pytest.fixture(params=[pytest.param(True, id="compiled"), pytest.param(False, id="pure")])
def send_lock_twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Runs a test with the compiled send lock, then with its Python twin (True: compiled)."""
    compiled: bool = request.param
    if compiled and speedups is None:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    if not compiled:
        monkeypatch.setattr(writer_module, "speedups", None)  # the Python twin of SendLock
    return compiled


@pytest.mark.parametrize("compiled", [pytest.param(True, id="compiled"), pytest.param(False, id="pure")])
def test_a_client_outlives_exceptions_raised_into_its_writes(server: NatsServer, compiled: bool) -> None:
    if compiled and speedups is None:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NATSJS_SYNC_PURE_PYTHON", None)
    if not compiled:
        env["NATSJS_SYNC_PURE_PYTHON"] = "1"
    # A Tick every 100 µs lands in nearly every operation. Before the send lock knew its holder
    # (and cut writes were handled) the client was dead after this in 18 of 18 runs compiled,
    # 6 of 6 pure; the deterministic test below shows each point that did it.
    proc = subprocess.run([sys.executable, "-c", CHILD, server.url, "3000", "0.0001"], capture_output=True,
                          text=True, timeout=90, env=env, cwd=REPO)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1])
    assert result["ok"] and proc.returncode == 0, (result, proc.stderr[-3000:])
    assert result["stuck"] is None, result
    assert result["ticks"] > 1500, result  # the handler did raise into the operations


# ---------------------------------------------------------------- every point, one at a time

class Injected(Exception):
    """What the tracer raises, as a signal handler would."""


#: The files whose code takes, holds and lets go of the send lock, and keeps the stream's records.
_TRACED = {str(Path(m.__file__).resolve()) for m in (writer_module, connection_module, transport_module,
                                                      ledger_module)}


#: The check points are found in CPython 3.11's bytecode (its exception table, CALL, JUMP_BACKWARD).
needs_311_bytecode = pytest.mark.skipif(sys.version_info < (3, 11),
                                        reason="check points are read from CPython 3.11+ bytecode")


def _qualname(code: types.CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)  # co_qualname: 3.11+


def _handler(entries: list[Any], offset: int) -> int | None:
    """Where an exception raised at ``offset`` goes (the exception table's target; None: out)."""
    return next((e.target for e in entries if e.start <= offset < e.end), None)


def _check_points(code: types.CodeType, cache: dict[types.CodeType, frozenset[int]]) -> frozenset[int]:
    """The offsets before which CPython 3.11 runs pending signal handlers (and raises what
    they raise): right after a call returns and after a backward jump. A function's entry
    (RESUME) is one too; the tracer's "call" event stands for it.

    CPython raises such an exception as the call's (or the jump's): its handler is the
    one that covers that instruction. The tracer raises it as the next instruction's, so
    a point is kept only where both have the same handler. Where they differ (a
    ``return f()`` inside ``with``: the lock's exit is called inline after the call,
    outside the block's range) the tracer would raise where CPython never does, past a
    handler CPython runs; the same handler is tried at the block's other points."""
    points = cache.get(code)
    if points is None:
        found = set()
        entries = dis.Bytecode(code).exception_entries
        instructions = list(dis.get_instructions(code))
        for ins, after in itertools.pairwise(instructions):
            if ins.opname in ("CALL", "CALL_FUNCTION_EX"):
                at = after.offset
            elif ins.opname == "JUMP_BACKWARD":
                at = ins.argval
            else:
                continue
            if _handler(entries, ins.offset) == _handler(entries, at):
                found.add(at)
        points = cache[code] = frozenset(found)
    return points


class Injector:
    """A trace function that raises :class:`Injected` at the ``target``-th check point met
    in the traced files by this thread (a tracer that raises is removed at once)."""

    def __init__(self, target: int, cache: dict[types.CodeType, frozenset[int]]):
        self.target = target
        self.seen = 0
        self.cache = cache
        self.fired: str | None = None

    def _hit(self, frame: types.FrameType, where: str) -> None:
        if self.seen == self.target:
            self.fired = f"{_qualname(frame.f_code)} {where}"
            raise Injected(self.fired)
        self.seen += 1

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event != "call" or frame.f_code.co_filename not in _TRACED:
            return None
        self._hit(frame, "on entry")
        frame.f_trace_opcodes = True
        return self._local

    def _local(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event == "opcode" and frame.f_lasti in _check_points(frame.f_code, self.cache):
            self._hit(frame, f"at {frame.f_lasti}")
        return self._local


def _still_usable(client: nats.Client, where: str) -> bool:
    """Fails the test unless ``client`` flushes and answers a request; True if a flush
    said the connection was lost meanwhile (a write cut short)."""
    lost = False
    try:
        for attempt in range(3):
            try:
                client.flush(timeout=5)
                break
            except NatsConnectionError:
                # A cut write's loss: the flushes asked for before the new connection's
                # first PONG say so (see PingLedger); the next one vouches again.
                if attempt == 2:
                    raise
                lost = True
        assert client.request("echo", b"ok", timeout=5).data == b"ok", where
    except NatsError as exc:
        pytest.fail(f"{where}: {exc!r}")
    return lost


@needs_311_bytecode
def test_an_exception_at_any_check_point_of_a_write_leaves_the_client_usable(server: NatsServer,
                                                                           send_lock_twin: bool) -> None:
    # Deterministic: each operation runs again and again with an exception raised at its
    # 1st, 2nd, ... check point, until it runs through. After each, the client flushes and
    # answers a request (a send lock left held would keep the PING and the request unsent).
    cache: dict[types.CodeType, frozenset[int]] = {}
    with nats.connect(server.url, name="responder") as responder, \
            nats.connect(server.url, name="interrupted", reconnect_time_wait=0.01, reconnect_jitter=0) as nc, \
            nats.connect(server.url, name="pressed", reconnect_time_wait=0.01, reconnect_jitter=0,
                         pending_size=1) as pressed:
        responder.subscribe("echo", cb=lambda m: m.respond(m.data))
        responder.flush(timeout=5)
        cut = 0
        tried: dict[str, int] = {}
        operations: list[tuple[str, nats.Client, Callable[[nats.Client], object]]] = [
            ("request", nc, lambda c: c.request("echo", b"r", timeout=5)),
            ("flush", nc, lambda c: c.flush(timeout=5)),
            ("publish", nc, lambda c: c.publish("sink", b"p")),
            ("publish_now", nc, lambda c: c.publish_now("sink", b"p")),
            ("publish past pending_size", pressed, lambda c: c.publish("sink", b"p")),
        ]
        for name, client, operation in operations:
            for target in range(2000):
                injector = Injector(target, cache)
                previous = sys.gettrace()
                sys.settrace(injector)
                try:
                    operation(client)
                except Injected:
                    pass
                except NatsError:
                    pass  # a connection lost to an earlier cut write (its requests fail)
                finally:
                    sys.settrace(previous)
                cut += _still_usable(client, f"{name}: raised {injector.fired}")
                if injector.fired is None:
                    break  # ran through: every check point of it was tried
            else:
                pytest.fail(f"{name}: more check points than tried")
            tried[name] = target
        assert all(n > 0 for n in tried.values()), tried
        assert cut > 0  # some points were in a write (the connection was lost and came back)


def _after_the_send(code: types.CodeType, send: str, result: str) -> int:
    """The offset of the check point right after ``code``'s ``result = ...send(...)``
    returns: the store of its result."""
    instructions = list(dis.get_instructions(code))
    for i, ins in enumerate(instructions):
        if ins.argval == send:
            return next(later.offset for later in instructions[i:]
                        if later.opname == "STORE_FAST" and later.argval == result)
    raise AssertionError(f"{_qualname(code)} calls no {send}")


class AfterTheSend:
    """A trace function raising :class:`Injected` as the non-blocking send returns: where the
    handler of a signal that came during the send system call (or while the thread waited for
    the GIL after it) runs. The sends: the transport's (a write of the buffer) and the
    compiled sender's (a waiting caller's frame past an idle writer)."""

    def __init__(self) -> None:
        sends = [(getattr(transport_module.TcpTransport, name).__code__, "_nowait", "sent")
                 for name in ("_send_all", "_send_until")]
        sends.append((writer_module.Writer.send_direct.__code__, "sender", "status"))
        self.points = {code: _after_the_send(code, send, result) for code, send, result in sends}
        self.fired = False

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event == "call" and frame.f_code in self.points:
            frame.f_trace_opcodes = True
            return self._local
        return None

    def _local(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event == "opcode" and not self.fired and frame.f_lasti == self.points[frame.f_code]:
            self.fired = True
            raise Injected("as the send returned")
        return self._local


@needs_311_bytecode
@pytest.mark.skipif(speedups is None, reason="the record is made by the compiled send")
@pytest.mark.parametrize("way", ["direct", "buffered"])
@pytest.mark.parametrize("operation", ["request", "publish_now"])
def test_an_exception_as_the_send_returns_costs_no_reconnect(server: NatsServer, operation: str, way: str) -> None:
    # The write was done: the transport records it in the call that hands the bytes over, and
    # the writer, cut short after it, keeps the connection. An idle writer's caller sends past
    # the buffer: "buffered" takes the transport's write (send_held and its record), as a
    # caller does whenever the writer is not idle.
    with nats.connect(server.url, name="responder") as responder, nats.connect(server.url) as nc:
        responder.subscribe("echo", cb=lambda m: m.respond(m.data))
        responder.flush(timeout=5)
        if way == "buffered":
            _through_the_buffer(nc)
        injector = AfterTheSend()
        previous = sys.gettrace()
        sys.settrace(injector)
        try:
            with pytest.raises(Injected):
                if operation == "request":
                    nc.request("echo", b"r", timeout=5)
                else:
                    nc.publish_now("sink", b"p")
        finally:
            sys.settrace(previous)
        assert injector.fired
        nc.flush(timeout=5)  # no "connection lost" to report
        assert nc.request("echo", b"ok", timeout=5).data == b"ok"
        assert nc.stats.reconnects == 0


class RaiseOnEntry:
    """A trace or profile function calling ``before`` as ``code`` is entered (once), then
    raising :class:`Injected` (a hook that raises is removed at once) unless ``raises`` is
    false: then it stands for a signal handler that uses the client at that point of the
    thread it interrupted. A trace function and a profile function are two hooks: one of
    each raises twice in one operation, as a second signal's handler would."""

    def __init__(self, code: types.CodeType, before: Callable[[], object] = lambda: None, raises: bool = True):
        self.code = code
        self.before = before
        self.raises = raises
        self.fired = False

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is self.code and not self.fired:
            self.fired = True
            self.before()
            if self.raises:
                raise Injected(_qualname(self.code))


def test_a_write_cut_short_leaves_what_others_buffered_meanwhile_to_the_next_connection(
        server: NatsServer) -> None:
    # Another thread's publish, buffered while this thread's write runs, was never taken for
    # that write: as after a failed write it goes out on the next connection, not with the cut
    # one (it was taken out of the buffer and dropped).
    with nats.connect(server.url, name="watcher") as watcher, \
            nats.connect(server.url, reconnect_time_wait=0.01, reconnect_jitter=0) as nc:
        arrived = threading.Event()
        watcher.subscribe("sink", cb=lambda m: arrived.set() if m.data == b"other" else None)
        watcher.flush(timeout=5)
        _through_the_buffer(nc)
        tracer = RaiseOnEntry(transport_module.TcpTransport.write.__code__,
                              before=lambda: nc.publish("sink", b"other"))
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            with pytest.raises(Injected):
                nc.publish_now("sink", b"mine")  # its bytes are taken, then the write is cut
        finally:
            sys.settrace(previous)
        assert tracer.fired
        assert arrived.wait(10), "the other publish was dropped with the cut write"


def test_an_exception_raised_into_the_abort_of_a_cut_write_leaves_the_client_usable(
        server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The write is cut short, and a second exception is raised as the connection's abort is
    # entered (it would wake the reader thread, which reports the loss): the next write cuts
    # it again. Before, the writer left the connection alone for good: with the reader thread
    # alone reading (no compiled reader, or TLS), blocked on a socket nothing more was sent
    # to, nothing was sent until the keep-alive found the connection stale, minutes later.
    monkeypatch.setattr(reader_module, "speedups", None)
    with nats.connect(server.url, name="responder") as responder, \
            nats.connect(server.url, reconnect_time_wait=0.01, reconnect_jitter=0) as nc:
        responder.subscribe("echo", cb=lambda m: m.respond(m.data))
        responder.flush(timeout=5)
        _through_the_buffer(nc)
        first = RaiseOnEntry(transport_module.TcpTransport.write.__code__)
        second = RaiseOnEntry(transport_module.TcpTransport.abort.__code__)
        previous, previous_profile = sys.gettrace(), sys.getprofile()
        sys.settrace(first)
        sys.setprofile(second)
        try:
            with pytest.raises(Injected):
                nc.publish_now("sink", b"p")
        finally:
            sys.settrace(previous)
            sys.setprofile(previous_profile)
        assert first.fired and second.fired
        _still_usable(nc, "after a cut write whose abort was cut short")


def _through_the_buffer(nc: nats.Client) -> None:
    """From here on ``nc``'s waiting callers write through the buffer and the send lock's
    rounds (:meth:`Writer.send_held`), as they do whenever the writer is not idle: the
    compiled sender, which skips them for an idle writer, is taken away (its own cases are
    the tests of ``send_direct`` below)."""
    nc._conn.writer._sender = None


def _publish_now_interrupted_by(nc: nats.Client, handler: Callable[[], object]) -> bool:
    """``nc.publish_now`` with ``handler`` run as its write enters the transport (a signal
    handler using the client mid-write); whether it ran. The publish may fail: the handler
    may close the client or lose its connection under it."""
    _through_the_buffer(nc)
    tracer = RaiseOnEntry(transport_module.TcpTransport.write.__code__, handler, raises=False)
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        nc.publish_now("sink", b"p")
    except NatsError:
        pass
    finally:
        sys.settrace(previous)
    return tracer.fired


def test_a_signal_handler_closing_the_client_mid_write_never_lets_go_of_that_writes_hold(
        server: NatsServer, send_lock_twin: bool) -> None:
    # The handler (a SIGTERM's that closes the client, say) runs on the thread that holds the
    # send lock for the write it interrupted. The close's last flush let go of the send lock
    # because this thread held it: the interrupted write went on without it (another thread's
    # write could run beside it), and its own release failed: a RuntimeError from publish_now.
    with nats.connect(server.url, reconnect_time_wait=0.01, reconnect_jitter=0) as nc:
        nc.flush(timeout=5)
        send_lock = nc._conn.writer.send_lock
        held: list[bool] = []

        def on_signal() -> None:
            nc.close()
            held.append(send_lock.mine())  # still the interrupted write's

        assert _publish_now_interrupted_by(nc, on_signal) and held == [True]
        assert not send_lock.locked()


def test_a_signal_handler_whose_publish_fails_mid_write_never_lets_go_of_that_writes_hold(send_lock_twin: bool) -> None:
    # The handler publishes while the client reconnects, past the reconnect buffer: its
    # publish_now fails (OutboundBufferLimitError), and its handler let go of the send lock
    # because this thread held it, for the write the signal interrupted.
    disconnected = threading.Event()
    with NatsServer(jetstream=False) as own, \
            nats.connect(own.url, pending_size=1024, reconnect_time_wait=30,
                         disconnected_cb=disconnected.set) as nc:
        nc.flush(timeout=5)
        send_lock = nc._conn.writer.send_lock
        held: list[bool] = []
        failed: list[NatsError] = []

        def on_signal() -> None:
            own.stop()
            assert disconnected.wait(10)
            try:
                nc.publish_now("sink", b"x" * 2048)
            except NatsError as exc:
                failed.append(exc)  # the handler's own
            held.append(send_lock.mine())  # still the interrupted write's

        assert _publish_now_interrupted_by(nc, on_signal) and failed and held == [True]
        assert not send_lock.locked()


class RequestInjector(Injector):
    """An :class:`Injector` over a request's own code: the connection's and the response mux's."""

    FILES = frozenset(str(Path(m.__file__).resolve()) for m in (connection_module, requests_module))

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> object:
        if event != "call" or frame.f_code.co_filename not in self.FILES:
            return None
        self._hit(frame, "on entry")
        frame.f_trace_opcodes = True
        return self._local


@needs_311_bytecode
@pytest.mark.parametrize("compiled", [pytest.param(True, id="compiled"), pytest.param(False, id="pure")])
def test_an_exception_at_any_check_point_of_a_request_leaves_no_waiter_behind(
        server: NatsServer, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A waiter entered in the mux and then not forgotten stays there for the connection's life
    # (a loss takes only the sent ones): with it, a lone requester never reads its reply itself
    # again (it finds another request waiting). One was left whenever the exception came as the
    # compiled call that made and entered the waiter returned (a check point before the try
    # that forgets it), or as the Python twin's encode of the reply subject returned: a SIGALRM
    # every 100 us left 1038 of them in 10 s of requests (0 before the compiled call).
    if compiled and speedups is None:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    if not compiled:
        monkeypatch.setattr(requests_module, "speedups", None)  # the client's mux takes the Python twin
    cache: dict[types.CodeType, frozenset[int]] = {}
    with nats.connect(server.url, name="responder") as responder, \
            nats.connect(server.url, reconnect_time_wait=0.01, reconnect_jitter=0) as nc:
        responder.subscribe("echo", cb=lambda m: m.respond(m.data))
        responder.flush(timeout=5)
        waiting = nc._conn.requests.waiting
        nc.request("echo", b"first", timeout=5)  # the inbox subscription is made: not a check point here
        for target in range(1000):
            injector = RequestInjector(target, cache)
            previous = sys.gettrace()
            sys.settrace(injector)
            try:
                nc.request("echo", b"r", timeout=5)
            except Injected:
                pass
            except NatsError:
                pass  # a connection lost to a read cut short
            finally:
                sys.settrace(previous)
            assert waiting == {}, f"raised {injector.fired}: {len(waiting)} waiter(s) left"
            if injector.fired is None:
                break  # ran through: every check point of it was tried
        else:
            pytest.fail("more check points than tried")
        assert target > 0
