"""Request/reply through the muxed inbox subscription."""

from __future__ import annotations

import builtins
import linecache
import threading
import time
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync._core.spi import link
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until


def test_request_reply_with_headers(nc: nats.Client) -> None:
    def answer(msg: nats.Msg) -> None:
        assert msg.headers is not None
        msg.respond(msg.data.upper(), headers={"Echo": msg.headers["Ask"]})

    nc.subscribe("req.echo", cb=answer)
    reply = nc.request("req.echo", b"hello", timeout=2, headers={"Ask": "1"})
    assert reply.data == b"HELLO"
    assert reply.headers == {"Echo": "1"}


def test_no_responders(nc: nats.Client) -> None:
    with pytest.raises(nats.NoRespondersError):
        nc.request("req.nobody.home", b"x", timeout=2)


def test_timeout_is_also_builtin_timeout_error(nc: nats.Client) -> None:
    nc.subscribe("req.silent")  # subscribed, never answers
    start = time.monotonic()
    with pytest.raises(builtins.TimeoutError):
        nc.request("req.silent", b"x", timeout=0.2)
    assert time.monotonic() - start < 2
    assert issubclass(nats.TimeoutError, nats.NatsError)


def test_late_reply_after_timeout_is_dropped(nc: nats.Client) -> None:
    release = threading.Event()

    def slow(msg: nats.Msg) -> None:
        release.wait(5)
        msg.respond(b"late")

    nc.subscribe("req.slow", cb=slow)
    with pytest.raises(nats.TimeoutError):
        nc.request("req.slow", b"x", timeout=0.1)
    release.set()
    nc.subscribe("req.fast", cb=lambda m: m.respond(b"fast"))
    assert nc.request("req.fast", b"x", timeout=2).data == b"fast"
    # The late reply found nobody waiting and left nothing behind.
    assert link(nc).requests.waiting == {}


def test_respond_without_reply_subject(nc: nats.Client) -> None:
    sub = nc.subscribe("req.noreply")
    nc.publish("req.noreply", b"x")
    with pytest.raises(ValueError):
        sub.next_msg(2).respond(b"y")


def test_concurrent_requests_each_get_their_own_reply(nc: nats.Client) -> None:
    nc.subscribe("req.many", queue="svc", cb=lambda m: m.respond(b"re:" + m.data))
    nc.subscribe("req.many", queue="svc", cb=lambda m: m.respond(b"re:" + m.data))
    failures: list[str] = []

    def worker(t: int) -> None:
        for i in range(100):
            body = f"{t}-{i}".encode()
            got = nc.request("req.many", body, timeout=5).data
            if got != b"re:" + body:
                failures.append(f"{body!r} -> {got!r}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    assert not any(t.is_alive() for t in threads)


def test_bytes_buffered_while_another_thread_sends_go_out_with_its_write(
        nc: nats.Client, shared_server: NatsServer) -> None:
    # A thread that finds the send lock taken leaves its request in the buffer
    # and waits for the reply; the thread holding the lock must send it.
    responder = nats.connect(shared_server.url)
    try:
        responder.subscribe("req.handover", cb=lambda m: m.respond(b"re:" + m.data))
        responder.flush(timeout=5)
        writer = link(nc).writer
        assert writer.send_lock.acquire(timeout=5)  # this test is "the thread sending now"
        replies: list[bytes] = []
        asker = threading.Thread(target=lambda: replies.append(nc.request("req.handover", b"q", timeout=10).data),
                                 name="test-asker")
        asker.start()
        assert wait_until(lambda: b"req.handover" in bytes(writer.buffer))
        writer.send_held()  # sends what was buffered, and lets go of the lock
        asker.join(10)
        assert replies == [b"re:q"]
        assert not writer.send_lock.locked()
    finally:
        responder.close()


def test_many_threads_requesting_on_one_client_all_get_their_reply(nc: nats.Client, shared_server: NatsServer) -> None:
    responder = nats.connect(shared_server.url)
    try:
        responder.subscribe("req.crowd", cb=lambda m: m.respond(b"re:" + m.data))
        responder.flush(timeout=5)
        failures: list[str] = []
        start = threading.Barrier(64)

        def worker(t: int) -> None:
            start.wait(30)
            for i in range(20):
                body = f"{t}-{i}".encode()
                try:
                    got = nc.request("req.crowd", body, timeout=20).data
                except Exception as exc:  # reported below
                    failures.append(f"{body!r}: {exc!r}")
                    return
                if got != b"re:" + body:
                    failures.append(f"{body!r} -> {got!r}")
            if t % 8 == 0:
                nc.flush(timeout=20)  # flushes among the requests share the writes too

        threads = [threading.Thread(target=worker, args=(t,), name=f"test-crowd-{t}") for t in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not failures
        assert not any(t.is_alive() for t in threads)
        assert link(nc).requests.waiting == {}
    finally:
        responder.close()


# The common request and reply (a bytes payload, no headers) are encoded inline, apart from
# Connection.encode(): the same answers and the same refusals as the general path.
PAYLOADS = {"bytes": bytes, "bytearray": bytearray, "memoryview": lambda b: memoryview(bytes(b))}


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_every_payload_kind_makes_the_same_request_and_reply(nc: nats.Client, kind: str) -> None:
    make = PAYLOADS[kind]
    nc.subscribe("req.kinds", cb=lambda m: m.respond(make(m.data[::-1])))
    for body in (b"", b"abc", bytes(range(256)) * 40):
        assert nc.request("req.kinds", make(body), timeout=5).data == body[::-1]
        assert nc.request("req.kinds", make(body), timeout=5, headers={"K": "v"}).data == body[::-1]
    assert not link(nc).requests.waiting


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_a_request_refused_before_sending_leaves_nothing_waiting(kind: str) -> None:
    make = PAYLOADS[kind]
    with NatsServer(max_payload=1024, jetstream=False) as server, nats.connect(server.url) as nc:
        conn = link(nc)
        with pytest.raises(nats.MaxPayloadError):
            nc.request("req.big", make(b"x" * 1025), timeout=1)
        for bad in ("req.*", "", "req. x", "req..x"):
            with pytest.raises(nats.BadSubjectError):
                nc.request(bad, make(b"x"), timeout=1)
        with pytest.raises(TypeError):
            nc.request("req.x", "text", timeout=1)  # type: ignore[arg-type]
        assert not conn.requests.waiting
        refused: list[Exception] = []

        def answer(msg: nats.Msg) -> None:
            try:
                msg.respond(make(b"y" * 1025))
            except nats.MaxPayloadError as exc:
                refused.append(exc)  # before the answer that lets the request return
                msg.respond(make(b"small"))

        nc.subscribe("req.big", cb=answer)
        assert nc.request("req.big", make(b"x" * 1024), timeout=5).data == b"small"
        assert refused


def test_a_lanes_queued_count_is_its_length(nc: nats.Client) -> None:
    lane = link(nc).lane(lambda item: None, "req-count")
    assert lane.queued() == len(lane) == 0



class _HeldAtWake:
    """A client whose reader thread, once :attr:`armed`, stops where it has stored an
    answer (a reply, a PONG) in its waiter and is about to wake the caller (the waiter
    lock's release, in ResponseMux.route or Waiter.set), until :attr:`caller_done`.

    A tracer set on the client's threads as they start does it: no other thread is traced.
    Replies take the Python route here (the reference): the compiled one stores and wakes
    in one step no other thread can run between.
    """

    def __init__(self, url: str):
        self.armed = threading.Event()
        self.held = threading.Event()
        self.caller_done = threading.Event()

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and self.armed.is_set() and not self.held.is_set() and \
                    "_lock.release()" in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
                self.held.set()
                self.caller_done.wait(10)  # bounded: the callers' deadlines are 0.3 s
            return local

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            code = frame.f_code
            return local if code.co_name in ("route", "set") and code.co_filename.endswith("requests.py") else None

        threading.settrace(tracer)  # the threads of this client only: they start in connect()
        try:
            self.nc = nats.connect(url, requester_reads=False)  # the reader thread reads every answer
        finally:
            threading.settrace(None)  # type: ignore[arg-type]
        requests = self.nc._conn.requests
        requests.reply_route = requests.route  # before the first request makes the inbox


def test_a_reply_routed_as_the_deadline_passes_is_returned(shared_server: NatsServer) -> None:
    """The reader thread stores a reply in its waiter and then wakes the requester: a
    deadline that passes between the two steps finds the reply there. The requester must
    return it (the request was answered), not raise TimeoutError."""
    with nats.connect(shared_server.url, name="replier") as replier:
        replier.subscribe("req.at.deadline", cb=lambda m: m.respond(b"answer"))
        replier.flush()
        client = _HeldAtWake(shared_server.url)
        with client.nc as nc:
            client.armed.set()
            try:
                outcome: object = nc.request("req.at.deadline", b"?", timeout=0.3).data
            except nats.TimeoutError as exc:
                outcome = exc
            finally:
                client.caller_done.set()
            assert client.held.is_set()  # the reply was stored and the reader held before the wake-up
            assert outcome == b"answer"


def test_a_pong_routed_as_the_flush_deadline_passes_is_taken(shared_server: NatsServer) -> None:
    """The same for a flush: its PONG stored, the wake-up not yet given, when the deadline
    passes. The flush succeeds (the server answered), it does not raise TimeoutError."""
    client = _HeldAtWake(shared_server.url)
    with client.nc as nc:
        nc.publish("flush.at.deadline", b"x")
        client.armed.set()
        try:
            nc.flush(timeout=0.3)
            outcome: object = "flushed"
        except nats.TimeoutError as exc:
            outcome = exc
        finally:
            client.caller_done.set()
        assert client.held.is_set()  # the PONG was stored and the reader held before the wake-up
        assert outcome == "flushed"
