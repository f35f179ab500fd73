"""A scripted NATS server for what a real nats-server will not do (malformed
frames, silence). The test plays the server's side byte by byte."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

INFO = b'INFO {"server_id":"FAKE","version":"2.99.0","max_payload":1048576,"headers":true,"proto":1}\r\n'


class ScriptedConn:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        sock.settimeout(5.0)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("client went away")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def handshake(self) -> bytes:
        """Send INFO, read CONNECT and PING, answer PONG; returns the CONNECT line."""
        self.send(INFO)
        connect = self.read_line()
        assert self.read_line() == b"PING"
        self.send(b"PONG\r\n")
        return connect


class FakeServer:
    """Accepts connections on 127.0.0.1 and runs ``script(conn)`` for each, in a thread."""

    def __init__(self, script: Callable[[ScriptedConn], None]):
        self.script = script
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.url = f"nats://127.0.0.1:{self.port}"
        self.errors: list[BaseException] = []
        self.done = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, name="fake-nats-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        self._conns.append(sock)
        try:
            self.script(ScriptedConn(sock))
        except BaseException as exc:  # surfaced by the test through .errors
            self.errors.append(exc)
        finally:
            self.done.set()

    def close(self) -> None:
        self.listener.close()
        for c in self._conns:
            c.close()
        self._thread.join(5)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
