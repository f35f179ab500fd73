"""nats-py's ``fetch(batch, timeout=None)`` has no time limit: when nothing is
available its pull carries no ``expires`` and stays open until the whole batch came.
The last test runs the same steps under nats-py itself, to show it is nats-py's
behaviour."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until

NEXT = "$JS.API.CONSUMER.MSG.NEXT.NOLIMIT.worker"


def _setup(url: str) -> None:
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name="NOLIMIT", subjects=["nolimit"])


def _consumer(url: str) -> Any:
    with nats.connect(url) as nc:
        return nc.jetstream().consumer_info("NOLIMIT", "worker")


def test_fetch_without_timeout_waits_for_the_whole_batch(nats_server: NatsServer) -> None:
    _setup(nats_server.url)
    with nats.connect(nats_server.url) as spy, nats.connect(nats_server.url) as nc:
        pulls = spy.subscribe(NEXT)
        spy.flush()
        js = nc.jetstream()
        psub = js.pull_subscribe("nolimit", "worker")
        got: list[Any] = []
        fetcher = threading.Thread(target=lambda: got.append(psub.fetch(3, timeout=None)))
        fetcher.start()
        assert wait_until(lambda: _consumer(nats_server.url).num_waiting == 1)
        js.publish("nolimit", b"1")
        assert wait_until(lambda: _consumer(nats_server.url).num_ack_pending == 1)
        assert _consumer(nats_server.url).num_waiting == 1  # the pull is still open for two more
        js.publish("nolimit", b"2")
        js.publish("nolimit", b"3")
        fetcher.join(timeout=10)
        assert not fetcher.is_alive()
        assert [m.data for m in got[0]] == [b"1", b"2", b"3"]
        bodies = []
        while True:
            try:
                bodies.append(json.loads(pulls.next_msg(timeout=0.5).data))
            except nats.TimeoutError:
                break
        waiting = [b for b in bodies if not b.get("no_wait")]
        assert waiting and all("expires" not in b for b in waiting), bodies


def _send_status(port: int, subject: str, status: bytes) -> None:
    """Publish a header block with a status line to ``subject``, as the server sends one
    (a client cannot publish a status line through its API)."""
    hdr = b"NATS/1.0 " + status + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"INFO ")
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
                     + f"HPUB {subject} {len(hdr)} {len(hdr)}\r\n".encode() + hdr + b"\r\nPING\r\n")
        assert reader.readline() == b"PONG\r\n"


@pytest.mark.parametrize("batch", [1, 3])
def test_a_pull_ended_by_a_reset_without_messages_is_a_timeout(nats_server: NatsServer, batch: int) -> None:
    # A 409 Server Shutdown (or Leadership Change) ends the open pull with nothing in it:
    # handled as the other 409s (TimeoutError for a batch of one, an empty list for more),
    # never an empty list for a batch of one.
    _setup(nats_server.url)
    with nats.connect(nats_server.url) as spy, nats.connect(nats_server.url) as nc:
        pulls = spy.subscribe(NEXT)
        spy.flush()
        psub = nc.jetstream().pull_subscribe("nolimit", "worker")
        outcome: list[Any] = []

        def fetch() -> None:
            try:
                outcome.append(psub.fetch(batch, timeout=None))
            except Exception as exc:
                outcome.append(exc)

        fetcher = threading.Thread(target=fetch)
        fetcher.start()
        waiting = None
        for _ in range(10):  # the no_wait probe first, then the pull that stays open
            pull = pulls.next_msg(timeout=10)
            if not json.loads(pull.data).get("no_wait"):
                waiting = pull
                break
        assert waiting is not None
        _send_status(nats_server.port, waiting.reply, b"409 Server Shutdown")
        fetcher.join(timeout=10)
        assert not fetcher.is_alive()
        assert len(outcome) == 1, outcome
        if batch == 1:
            assert isinstance(outcome[0], nats.TimeoutError), outcome
            assert str(outcome[0]) == "nats: timeout"
        else:
            assert outcome[0] == []


@pytest.mark.parametrize("heartbeat", [0, 0.0, -1.0])
def test_a_zero_or_negative_heartbeat_is_no_heartbeat(nats_server: NatsServer, heartbeat: float) -> None:
    # nats-py sends no idle heartbeat for 0, and the server ignores a negative one; without
    # a timeout neither may turn into the refused-heartbeat probe, which would take
    # messages nobody gets.
    _setup(nats_server.url)
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        for i in range(3):
            js.publish("nolimit", str(i).encode())
        psub = js.pull_subscribe("nolimit", "worker")
        assert [m.data for m in psub.fetch(1, timeout=None, heartbeat=heartbeat)] == [b"0"]
        assert [m.data for m in psub.fetch(2, timeout=None, heartbeat=heartbeat)] == [b"1", b"2"]
        assert js.consumer_info("NOLIMIT", "worker").num_ack_pending == 3


def test_a_negative_heartbeat_waits_for_a_message(nats_server: NatsServer) -> None:
    # A negative heartbeat is no heartbeat: the fetch waits for its message (it ended at
    # once with "missed idle heartbeats", the pull left to take the message unseen).
    _setup(nats_server.url)
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        psub = js.pull_subscribe("nolimit", "worker")
        outcome: list[Any] = []

        def fetch() -> None:
            try:
                outcome.append([m.data for m in psub.fetch(1, timeout=30, heartbeat=-1.0)])
            except Exception as exc:
                outcome.append(exc)

        fetcher = threading.Thread(target=fetch)
        fetcher.start()
        assert wait_until(lambda: bool(outcome) or _consumer(nats_server.url).num_waiting == 1)
        js.publish("nolimit", b"late")
        fetcher.join(timeout=30)
        assert outcome == [[b"late"]]


def test_nats_py_waits_the_same(nats_server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")
    _setup(nats_server.url)

    async def main() -> list[bytes]:
        nc = await nats_py.connect(nats_server.url)
        try:
            js = nc.jetstream()
            psub = await js.pull_subscribe("nolimit", "worker")
            fetch = asyncio.create_task(psub.fetch(3, timeout=None))
            for _ in range(250):
                if (await js.consumer_info("NOLIMIT", "worker")).num_waiting == 1:
                    break
                await asyncio.sleep(0.02)
            await js.publish("nolimit", b"1")
            for _ in range(250):
                if (await js.consumer_info("NOLIMIT", "worker")).num_ack_pending == 1:
                    break
                await asyncio.sleep(0.02)
            assert (await js.consumer_info("NOLIMIT", "worker")).num_waiting == 1
            await js.publish("nolimit", b"2")
            await js.publish("nolimit", b"3")
            return [bytes(m.data) for m in await asyncio.wait_for(fetch, 10)]
        finally:
            await nc.close()

    assert asyncio.run(main()) == [b"1", b"2", b"3"]
