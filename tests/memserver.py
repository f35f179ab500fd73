"""A NATS server in memory, for tests of the core's I/O half without sockets.

It plugs into a client as its transport factory (``link(client).transport_factory``)
and speaks just enough protocol: INFO, CONNECT, PING/PONG, SUB/UNSUB, PUB/HPUB
(delivered back as MSG/HMSG to matching subscriptions of the same connection).
A test can refuse new connections, cut the current one, stop answering PINGs,
or stop reading (writes then stall until the client's write timeout).
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

from natsjs_sync._core.pool import ServerAddress
from natsjs_sync._timeout import Deadline
from natsjs_sync.errors import NatsConnectionError, TimeoutError
from natsjs_sync.protocol.subjects import subject_matches


class MemoryTransport:
    """One client connection to a :class:`MemoryServer`."""

    is_tls = False

    def __init__(self, server: MemoryServer, addr: ServerAddress):
        self.server = server
        self.addr = addr
        self._inbound: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.received = bytearray()  # everything the client wrote
        self._pending = bytearray()  # not yet parsed
        self.subs: dict[int, tuple[str, str | None, int | None]] = {}
        self.closed = False
        self._aborted = threading.Event()
        self.stalled = threading.Event()  # set: writes block until the write timeout
        self._write_timeout: float | None = None
        self._lock = threading.Lock()
        self.connected = False
        info = {"server_id": "MEM", "version": "2.99.0", "max_payload": 8 << 20, "headers": True,
                "proto": 1, **server.info}
        self.send(b"INFO " + json.dumps(info).encode() + b"\r\n")

    # -- the client side ---------------------------------------------------------

    def read_with_deadline(self, deadline: Deadline, what: str) -> bytes:
        try:
            data = self._inbound.get(timeout=deadline.remaining())
        except queue.Empty:
            raise TimeoutError(f"timed out waiting for {what}") from None
        if not data:
            raise NatsConnectionError("closed")
        return data

    def write_with_deadline(self, data: bytes, deadline: Deadline) -> None:
        self.write(data)

    def set_write_timeout(self, seconds: float | None) -> None:
        self._write_timeout = seconds

    def upgrade_tls(self, *args: Any) -> None:
        raise NatsConnectionError("no TLS in memory")

    def read(self) -> bytes:
        return self._inbound.get()

    def write(self, data: bytes | bytearray | memoryview, deadline: Deadline | None = None) -> bool:
        if self.closed:
            raise NatsConnectionError("connection lost")
        if self.stalled.is_set():
            # A peer that does not read: the write gives up at the write timeout,
            # or when the connection is cut under it (as shutdown() wakes sendall).
            # A nearer deadline of the caller's ends it first: kept for later (not
            # kept here: a stalled memory peer never reads it anyway).
            stall = self._write_timeout if self._write_timeout is not None else 60
            own = None if deadline is None else deadline.remaining()
            if self._aborted.wait(stall if own is None else min(own, stall)):
                raise NatsConnectionError("connection aborted during a write")
            if own is not None and own < stall:
                return False
            raise TimeoutError("write stalled")
        with self._lock:
            self.received += bytes(data)
            self._pending += bytes(data)
            self._process()
        return True

    def abort(self) -> None:
        self.closed = True
        self._aborted.set()
        self._inbound.put(b"")

    close = abort

    def detach_for_fork(self) -> None:
        self.closed = True

    # -- the server side ---------------------------------------------------------

    def send(self, data: bytes) -> None:
        if not self.closed:
            self._inbound.put(data)

    def cut(self) -> None:
        """The server closes the connection."""
        self.closed = True
        self._inbound.put(b"")

    def lines(self) -> list[str]:
        """Every protocol line the client sent (payloads left out)."""
        out = []
        for line in bytes(self.received).split(b"\r\n"):
            if line[:4] in (b"CONN", b"PING", b"PONG", b"SUB ", b"UNSU", b"PUB ", b"HPUB"):
                out.append(line.decode())
        return out

    def _process(self) -> None:
        buf = self._pending
        while True:
            idx = buf.find(b"\r\n")
            if idx < 0:
                return
            line = bytes(buf[:idx])
            op, _, rest = line.partition(b" ")
            if op in (b"PUB", b"HPUB"):
                args = rest.split()
                size = int(args[-1])
                if len(buf) < idx + 2 + size + 2:
                    return
                payload = bytes(buf[idx + 2 : idx + 2 + size])
                del buf[: idx + 2 + size + 2]
                hlen = int(args[-2]) if op == b"HPUB" else 0
                reply = args[1].decode() if len(args) == (4 if op == b"HPUB" else 3) else None
                self._deliver(args[0].decode(), reply, payload, hlen)
                continue
            del buf[: idx + 2]
            if op == b"CONNECT":
                self.server.connects.append(json.loads(rest))
            elif op == b"PING":
                if not self.connected:
                    self.connected = True
                    self.send(b"PONG\r\n")
                    self.server.on_handshake(self)
                elif self.server.answer_pings:
                    self.send(b"PONG\r\n")
            elif op == b"SUB":
                args = rest.decode().split()
                subject, sid = args[0], int(args[-1])
                self.subs[sid] = (subject, args[1] if len(args) == 3 else None, None)
            elif op == b"UNSUB":
                args = rest.decode().split()
                sid = int(args[0])
                if len(args) == 2 and sid in self.subs:
                    s = self.subs[sid]
                    self.subs[sid] = (s[0], s[1], int(args[1]))
                else:
                    self.subs.pop(sid, None)

    def _deliver(self, subject: str, reply: str | None, payload: bytes, hlen: int) -> None:
        for sid, (pattern, _q, _max) in list(self.subs.items()):
            if subject_matches(pattern, subject):
                r = f" {reply}" if reply else ""
                if hlen:
                    head = f"HMSG {subject} {sid}{r} {hlen} {len(payload)}\r\n"
                else:
                    head = f"MSG {subject} {sid}{r} {len(payload)}\r\n"
                self.send(head.encode() + payload + b"\r\n")


class MemoryServer:
    """Hands out :class:`MemoryTransport` connections; ``link(client).transport_factory = server.open``."""

    def __init__(self, **info: Any):
        self.info = info
        self.transports: list[MemoryTransport] = []
        self.connects: list[dict[str, Any]] = []
        self.refusing = False
        self.answer_pings = True
        self.handshakes = threading.Semaphore(0)
        self.handshake_hook: Any = None

    def open(self, addr: ServerAddress, deadline: Deadline, *tls: Any) -> MemoryTransport:
        if self.refusing:
            raise NatsConnectionError(f"cannot connect to {addr.url}: refused")
        t = MemoryTransport(self, addr)
        self.transports.append(t)
        return t

    def on_handshake(self, t: MemoryTransport) -> None:
        if self.handshake_hook is not None:
            self.handshake_hook(t)
        self.handshakes.release()

    @property
    def current(self) -> MemoryTransport:
        return self.transports[-1]
