"""A failed first connect: the error nats-py lets through is what an ``except`` catches."""

import asyncio
import socket
import threading

import nats
from nats.errors import Error, NoServersError


def listener(mode):
    """A local TCP port that either closes each connection at once or never says INFO."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def run():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if mode == "eof":
                conn.close()
            else:
                held.append(conn)

    threading.Thread(target=run, daemon=True).start()
    return srv, f"nats://127.0.0.1:{srv.getsockname()[1]}"


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"nats://127.0.0.1:{port}"


async def main():
    errors = []

    async def error_cb(e):
        errors.append(e)

    # A server that never sends INFO: a plain TimeoutError (asyncio's is the same class).
    srv, url = listener("silent")
    try:
        await nats.connect(url, connect_timeout=0.5, allow_reconnect=False, error_cb=error_cb)
    except TimeoutError as e:
        assert isinstance(e, asyncio.TimeoutError)
    else:
        raise AssertionError("a silent server must time out")
    assert errors and all(isinstance(e, TimeoutError) for e in errors), errors
    srv.close()

    # A server that hangs up before INFO: the client's own base error.
    errors.clear()
    srv, url = listener("eof")
    try:
        await nats.connect(url, connect_timeout=2, allow_reconnect=False, error_cb=error_cb)
    except Error:
        pass
    else:
        raise AssertionError("a closed stream must fail the connect")
    assert errors and all(isinstance(e, Error) for e in errors), errors
    srv.close()

    # Nobody listening: NoServersError once the attempts are spent; each attempt
    # reported to error_cb as the ConnectionRefusedError it was.
    errors.clear()
    try:
        await nats.connect(closed_port(), connect_timeout=2, max_reconnect_attempts=1, reconnect_time_wait=0.1,
                           error_cb=error_cb)
    except NoServersError as e:
        assert isinstance(e, Error)
    else:
        raise AssertionError("a closed port must fail the connect")
    assert errors and all(isinstance(e, ConnectionRefusedError) for e in errors), errors

    # With reconnects allowed, a silent server ends in NoServersError too.
    errors.clear()
    srv, url = listener("silent")
    try:
        await nats.connect(url, connect_timeout=0.5, max_reconnect_attempts=1, reconnect_time_wait=0.1,
                           error_cb=error_cb)
    except NoServersError:
        pass
    else:
        raise AssertionError("a silent server must fail the connect")
    assert errors and all(isinstance(e, TimeoutError) for e in errors), errors
    srv.close()


if __name__ == "__main__":
    asyncio.run(main())
