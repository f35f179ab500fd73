"""Helpers for the recovery tests (issue 20) and the fault battery.

Everything here observes the client from outside: connection callbacks, the
server's monitoring endpoint, the fault proxy, and the client's own threads by
their documented names (``natsjs-<role>-<client name>``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from .conftest import wait_until

if TYPE_CHECKING:
    from natsjs_sync.jetstream import JetStream

T = TypeVar("T")

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.0, "max_reconnect_attempts": -1}


class Events:
    """Connection callbacks turned into events and lists a test can wait on."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()
        self.errors: list[Exception] = []
        self.reconnected_at: list[float] = []

    def _on_reconnected(self) -> None:
        self.reconnected_at.append(time.monotonic())
        self.reconnected.set()

    def kwargs(self) -> dict[str, Any]:
        return {"disconnected_cb": self.disconnected.set, "reconnected_cb": self._on_reconnected,
                "closed_cb": self.closed.set, "error_cb": self.errors.append}


def monitor(server: NatsServer, path: str) -> dict[str, Any]:
    """A monitoring endpoint of ``server`` (``connz?cid=3&subs=1``, ``varz`` ...)."""
    url = f"http://127.0.0.1:{server.monitor_port}/{path}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def connz(server: NatsServer, nc: nats.Client) -> dict[str, Any]:
    """The server's view of ``nc``'s connection: ``in_msgs``, ``subscriptions`` ..."""
    conns = monitor(server, f"connz?cid={nc.client_id}&subs=1")["connections"]
    assert len(conns) == 1, conns
    return conns[0]  # type: ignore[no-any-return]


class ResumeWindow:
    """Stops a client's threads in the window where a reconnect is finishing,
    so that a test can act inside it: certainly, not by luck.

    The window opens when the fault proxy reads the server's PONG that ends the
    handshake of a new connection, and closes when ``nc.is_connected`` says so.
    At every Python function call a thread of the client makes inside the
    window (threads named ``natsjs-*-<client name>``), the thread stops and
    offers the test a turn (:meth:`run`); it goes on when the test is done,
    or after 0.2 s when the test's action waits for something that stopped
    thread holds (and from then on takes its steps without waiting, until that
    action is done: it cannot be done before). No private name of the client
    is used: whatever the core's structure, each step between "handshake done"
    and "connected" is a turn.

    Install it before ``connect()`` (``threading.setprofile`` reaches threads
    started later); :meth:`close` removes it.
    """

    def __init__(self, proxy: FaultProxy, client_name: str):
        self._proxy = proxy
        self._suffix = "-" + client_name
        self.nc: nats.Client | None = None
        self._pongs_before: int | None = None
        self._ready = threading.Event()  # the test waits for a turn
        self._paused = threading.Event()  # a client thread stopped
        self._go_on = threading.Event()
        self._idle = threading.Event()  # the test is not in the middle of an action
        self._idle.set()
        self._turn = -1  # the test's action under way (or last done)
        self._gave_up: dict[int, int] = {}  # client thread -> the action it stopped waiting for
        self.stops = 0
        self._active = True
        threading.setprofile(self._hook)

    def close(self) -> None:
        self._active = False
        threading.setprofile(None)  # type: ignore[arg-type]
        self._go_on.set()

    def arm(self, nc: nats.Client) -> None:
        """Open the window at the next handshake PONG (call before cutting the connection)."""
        self.nc = nc
        self._pongs_before = self._proxy.server_frames("PONG")

    def _in_window(self) -> bool:
        nc, before = self.nc, self._pongs_before
        if not self._active or nc is None or before is None:
            return False
        return self._proxy.server_frames("PONG") > before and not nc.is_connected

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = threading.current_thread().name
        if not (name.startswith("natsjs-") and name.endswith(self._suffix)):
            sys.setprofile(None)  # not one of the client's threads: never look again
            return
        if not self._in_window():
            return
        # The test's last action may wait for something this thread held a
        # moment ago: give it a moment to finish, here, inside the window.
        # If it waits for something this thread still holds, go on without it,
        # and without that moment at each later step: the action can only end
        # once this thread has let go.
        me, turn = threading.get_ident(), self._turn
        if self._gave_up.get(me) == turn and not self._idle.is_set():
            return
        if not self._idle.wait(0.1):
            self._gave_up[me] = turn
            return
        if not self._ready.wait(0.2):
            return
        self._ready.clear()
        self.stops += 1
        self._go_on.clear()
        self._paused.set()
        self._go_on.wait(0.2)

    def run(self, act: Callable[[int], None], until: Callable[[], bool], timeout: float = 20.0,
            limit: int = 200) -> int:
        """Call ``act(turn)`` at each stop in the window, until ``until()`` holds.

        Returns:
            How many turns were taken.
        """
        deadline = time.monotonic() + timeout
        taken = 0
        self._ready.set()
        while not until() and taken < limit and time.monotonic() < deadline:
            if not self._paused.wait(0.05):
                continue
            self._paused.clear()
            self._turn = taken
            self._idle.clear()
            try:
                act(taken)
            finally:
                self._idle.set()
                taken += 1
                self._ready.set()  # before the thread goes on: its next step is a turn too
                self._go_on.set()
        self._ready.clear()
        return taken


class CallTimer:
    """Times calls and remembers the slowest, to check that none outlived its deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.worst: list[tuple[float, float, str]] = []  # (overrun, elapsed, what)

    def call(self, what: str, timeout: float, fn: Callable[[], Any]) -> Any:
        start = time.monotonic()
        try:
            return fn()
        finally:
            elapsed = time.monotonic() - start
            with self.lock:
                self.worst.append((elapsed - timeout, elapsed, what))

    def overruns(self, margin: float) -> list[tuple[float, float, str]]:
        """Calls that took longer than their timeout plus ``margin`` seconds."""
        with self.lock:
            return sorted((w for w in self.worst if w[0] > margin), reverse=True)


def path_buffer_bound() -> int:
    """More bytes than the kernel can hold between a client and a fault proxy that
    stopped reading with ``close_window=True``: the client's send buffer at its
    largest, plus the proxy's receive buffer before it was shrunk (it had read
    little, so the kernel had not grown it), plus a margin."""
    try:
        wmem_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
        rmem_default = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        wmem_max, rmem_default = 4 << 20, 128 << 10  # Linux defaults
    return wmem_max + 2 * rmem_default + (1 << 20)


class StalledWrite:
    """One message bigger than :func:`path_buffer_bound`, published from a thread
    of its own through a proxy that stopped reading: the write that carries it
    can never finish, so the client's send path stays blocked until the proxy
    cuts the connection. The server must accept messages that big
    (``NatsServer(max_payload=...)``).
    """

    def __init__(self, nc: nats.Client, subject: str):
        self.size = path_buffer_bound()
        self._nc = nc
        self._subject = subject
        self._since: float | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="test-stalled-write", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self._since = time.monotonic()
        try:
            self._nc.publish(self._subject, b"x" * self.size)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def stuck(self) -> bool:
        """The publish has been running for a second: its message is in the client's
        buffer or in the write that cannot finish (appending it takes a millisecond)."""
        if self.done.is_set() or self._since is None:
            return False
        return time.monotonic() - self._since > 1.0


class Reader(Generic[T]):
    """Reads ``next_item()`` on a thread of its own until stopped, recording each
    item with the time it arrived and each exception the call raised."""

    def __init__(self, next_item: Callable[[], T], name: str = "test-reader",
                 on_item: Callable[[T], None] | None = None, stop_on: tuple[type[BaseException], ...] = ()):
        self._next_item = next_item
        self._on_item = on_item
        self._stop_on = stop_on
        self.items: list[tuple[float, T]] = []
        self.errors: list[tuple[float, BaseException]] = []
        self.cond = threading.Condition()
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for _ in range(1_000_000):
            if self._stopped.is_set():
                return
            try:
                item = self._next_item()
            except self._stop_on:
                return
            except BaseException as exc:
                with self.cond:
                    self.errors.append((time.monotonic(), exc))
                    self.cond.notify_all()
                if isinstance(exc, (nats.BadSubscriptionError, nats.ConnectionClosedError)) or self._stopped.is_set():
                    return
                continue
            if self._on_item is not None:
                self._on_item(item)
            with self.cond:
                self.items.append((time.monotonic(), item))
                self.cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` (called under the lock) holds."""
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def first_time(self, match: Callable[[T], bool]) -> float | None:
        with self.cond:
            return next((t for t, item in self.items if match(item)), None)

    def values(self) -> list[T]:
        with self.cond:
            return [item for _, item in self.items]

    def stop(self, end: Callable[[], None] | None = None, timeout: float = 10.0) -> None:
        """Stop reading; ``end()`` (e.g. the iterator's stop) wakes a waiting read."""
        self._stopped.set()
        if end is not None:
            end()
        self.thread.join(timeout)


def restart(server: NatsServer) -> float:
    """SIGKILL ``server`` and start it again on the same port and store; returns
    the monotonic time it was back and healthy."""
    server.kill()
    server.start()
    return time.monotonic()


def publish_until_stored(js: JetStream, subject: str, data: bytes, timeout: float = 20.0) -> int:
    """Publish (retrying while JetStream comes back after a restart); the stream sequence."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return js.publish(subject, data, msg_id=data.decode(errors="replace"), timeout=2.0).seq
        except nats.NatsError:
            if time.monotonic() > deadline:
                raise
            threading.Event().wait(0.05)  # a short pause between retries, not a wait for an event


def run_in_child(fn: Callable[[], dict[str, Any]], timeout: float) -> dict[str, Any]:
    """Fork, run ``fn()`` in the child and return what it reported as JSON; a
    child that is not done within ``timeout`` seconds is killed and reported."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            result = fn()
        except BaseException as exc:
            result = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"error": f"the child did not finish within {timeout} s (deadlocked?)"}
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"error": "the child reported nothing"}')  # type: ignore[no-any-return]


class Neighbour:
    """Another thread of the same client, doing request/reply round trips on
    ``bi.echo`` until stopped: it must not notice what the test does."""

    def __init__(self, nc: nats.Client):
        self._nc = nc
        self.count = 0
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-neighbour", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.count < 1_000_000:
            try:
                self._nc.request("bi.echo", b"ping", timeout=5)
                self.count += 1
            except nats.NatsError as exc:
                self.errors.append(exc)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclasses.dataclass
class Guarded:
    """A client shared by a :class:`Neighbour` and a test making a bad call."""

    nc: nats.Client
    ev: Events
    neighbour: Neighbour
    witness: nats.Client

    def check_untouched(self) -> None:
        """The neighbour kept going and the connection never dropped."""
        self.nc.flush(timeout=5)
        seen = self.neighbour.count
        assert wait_until(lambda: self.neighbour.count >= seen + 3 or bool(self.neighbour.errors), timeout=10)
        self.neighbour.stop()
        assert not self.neighbour.errors, f"the neighbour thread lost its connection: {self.neighbour.errors}"
        assert not self.ev.disconnected.is_set() and self.nc.stats.reconnects == 0, self.ev.errors


@contextlib.contextmanager
def guard(url: str) -> Iterator[Guarded]:
    """A :class:`Guarded` client on ``url``, its neighbour already going."""
    ev = Events()
    with nats.connect(url, name="witness") as witness:
        witness.subscribe("bi.echo", cb=lambda m: m.respond(m.data))
        witness.flush()
        nc = nats.connect(url, name="bad-input", **ev.kwargs())
        neighbour = Neighbour(nc)
        try:
            assert wait_until(lambda: neighbour.count >= 3, timeout=10)
            yield Guarded(nc, ev, neighbour, witness)
        finally:
            neighbour.stop()
            nc.close()
