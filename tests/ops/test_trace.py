"""Message tracing (ADR-41) against real servers: trace only and delivered, a route hop
in a 2-node cluster, a subject mapping, service and stream imports across accounts, a
JetStream stream; the typed events, the joined path, and ``natsjs-sync trace``."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.cli import main
from natsjs_sync.monitor import (
    ConnectionKind,
    MessageTrace,
    TraceEgress,
    TraceEvent,
    TraceIngress,
    TraceJetStream,
    trace_message,
)
from natsjs_sync.monitor.errors import MonitorResponseError
from natsjs_sync.testing import FaultProxy, NatsCluster, NatsServer

#: Tracing came with nats-server 2.11.
needs_tracing = pytest.mark.server("2.11")

_ACCOUNTS = {
    "A": {"users": [{"user": "a", "password": "a"}],
          "exports": [{"service": "svc.>", "allow_trace": True}, {"stream": "feed.>"}]},
    "B": {"users": [{"user": "b", "password": "b"}],
          "imports": [{"service": {"account": "A", "subject": "svc.>"}},
                      {"stream": {"account": "A", "subject": "feed.>"}, "allow_trace": True}]},
}


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(config={"mappings": {"old.*": "new.{{wildcard(1)}}"}}) as s:
        yield s


@pytest.fixture(scope="module")
def accounts_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, config={"accounts": _ACCOUNTS}) as s:
        yield s


@needs_tracing
def test_trace_only_reports_the_subscriber_and_delivers_nothing(server: NatsServer) -> None:
    with nats.connect(server.url, name="tracer") as nc, nats.connect(server.url, name="worker") as other:
        sub = other.subscribe("orders.*", queue="workers")
        other.flush(timeout=5)
        trace = trace_message(nc, "orders.new", b"x", headers={"App": "1"}, timeout=5)
        assert trace.complete and len(trace.events) == 1
        origin = trace.origin
        assert origin is not None and origin.hop == "" and origin.hops == 0
        ingress = origin.ingress
        assert isinstance(ingress, TraceIngress)
        assert (ingress.kind, ingress.name, ingress.subject, ingress.account) == (
            ConnectionKind.CLIENT, "tracer", "orders.new", "$G")
        [egress] = origin.egresses
        assert (egress.kind, egress.name, egress.subscription, egress.queue) == (
            ConnectionKind.CLIENT, "worker", "orders.*", "workers")
        assert trace.deliveries() == [egress]
        assert origin.request.header is not None and origin.request.header["App"] == ["1"]
        assert origin.server.name and origin.server.version
        other.publish("orders.marker", b"after")  # the same subscription, after the traced one
        assert sub.next_msg(timeout=5).data == b"after"  # trace only: the traced message never came

        trace = trace_message(nc, "orders.new", b"x", deliver=True, timeout=5)
        assert trace.complete and trace.deliveries()[0].name == "worker"
        msg = sub.next_msg(timeout=5)
        assert msg.data == b"x" and msg.headers is not None and msg.headers["Nats-Trace-Dest"].startswith("_INBOX.")


@needs_tracing
def test_no_interest_and_a_subject_mapping(server: NatsServer) -> None:
    with nats.connect(server.url) as nc:
        trace = trace_message(nc, "nobody.here", timeout=5)
        assert trace.complete and trace.origin is not None and trace.origin.egresses == []
        sub = nc.subscribe("new.thing")
        nc.flush(timeout=5)
        trace = trace_message(nc, "old.thing", timeout=5)
        origin = trace.origin
        assert origin is not None and origin.subject_mapping is not None
        assert origin.subject_mapping.mapped_to == "new.thing"
        assert [g.subscription for g in origin.egresses] == ["new.thing"]
        sub.unsubscribe()


@needs_tracing
def test_jetstream_event(server: NatsServer) -> None:
    with nats.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="TRACED", subjects=["stored.>"], storage="memory")
        try:
            trace = trace_message(nc, "stored.one", b"keep", deliver=True, timeout=5)
            assert trace.origin is not None
            event = trace.origin.jetstream
            assert isinstance(event, TraceJetStream)
            assert (event.stream, event.subject, event.error) == ("TRACED", "stored.one", "")
            assert js.stream("TRACED").info().state.messages == 1
        finally:
            js.delete_stream("TRACED")


@needs_tracing
def test_a_route_hop_in_a_cluster() -> None:
    with NatsCluster(2, jetstream=False) as cluster:
        cluster.wait_routes()
        with nats.connect(cluster.urls[0], name="near") as nc, nats.connect(cluster.urls[1], name="far") as far:
            far.subscribe("across")
            far.flush(timeout=5)
            for _ in range(100):  # bounded: until the first server knows of the interest over the route
                trace = trace_message(nc, "across", timeout=5)
                if trace.origin is not None and trace.origin.hops:
                    break
            else:
                pytest.fail("the subscription never reached the other server")
            assert trace.complete and len(trace.events) == 2
            origin = trace.origin
            [route] = origin.egresses
            assert (route.kind, route.hop, route.name) == (ConnectionKind.ROUTER, "1", cluster.nodes[1].server_name)
            remote = trace.next_hop(route)
            assert remote is not None and remote.hop == "1"
            assert remote.server.name == cluster.nodes[1].server_name
            assert remote.ingress is not None and remote.ingress.kind == ConnectionKind.ROUTER
            assert [(g.kind, g.name) for g in remote.egresses] == [(ConnectionKind.CLIENT, "far")]
            assert [depth for depth, _ in trace.walk()] == [0, 1]

            code, out = _cli(cluster.urls[0], "across", "--timeout", "5s")
            assert code == 0
            lines = out.splitlines()
            assert lines[0] == "Tracing message route to subject across"
            assert lines[2].startswith('Client "natsjs-cli" cid:')
            assert f'server:"{cluster.nodes[0].server_name}"' in lines[2]
            assert lines[3].startswith(f'--> Router "{cluster.nodes[1].server_name}" rid:')
            assert lines[4].startswith(f'    Router "{cluster.nodes[0].server_name}" rid:')
            assert lines[5].startswith('    --C Client "far" cid:') and lines[5].endswith('subject:"across"')
            assert "Egress Count:" in lines and "   Client: 1" in lines and "   Router: 1" in lines


@needs_tracing
def test_service_and_stream_imports_across_accounts(accounts_server: NatsServer) -> None:
    url = accounts_server.url
    with nats.connect(url, user="a", password="a") as a, nats.connect(url, user="b", password="b") as b:
        a.subscribe("svc.add", cb=lambda m: m.respond(b"ok"))
        feed = b.subscribe("feed.>")
        a.flush(timeout=5)
        b.flush(timeout=5)
        trace = trace_message(b, "svc.add", timeout=5)
        origin = trace.origin
        assert origin is not None and origin.ingress is not None and origin.ingress.account == "B"
        [imported] = origin.service_imports
        assert (imported.account, imported.from_subject, imported.to) == ("A", "svc.add", "svc.add")
        assert [(g.account, g.subscription) for g in origin.egresses] == [("A", "svc.add")]

        trace = trace_message(a, "feed.tick", timeout=5)
        origin = trace.origin
        assert origin is not None
        [exported] = origin.stream_exports
        assert (exported.account, exported.to) == ("B", "feed.tick")
        assert [(g.account, g.subscription) for g in origin.egresses] == [("B", "feed.>")]
        feed.unsubscribe()


def _cli(url: str, *argv: str) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["trace", *argv, "--server", url, "--no-context"])
    return code, out.getvalue()


@needs_tracing
def test_cli_trace_only_and_deliver(server: NatsServer) -> None:
    with nats.connect(server.url, name="listener") as nc:
        sub = nc.subscribe("cli.x")
        nc.flush(timeout=5)
        code, out = _cli(server.url, "cli.x", "body", "-H", "K: v", "--timestamp")
        assert code == 0 and 'subject:"cli.x"' in out and "--C Client \"listener\"" in out
        assert "[0µs] Client " in out  # the ingress is the origin of the times
        nc.publish("cli.x", b"marker")
        assert sub.next_msg(timeout=5).data == b"marker"  # trace only: the traced message never came
        code, out = _cli(server.url, "cli.x", "body", "--deliver")
        assert "with delivery to the final destination" in out
        assert sub.next_msg(timeout=5).data == b"body"
        code, out = _cli(server.url, "cli.nobody")
        assert "--X No active interest" in out


@needs_tracing
def test_tracing_headers_are_refused_before_anything_is_sent(server: NatsServer) -> None:
    with nats.connect(server.url) as nc:
        sub = nc.subscribe(">")
        nc.flush(timeout=5)
        for key in ("Nats-Trace-Dest", "nats-trace-only", "Accept-Encoding"):
            with pytest.raises(ValueError, match="tracing headers"):
                trace_message(nc, "x", headers={key: "v"})
        with pytest.raises(ValueError):
            trace_message(nc, "x", timeout=-1)
        with pytest.raises(nats.BadSubjectError):
            trace_message(nc, "bad subject")
        nc.publish("marker", b"")
        assert sub.next_msg(timeout=5).subject == "marker"  # the first message: nothing was published before


@needs_tracing
def test_one_timeout_covers_the_flush_and_the_wait_for_events(server: NatsServer) -> None:
    # Every byte to the client comes 0.95 timeout late: the flush's PONG arrives within the
    # timeout, the events only after twice that delay. A flush with a budget of its own and then a
    # full timeout for the events would wait for them and return them, near 2 timeouts after the call.
    # 2 s: the bound below leaves a loaded machine 1.8 s past the timeout.
    timeout = 2.0
    with FaultProxy(server.url) as proxy, nats.connect(proxy.url) as nc:
        nc.flush(timeout=5)
        proxy.latency(0.95 * timeout, direction="to_client")
        start = time.monotonic()
        with pytest.raises(nats.TimeoutError):
            trace_message(nc, "nobody.here", timeout=timeout)
        elapsed = time.monotonic() - start
        proxy.heal()
    assert elapsed < 1.9 * timeout, f"trace_message waited {elapsed:.2f} s with a timeout of {timeout} s"


def test_decoding_gzip_unknown_steps_and_bad_payloads() -> None:
    doc = {"server": {"name": "n1", "ver": "2.12.0", "extra": 1}, "request": {"msgsize": 3}, "hops": 1,
           "events": [{"type": "in", "kind": 0, "cid": 4, "acc": "$G", "subj": "s", "ts": "2026-01-01T00:00:00Z"},
                      {"type": "zz", "what": "a newer server's step"},
                      {"type": "eg", "kind": 1, "cid": 9, "hop": "1", "name": "n2", "future": True}]}
    event = TraceEvent.decode(gzip.compress(json.dumps(doc).encode()), {"Content-Encoding": "gzip"})
    assert [type(e) for e in event.events] == [TraceIngress, TraceEgress]
    assert event.server.unknown_fields == {"extra": 1} and event.events[1].unknown_fields == {"future": True}
    trace = MessageTrace("s", [event])
    assert trace.expected == 2 and trace.next_hop(event.egresses[0]) is None
    assert TraceEvent.decode(b'{"events": [{"type": [1]}, {"type": null}]}').events == []  # no type known: left out
    for bad in (b"not json", b"[1]", b'{"events": 3}'):
        with pytest.raises(MonitorResponseError):
            TraceEvent.decode(bad)


def test_an_older_server_is_refused_with_nothing_sent() -> None:
    import threading

    from tests.fakeserver import INFO, FakeServer, ScriptedConn

    after_handshake: list[bytes] = []
    finished = threading.Event()

    def script(conn: ScriptedConn) -> None:
        conn.send(INFO.replace(b'"2.99.0"', b'"2.10.9"'))
        conn.read_line()  # CONNECT
        assert conn.read_line() == b"PING"
        conn.send(b"PONG\r\n")
        try:
            while True:  # what the client sends after the handshake, until it closes
                after_handshake.append(conn.read_line())
        except (ConnectionError, OSError):
            finished.set()

    with FakeServer(script) as server:
        with nats.connect(server.url, allow_reconnect=False) as nc:
            with pytest.raises(nats.FeatureNotSupportedError, match=r"message tracing needs nats-server 2\.11\.0"):
                trace_message(nc, "x")
        assert finished.wait(10)
    assert not [line for line in after_handshake if line.split(b" ")[0] in (b"SUB", b"PUB", b"HPUB")]
