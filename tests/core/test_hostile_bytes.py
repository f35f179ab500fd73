"""One message's bytes never cost the connection (against a real nats-server).

The server accepts any byte but a space, tab, CR or LF in a subject, so any
publisher can send a subject or reply subject that is not UTF-8, or holds a
vertical tab or form feed. A bare socket sends such messages here (our own
client refuses to); the client receiving them must deliver them and their
neighbours, keep its connection, and answer or acknowledge them on the exact
bytes the server named.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import Stream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ..fakeserver import FakeServer, ScriptedConn
from ..recovery import Guarded, guard

#: Subjects a publisher may send that are not UTF-8 (or hold bytes a whitespace split would cut).
HOSTILE = [b"\xff\xfe", b"caf\xe9", b"\xed\xa0\x80", b"\xc3", b"v\x0bt", b"f\x0cf", b"nul\x00"]


class RawConn:
    """A bare TCP connection to the server: sends what the client would refuse and
    reads what the server sends. Every read is bounded by a 10 s deadline."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        assert self.line().startswith(b"INFO ")
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
        self.sync()

    def close(self) -> None:
        self.sock.close()

    def line(self) -> bytes:
        """The next control line (without CRLF)."""
        deadline = time.monotonic() + 10
        while b"\r\n" not in self.buf:
            assert time.monotonic() < deadline, "nothing from the server in 10 s"
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def sync(self) -> None:
        """Send PING and wait for the PONG: everything sent before is processed."""
        self.sock.sendall(b"PING\r\n")
        for _ in range(100):
            line = self.line()
            if line == b"PONG":
                return
            assert not line.startswith(b"-ERR"), line
        raise AssertionError("no PONG")

    def next_msg_subject(self) -> bytes:
        """The subject of the next MSG the server delivers (its payload skipped)."""
        for _ in range(100):
            line = self.line()
            if line.startswith(b"MSG "):
                self.line()  # the payload (short, no CRLF inside in these tests)
                return line.split(b" ")[1]
            assert not line.startswith(b"-ERR"), line
        raise AssertionError("no MSG")

    def next_hmsg(self) -> tuple[bytes, bytes, bytes]:
        """Subject, header block and payload of the next HMSG the server delivers."""
        for _ in range(100):
            line = self.line()
            if line.startswith(b"HMSG "):
                parts = line.split(b" ")
                hdr_len, total = int(parts[-2]), int(parts[-1])
                deadline = time.monotonic() + 10
                while len(self.buf) < total + 2:
                    assert time.monotonic() < deadline, "no whole HMSG in 10 s"
                    chunk = self.sock.recv(65536)
                    assert chunk, "the server closed the connection"
                    self.buf += chunk
                block, self.buf = self.buf[:total], self.buf[total + 2:]
                return parts[1], block[:hdr_len], block[hdr_len:]
            assert not line.startswith(b"-ERR"), line
        raise AssertionError("no HMSG")


@pytest.fixture
def raw(shared_server: NatsServer) -> Iterator[RawConn]:
    conn = RawConn(shared_server.port)
    yield conn
    conn.close()


@pytest.fixture
def guarded(shared_server: NatsServer) -> Iterator[Guarded]:
    with guard(shared_server.url) as g:
        yield g


def _escaped(raw_subject: bytes) -> str:
    return raw_subject.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("bad", HOSTILE)
def test_a_subject_that_is_not_utf8_is_delivered_with_its_neighbours(guarded: Guarded, raw: RawConn,
                                                                     bad: bytes) -> None:
    nc = guarded.nc
    sub = nc.subscribe("hb.>")
    nc.flush(timeout=5)
    # One write: the three messages reach the client in one read, as a burst would;
    # the middle one with headers (an HMSG line, which the pure-Python parser splits itself).
    raw.sock.sendall(b"PUB hb.one 1\r\n1\r\nHPUB hb.%b hb.reply.%b 12 13\r\nNATS/1.0\r\n\r\n2\r\n"
                     b"PUB hb.three 1\r\n3\r\n" % (bad, bad))
    raw.sync()
    got = [sub.next_msg(timeout=10) for _ in range(3)]
    assert [m.data for m in got] == [b"1", b"2", b"3"]
    assert [m.subject for m in got] == ["hb.one", _escaped(b"hb." + bad), "hb.three"]
    assert got[1].reply == _escaped(b"hb.reply." + bad)
    # Back to the server's very bytes.
    assert got[1].subject.encode("utf-8", "surrogateescape") == b"hb." + bad
    guarded.check_untouched()


@pytest.mark.parametrize("bad", HOSTILE)
def test_respond_to_a_reply_subject_that_is_not_utf8_reaches_those_bytes(guarded: Guarded, raw: RawConn,
                                                                         bad: bytes) -> None:
    nc = guarded.nc
    nc.subscribe("hb.req", cb=lambda m: m.respond(b"answer"))
    nc.flush(timeout=5)
    raw.sock.sendall(b"SUB hb.rep.> 1\r\nPUB hb.req hb.rep.%b 1\r\nq\r\n" % bad)
    assert raw.next_msg_subject() == b"hb.rep." + bad
    guarded.check_untouched()


#: A request's header block from a client that sends what this one refuses to: a key with a
#: blank inside (nats-py sends any key), a value with a lone CR.
FOREIGN_HEADERS = b"NATS/1.0\r\nBad Key: 1\r\nOrder: 7\r\nOdd: a\rb\r\n\r\n"


def test_respond_echoes_what_it_can_send_of_another_clients_headers(guarded: Guarded, raw: RawConn) -> None:
    """respond() sends the request's headers back (nats-py's respond): those this client
    cannot send are left out, and the answer still goes (the callback raised BadHeaderError)."""
    nc = guarded.nc
    errors: list[Exception] = []

    def answer(msg: nats.Msg) -> None:
        try:
            msg.respond(b"answer")
        except Exception as exc:
            errors.append(exc)

    nc.subscribe("hb.req", cb=answer)
    nc.flush(timeout=5)
    size = len(FOREIGN_HEADERS)
    raw.sock.sendall(b"SUB hb.rep.> 1\r\nHPUB hb.req hb.rep.1 %d %d\r\n%b\r\n"
                     % (size, size + 1, FOREIGN_HEADERS + b"q"))
    subject, block, payload = raw.next_hmsg()
    assert (subject, block, payload) == (b"hb.rep.1", b"NATS/1.0\r\nOrder: 7\r\n\r\n", b"answer")
    assert errors == []
    guarded.check_untouched()


def test_a_header_block_too_short_to_be_one_costs_no_neighbour(guarded: Guarded, raw: RawConn) -> None:
    """The server passes on "HPUB s 2 5" (a 2-byte header block) from any publisher:
    every subscriber dropped its connection, with the messages read alongside."""
    nc = guarded.nc
    sub = nc.subscribe("hb.>")
    nc.flush(timeout=5)
    raw.sock.sendall(b"PUB hb.one 1\r\n1\r\nHPUB hb.two 2 5\r\nab123\r\nHPUB hb.three 0 1\r\n3\r\n"
                     b"PUB hb.four 1\r\n4\r\n")
    raw.sync()
    got = [sub.next_msg(timeout=10) for _ in range(4)]
    assert [(m.subject, m.raw_headers, m.data) for m in got] == [
        ("hb.one", None, b"1"), ("hb.two", b"ab", b"123"), ("hb.three", None, b"3"), ("hb.four", None, b"4")]
    with pytest.raises(nats.ProtocolError):
        got[1].headers  # noqa: B018 - only reading these headers fails
    guarded.check_untouched()


@pytest.fixture
def stream(shared_server: NatsServer) -> Iterator[Stream]:
    with nats.connect(shared_server.url) as admin:
        js = admin.jetstream()
        name = "HB" + next_nuid()
        st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        try:
            yield st
        finally:
            js.delete_stream(name)


def test_a_stored_subject_that_is_not_utf8_is_no_poison_pill(shared_server: NatsServer, raw: RawConn,
                                                           stream: Stream) -> None:
    """3 messages stored, the middle one's subject not UTF-8: a pull consumer gets and acks
    all 3 without a reconnect (it got 0 of 3 through 7 reconnects before)."""
    name = stream.name
    raw.sock.sendall(b"PUB %b.a 1\r\n1\r\nPUB %b.\xff\xfe 1\r\n2\r\nPUB %b.c 1\r\n3\r\n" % (
        name.encode(), name.encode(), name.encode()))
    raw.sync()
    with guard(shared_server.url) as g:
        js = g.nc.jetstream()
        cons = js.stream(name).create_consumer(durable_name="HB")
        got = []
        with cons.fetch(3, max_wait=10) as batch:
            for msg in batch:
                got.append(msg)
                msg.ack_sync(timeout=10)
            assert batch.error is None
        assert [m.data for m in got] == [b"1", b"2", b"3"]
        assert got[1].subject == _escaped(name.encode() + b".\xff\xfe")
        assert [m.metadata.sequence.stream for m in got] == [1, 2, 3]
        info = cons.info()
        assert (info.num_ack_pending, info.num_pending) == (0, 0)
        g.check_untouched()


# ---------------------------------------------------------------------- a lone surrogate given by the user

LONE = "\ud800"  # no UTF-8 form: the client can only refuse it, before sending anything

SURROGATES: dict[str, tuple[type[Exception], Callable[[nats.Client], object]]] = {
    "publish subject": (nats.BadSubjectError, lambda nc: nc.publish(f"hb.{LONE}", b"x")),
    "publish reply": (nats.BadSubjectError, lambda nc: nc.publish("hb.x", b"x", reply=f"r.{LONE}")),
    "publish_now subject": (nats.BadSubjectError, lambda nc: nc.publish_now(f"hb.{LONE}", b"x")),
    "subscribe subject": (nats.BadSubjectError, lambda nc: nc.subscribe(f"hb.{LONE}.>")),
    "subscribe queue": (nats.BadSubjectError, lambda nc: nc.subscribe("hb.x", queue=f"q{LONE}")),
    "request subject": (nats.BadSubjectError, lambda nc: nc.request(f"hb.{LONE}", b"x", timeout=5)),
    "header value": (nats.BadHeaderError, lambda nc: nc.publish("hb.x", b"x", headers={"k": f"v{LONE}"})),
    "header key": (nats.BadHeaderError, lambda nc: nc.publish("hb.x", b"x", headers={f"k{LONE}": "v"})),
    "request header": (nats.BadHeaderError, lambda nc: nc.request("hb.x", b"x", timeout=5, headers={"k": LONE})),
}


@pytest.mark.parametrize("what", list(SURROGATES))
def test_a_lone_surrogate_is_refused_with_the_documented_error(guarded: Guarded, what: str) -> None:
    error, call = SURROGATES[what]
    with pytest.raises(error):
        call(guarded.nc)
    guarded.check_untouched()


# ---------------------------------------------------------------------- bytes no server sends

def test_the_messages_read_before_a_malformed_frame_are_delivered() -> None:
    """A frame that is not NATS protocol (only a broken server or link sends one) costs
    the connection, but no longer the valid messages that came in the same read."""
    done = threading.Event()

    def script(conn: ScriptedConn) -> None:
        conn.handshake()
        sid = b""
        for _ in range(20):
            line = conn.read_line()
            if line.startswith(b"SUB "):
                sid = line.split()[-1]
            elif line == b"PING":
                conn.send(b"PONG\r\n")
                break
        conn.send(b"MSG a %b 1\r\n1\r\nMSG a %b 1\r\n2\r\nBOGUS\r\n" % (sid, sid))  # one write
        done.wait(10)

    errors: list[Exception] = []
    with FakeServer(script) as server:
        # Reconnecting (to a server that will not answer) keeps the subscription's queue readable.
        nc = nats.connect(server.url, error_cb=errors.append, reconnect_time_wait=30)
        try:
            sub = nc.subscribe("a")
            nc.flush(timeout=5)
            assert [sub.next_msg(timeout=10).data for _ in range(2)] == [b"1", b"2"]
            assert wait_until(lambda: any(isinstance(e, nats.ProtocolError) for e in errors), timeout=10), errors
        finally:
            done.set()
            nc.close()
