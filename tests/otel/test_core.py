"""Core NATS under the instrumentor: publish -> callback, request -> reply, iterators, propagation."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.semconv._incubating.attributes import messaging_attributes as M
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import SpanKind

import natsjs_sync as nats
import natsjs_sync.otel
from natsjs_sync.client import Client
from natsjs_sync.otel import NatsjsSyncInstrumentor
from natsjs_sync.testing import NatsServer

from ..core.test_hostile_bytes import FOREIGN_HEADERS, RawConn
from .conftest import Telemetry


def test_publish_then_callback_is_a_child_of_the_producer(otel: Telemetry, nc: nats.Client) -> None:
    got: list[nats.Msg] = []
    done = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(msg)
        done.set()

    nc.subscribe("orders.*", queue="workers", cb=cb)
    nc.flush()
    nc.publish("orders.new", b"hello")
    assert done.wait(10)
    send = otel.span("publish orders.new")
    proc = otel.span("process orders.*")
    assert send.kind is SpanKind.PRODUCER and proc.kind is SpanKind.CONSUMER
    assert proc.parent is not None and proc.parent.span_id == send.context.span_id
    assert proc.context.trace_id == send.context.trace_id
    assert send.attributes[M.MESSAGING_SYSTEM] == "nats"
    assert send.attributes[M.MESSAGING_OPERATION_TYPE] == "send"
    assert send.attributes[M.MESSAGING_DESTINATION_NAME] == "orders.new"
    assert M.MESSAGING_MESSAGE_BODY_SIZE not in send.attributes  # opt-in, by the conventions
    assert send.attributes[server_attributes.SERVER_ADDRESS] == "127.0.0.1"
    assert isinstance(send.attributes[server_attributes.SERVER_PORT], int)
    assert M.MESSAGING_CLIENT_ID in send.attributes
    assert proc.attributes[M.MESSAGING_OPERATION_TYPE] == "process"
    assert proc.attributes[M.MESSAGING_DESTINATION_NAME] == "orders.new"
    assert proc.attributes[M.MESSAGING_DESTINATION_TEMPLATE] == "orders.*"
    assert proc.attributes[M.MESSAGING_CONSUMER_GROUP_NAME] == "workers"
    # the trace context travelled in the headers, W3C style
    assert got[0].headers is not None and got[0].headers["traceparent"].startswith("00-")


def test_request_reply_chain_and_temporary_names(otel: Telemetry, nc: nats.Client,
                                                 shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url, name="responder") as other:
        other.subscribe("svc.echo", cb=lambda m: m.respond(m.data.upper()))
        other.flush()
        assert nc.request("svc.echo", b"hi", timeout=10).data == b"HI"
    req = otel.span("request svc.echo")
    proc = otel.span("process svc.echo")
    resp = otel.span("respond _INBOX.>")  # a reply inbox is named by its template, never by its subject
    # The request's context is its message's creation context: PRODUCER, as any such send.
    assert req.kind is SpanKind.PRODUCER and resp.kind is SpanKind.PRODUCER
    assert proc.parent is not None and proc.parent.span_id == req.context.span_id
    assert resp.parent is not None and resp.parent.span_id == proc.context.span_id
    assert resp.attributes[M.MESSAGING_DESTINATION_TEMPORARY] is True
    assert resp.attributes[M.MESSAGING_DESTINATION_TEMPLATE] == "_INBOX.>"
    assert str(resp.attributes[M.MESSAGING_DESTINATION_NAME]).startswith("_INBOX.")


def test_a_request_of_the_nats_py_style_client_is_traced_as_the_native_one(otel: Telemetry,
                                                                          shared_server: NatsServer) -> None:
    """natsjs_sync.aio's Client is the native Client underneath: its request() passes through
    the instrumented Client.request (a span, and its context in the request's headers), as
    its publish() and subscribe() do."""
    from natsjs_sync.aio.client import Client as NatsPyClient

    seen: list[nats.Msg] = []
    with nats.connect(shared_server.url, name="responder") as other:
        other.subscribe("svc.aio", cb=lambda m: (seen.append(m), m.respond(b"ok")))
        other.flush()
        nc = NatsPyClient()
        nc.connect(shared_server.url)
        try:
            assert nc.request("svc.aio", b"hi", timeout=10).data == b"ok"
        finally:
            nc.close()
    req = otel.span("request svc.aio")
    assert req.kind is SpanKind.PRODUCER
    headers = seen[0].headers
    assert headers is not None and headers["traceparent"].split("-")[2] == format(req.context.span_id, "016x")


def test_a_reply_echoes_the_request_headers_with_its_own_trace_context(otel: Telemetry, nc: nats.Client,
                                                                       shared_server: NatsServer) -> None:
    """respond() without headers sends the request's back (nats-py's respond), but the trace
    context in them is the responder's span, not the requester's."""
    with nats.connect(shared_server.url, name="responder") as other:
        other.subscribe("svc.hdr", cb=lambda m: m.respond(b"ok"))
        other.flush()
        reply = nc.request("svc.hdr", b"hi", headers={"Order": "7"}, timeout=10)
    resp = otel.span("respond _INBOX.>")
    assert reply.headers is not None and reply.headers["Order"] == "7"
    assert reply.headers["traceparent"].split("-")[2] == format(resp.context.span_id, "016x")
    assert resp.kind is SpanKind.PRODUCER and not resp.links


def test_a_reply_echoes_what_it_can_send_of_another_clients_headers(otel: Telemetry, nc: nats.Client,
                                                                    shared_server: NatsServer) -> None:
    """A request whose headers hold one this client refuses to send (a blank inside a key,
    as nats-py sends): the traced reply still goes, with the rest and its own trace context."""
    errors: list[Exception] = []

    def answer(msg: nats.Msg) -> None:
        try:
            msg.respond(b"ok")
        except Exception as exc:
            errors.append(exc)

    nc.subscribe("svc.foreign", cb=answer)
    nc.flush()
    raw = RawConn(shared_server.port)
    try:
        block = FOREIGN_HEADERS
        raw.sock.sendall(b"SUB rep.foreign 1\r\nHPUB svc.foreign rep.foreign %d %d\r\n%b\r\n"
                         % (len(block), len(block) + 1, block + b"q"))
        _, reply_headers, payload = raw.next_hmsg()
    finally:
        raw.close()
    resp = otel.span("respond")  # a reply subject is temporary, and not an inbox of ours
    assert payload == b"ok" and errors == []
    assert b"Order: 7\r\n" in reply_headers and b"Bad Key" not in reply_headers
    assert format(resp.context.span_id, "016x").encode() in reply_headers


def test_no_responders_records_the_error(otel: Telemetry, nc: nats.Client) -> None:
    with pytest.raises(nats.NoRespondersError):
        nc.request("nobody.home", b"", timeout=5)
    span = otel.span("request nobody.home")
    assert span.attributes[error_attributes.ERROR_TYPE].endswith("NoRespondersError")
    assert span.status.status_code is trace.StatusCode.ERROR


def test_user_headers_win_and_are_not_mutated(otel: Telemetry, nc: nats.Client) -> None:
    sub = nc.subscribe("hdr")
    mine = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "X": "1"}
    tracer = otel.tracer_provider.get_tracer("t")
    with tracer.start_as_current_span("outer"):
        nc.publish("hdr", b"", headers=mine)
    assert mine == {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "X": "1"}
    got = sub.next_msg(timeout=10)
    assert got.headers is not None and got.headers["traceparent"] == mine["traceparent"]


def test_baggage_travels(otel: Telemetry, nc: nats.Client) -> None:
    sub = nc.subscribe("bag")
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        nc.publish("bag", b"x")
    finally:
        otel_context.detach(token)
    msg = sub.next_msg(timeout=10)
    assert baggage.get_baggage("tenant", natsjs_sync.otel.extract(msg.headers)) == "acme"


def test_iterator_receive_span_links_and_process_helper_is_a_child(otel: Telemetry, nc: nats.Client) -> None:
    sub = nc.subscribe("it.>")
    nc.publish("it.one", b"1")
    msg = sub.next_msg(timeout=10)
    with natsjs_sync.otel.process(msg) as span:
        assert span.is_recording()
    send = otel.span("publish it.one")
    recv = otel.span("receive it.>")
    proc = otel.span("process it.one")
    assert recv.attributes[M.MESSAGING_OPERATION_TYPE] == "receive"
    assert [link.context.span_id for link in recv.links] == [send.context.span_id]
    assert proc.parent is not None and proc.parent.span_id == send.context.span_id


def test_library_subscriptions_make_no_receive_spans(otel: Telemetry, nc: nats.Client) -> None:
    """Only what the application reads is a receive: internal next_msg calls (requests, JetStream) are not."""
    nc.request_many  # noqa: B018 - exists
    nc.subscribe("x", cb=lambda m: None)
    nc.flush()
    assert not [s for s in otel.spans() if s.name.startswith("receive")]


def test_uninstrument_restores_the_library_methods(nc: nats.Client) -> None:
    original = Client.publish
    inst = NatsjsSyncInstrumentor()
    inst.instrument()
    assert Client.publish is not original
    inst.uninstrument()
    assert Client.publish is original
    sub = nc.subscribe("plain")
    nc.publish("plain", b"")
    assert sub.next_msg(timeout=10).headers is None


def test_callbacks_wrapped_before_uninstrument_stop_tracing(otel: Telemetry, nc: nats.Client) -> None:
    inst = NatsjsSyncInstrumentor()
    seen = threading.Event()
    nc.subscribe("late", cb=lambda m: seen.set())
    nc.flush()
    inst.uninstrument()  # the fixture's instrumentation (one per process)
    otel.exporter.clear()
    nc.publish("late", b"")
    assert seen.wait(10)
    nc.flush()
    assert otel.spans() == []
    inst.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)


def test_client_state_metrics_stop_at_uninstrument_and_follow_a_new_instrumentation(
        shared_server: NatsServer) -> None:
    """The observable metrics report nothing once uninstrumented; instrumented again into the same
    meter provider (whose meter keeps the instruments made first, with their callbacks), they
    report the clients the new instrumentation sees."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    reader = InMemoryMetricReader()
    mp, tp = MeterProvider(metric_readers=[reader]), TracerProvider()

    def connected() -> list[object]:
        data = reader.get_metrics_data()
        return [] if data is None else [
            dict(p.attributes or {}).get("messaging.nats.client.name")
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == "nats.client.connection.state"
            for p in m.data.data_points  # type: ignore[attr-defined]
            if dict(p.attributes or {}).get("messaging.nats.connection.state") == "connected" and p.value]

    inst = NatsjsSyncInstrumentor()
    inst.instrument(tracer_provider=tp, meter_provider=mp)
    try:
        with nats.connect(shared_server.url, name="first") as first:
            first.publish("state.x", b"")
            assert connected() == ["first"]
            inst.uninstrument()
            assert connected() == []
            inst.instrument(tracer_provider=tp, meter_provider=mp)
            with nats.connect(shared_server.url, name="second") as second:
                second.publish("state.x", b"")
                assert connected() == ["second"]
    finally:
        inst.uninstrument()
        mp.shutdown()


def test_metrics_count_sent_consumed_and_durations(otel: Telemetry, nc: nats.Client) -> None:
    done = threading.Event()
    nc.subscribe("m.x", cb=lambda m: done.set())
    nc.flush()
    nc.publish("m.x", b"abc")
    assert done.wait(10)
    otel.span("process m.x")
    metrics = otel.metrics()
    sent = metrics["messaging.client.sent.messages"]
    assert any(attrs.get(M.MESSAGING_OPERATION_NAME) == "publish" and value == 1 for attrs, value in sent)
    consumed = metrics["messaging.client.consumed.messages"]
    assert any(attrs.get(M.MESSAGING_DESTINATION_SUBSCRIPTION_NAME) == "m.x" for attrs, _ in consumed)
    assert "messaging.client.operation.duration" in metrics
    assert "messaging.process.duration" in metrics
    states = {attrs["messaging.nats.connection.state"]: v for attrs, v in metrics["nats.client.connection.state"]
              if attrs.get("messaging.nats.client.name") == "test"}
    assert states["connected"] == 1 and states["closed"] == 0
    assert "nats.subscription.pending.messages" in metrics
    assert "nats.client.reconnects" in metrics


def test_hooks_enrich_spans(nc: nats.Client) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    done = threading.Event()
    inst = NatsjsSyncInstrumentor()
    inst.instrument(tracer_provider=tp,
                    publish_hook=lambda span, subject, payload, headers: span.set_attribute("app.len", len(payload)),
                    consume_hook=lambda span, msg: span.set_attribute("app.first", msg.data[:1].decode()))
    try:
        nc.subscribe("hook", cb=lambda m: done.set())
        nc.flush()
        nc.publish("hook", b"zz")
        assert done.wait(10)
        nc.flush()
        from tests.conftest import wait_until

        assert wait_until(lambda: len(exporter.get_finished_spans()) >= 2, 10)
        by_name = {s.name: s for s in exporter.get_finished_spans()}
        assert by_name["publish hook"].attributes["app.len"] == 2
        assert by_name["process hook"].attributes["app.first"] == "z"
    finally:
        inst.uninstrument()
        tp.shutdown()


def test_pending_and_slow_consumer_drops_are_observed(otel: Telemetry, nc: nats.Client) -> None:
    from tests.conftest import wait_until

    sub = nc.subscribe("slow.x", pending_msgs_limit=2)
    for _ in range(10):
        nc.publish("slow.x", b"12345")
    nc.flush()
    assert wait_until(lambda: sub.dropped >= 8, 10)

    def observed(name: str) -> object:
        return next(v for attrs, v in otel.metrics().get(name, [])
                    if attrs.get(M.MESSAGING_DESTINATION_SUBSCRIPTION_NAME) == "slow.x")

    assert observed("nats.subscription.pending.messages") == 2
    assert observed("nats.subscription.pending.bytes") == 10
    assert observed("nats.subscription.dropped.messages") == 8


def _series(otel: Telemetry, metric: str, op: str) -> list[tuple[dict[str, object], object]]:
    return [(attrs, v) for attrs, v in otel.metrics().get(metric, []) if attrs.get(M.MESSAGING_OPERATION_NAME) == op]


@pytest.mark.parametrize("responder_prefix", ["_APP.replies", None], ids=["same-prefix", "default-prefix"])
def test_replies_to_a_custom_inbox_prefix_stay_one_span_name_and_one_series(
        otel: Telemetry, shared_server: NatsServer, responder_prefix: str | None) -> None:
    """20 requests from a client with its own ``inbox_prefix``: every reply goes to a subject of
    its own, yet the replies are one span name and one metric series (a temporary destination),
    named by its template: the responder's own prefix, or the one it read in the reply subject."""
    options = {"inbox_prefix": responder_prefix} if responder_prefix else {}
    with nats.connect(shared_server.url, inbox_prefix="_APP.replies") as requester, \
            nats.connect(shared_server.url, **options) as responder:  # type: ignore[arg-type]
        sub = responder.subscribe("svc.prefixed", cb=lambda m: m.respond(b"ok"))
        responder.flush()
        for _ in range(20):
            assert requester.request("svc.prefixed", b"", timeout=10).data == b"ok"
        sub.unsubscribe()
        # a publish to an inbox of the client's own prefix is temporary too
        requester.publish(requester.new_inbox(), b"")
        requester.flush()
    spans = otel.wait_for(lambda ss: sum(s.name.startswith("respond") for s in ss) == 20)
    assert {s.name for s in spans if s.name.startswith("respond")} == {"respond _APP.replies.>"}
    assert {s.name for s in spans if s.name.startswith("publish")} == {"publish _APP.replies.>"}
    for span in spans:
        if span.name.startswith(("respond", "publish")):
            assert span.attributes[M.MESSAGING_DESTINATION_TEMPORARY] is True
    sent = _series(otel, "messaging.client.sent.messages", "respond")
    assert len(sent) == 1 and sent[0][1] == 20, sent
    assert M.MESSAGING_DESTINATION_NAME not in sent[0][0]
    assert sent[0][0].get(M.MESSAGING_DESTINATION_TEMPLATE) == "_APP.replies.>"
    durations = _series(otel, "messaging.client.operation.duration", "respond")
    assert len(durations) == 1 and durations[0][1] == 20


def test_a_reply_to_another_clients_prefix_is_temporary_by_its_template(otel: Telemetry, nc: nats.Client,
                                                                         shared_server: NatsServer) -> None:
    """A reply subject is made for one exchange whatever its prefix: never a span name or series of its own."""
    nc.subscribe("svc.other", cb=lambda m: m.respond(b"ok"))
    nc.flush()
    with nats.connect(shared_server.url, inbox_prefix="_ELSEWHERE") as requester:
        for _ in range(3):
            assert requester.request("svc.other", b"", timeout=10).data == b"ok"
    spans = otel.wait_for(lambda ss: sum(s.name == "respond _ELSEWHERE.>" for s in ss) == 3)
    assert {s.name for s in spans if s.name.startswith("respond")} == {"respond _ELSEWHERE.>"}
    sent = _series(otel, "messaging.client.sent.messages", "respond")
    assert len(sent) == 1 and sent[0][1] == 3


def test_jetstream_ack_and_direct_get_subjects_are_bounded(otel: Telemetry, nc: nats.Client) -> None:
    """Subjects made per message or per key (an ack reply, a direct get by subject) are named by a template."""
    for subject in ("$JS.ACK.ORDERS.worker.1.5.5.1700000000000000000.0",
                    "$JS.ACK.ORDERS.worker.1.6.6.1700000000000000001.0"):
        nc.publish(subject, b"+ACK")
    for key in ("a", "b"):
        with pytest.raises((nats.NoRespondersError, nats.TimeoutError)):
            nc.request(f"$JS.API.DIRECT.GET.KV_b.$KV.b.{key}", b"", timeout=2)
    spans = otel.wait_for(lambda ss: sum(s.name.startswith(("publish", "request")) for s in ss) == 4)
    assert {s.name for s in spans} == {"publish $JS.ACK.>", "request $JS.API.DIRECT.GET.KV_b.>"}


def test_go_canonical_traceparent_is_read_and_not_doubled(otel: Telemetry, nc: nats.Client) -> None:
    """``Traceparent`` as Go's http.Header writes it continues the trace, and no second one is added."""
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    got: list[nats.Msg] = []
    done = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(msg)
        done.set()

    nc.subscribe("go.hdr", cb=cb)
    nc.flush()
    nc.publish("go.hdr", b"", headers={"Traceparent": f"00-{trace_id}-{span_id}-01"})
    assert done.wait(10)
    raw = got[0].raw_headers or b""
    assert raw.lower().count(b"traceparent") == 1, raw
    proc = otel.span("process go.hdr")
    assert proc.parent is not None and format(proc.parent.span_id, "016x") == span_id
    assert format(proc.context.trace_id, "032x") == trace_id
    assert natsjs_sync.otel.extract({"TRACEPARENT": f"00-{trace_id}-{span_id}-01"}) != otel_context.Context()


def test_receive_spans_are_client_spans(otel: Telemetry, nc: nats.Client) -> None:
    sub = nc.subscribe("kinds.x")
    nc.publish("kinds.x", b"")
    sub.next_msg(timeout=10)
    assert otel.span("receive kinds.x").kind is SpanKind.CLIENT  # a pull: the application asked for it


def test_the_schema_url_names_the_conventions_version_followed() -> None:
    """The names, kinds and span names emitted are those of the declared version: the metric
    ``messaging.client.sent.messages`` and CLIENT receive spans are 1.28's, CLIENT settle spans 1.29's."""
    from natsjs_sync.otel import attributes

    version = tuple(int(p) for p in attributes.SCHEMA_VERSION.split("."))
    assert version >= (1, 29, 0)
    assert attributes.SCHEMA_URL == f"https://opentelemetry.io/schemas/{attributes.SCHEMA_VERSION}"


def test_spans_and_meters_carry_the_schema_url(otel: Telemetry, nc: nats.Client) -> None:
    from natsjs_sync.otel import attributes

    nc.publish("schema.x", b"")
    span = otel.span("publish schema.x")
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.schema_url == attributes.SCHEMA_URL


def test_typed_reads_of_a_subscription_make_receive_spans(otel: Telemetry, nc: nats.Client) -> None:
    """A typed view reads through the instrumented next_msg (not from the queue directly)."""
    sub = nc.subscribe("typed.kinds")
    reader = sub.typed(dict)
    nc.publish("typed.kinds", b"{}")
    assert reader.next_msg(timeout=10).value == {}
    assert otel.span("receive typed.kinds").kind is SpanKind.CLIENT
