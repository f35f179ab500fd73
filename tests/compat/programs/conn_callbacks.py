"""Connection callbacks: a close while reconnecting, and no discovery on the first connect."""

import asyncio
import os
import socket
import threading
from urllib.parse import urlparse

import nats
from nats.errors import UnexpectedEOF

URL = os.environ["NATS_URL"]


class Proxy:
    """A local TCP forwarder to the server that can be cut (the server seems gone)."""

    def __init__(self, upstream):
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname, parsed.port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.url = f"nats://127.0.0.1:{self.listener.getsockname()[1]}"
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.listener.close()
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


async def until(condition):
    for _ in range(400):
        if condition():
            return True
        await asyncio.sleep(0.025)
    return False


async def main():
    events = []

    def record(name):
        async def cb():
            events.append(name)
        return cb

    errors = []

    async def error_cb(e):
        events.append("error")
        errors.append(e)

    callbacks = dict(disconnected_cb=record("disconnected"), reconnected_cb=record("reconnected"),
                     closed_cb=record("closed"), discovered_server_cb=record("discovered"), error_cb=error_cb)

    # One server, no cluster: nothing is discovered, on the first connect or later.
    nc = await nats.connect(URL, **callbacks)
    await nc.flush()
    await nc.close()
    assert await until(lambda: "closed" in events), events
    assert events == ["disconnected", "closed"], events

    # The server goes away; close() while the client tries to get it back still
    # reports the disconnection, then the close.
    events.clear()
    proxy = Proxy(URL)
    nc = await nats.connect(proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1, connect_timeout=5,
                            **callbacks)
    proxy.cut()
    assert await until(lambda: nc.is_reconnecting and "disconnected" in events), events
    await nc.close()
    assert await until(lambda: "closed" in events), events
    assert nc.is_closed
    assert [e for e in events if e != "error"] == ["disconnected", "disconnected", "closed"], events
    assert "reconnected" not in events and "discovered" not in events
    # The server's end of the stream closed under the client: nats-py's UnexpectedEOF,
    # then each refused attempt as the ConnectionRefusedError it was.
    assert isinstance(errors[0], UnexpectedEOF), errors
    assert all(isinstance(e, ConnectionRefusedError) for e in errors[1:]), errors


if __name__ == "__main__":
    asyncio.run(main())
