"""Telemetry as the messaging conventions (of the declared schema) say, with bounded metric attributes."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import messaging_attributes as M
from opentelemetry.trace import SpanKind

import natsjs_sync as nats
import natsjs_sync.otel
from natsjs_sync.errors import InvalidCallbackTypeError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.micro import add_service
from natsjs_sync.micro.service import Group, Service
from natsjs_sync.otel import NatsjsSyncInstrumentor
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from .conftest import Telemetry

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
CALLER_TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def _series(otel: Telemetry, metric: str, op: str) -> list[dict[str, object]]:
    return [attrs for attrs, _ in otel.metrics().get(metric, []) if attrs.get(M.MESSAGING_OPERATION_NAME) == op]


# ---------------------------------------------------------------------- bounded metrics


def test_metric_attributes_are_bounded(otel: Telemetry, nc: nats.Client) -> None:
    """A subject per order is a span attribute, never a metric series of its own."""
    for i in range(5):
        nc.publish(f"orders.{i}", b"")
    nc.flush()
    otel.wait_for(lambda ss: sum(s.name.startswith("publish orders.") for s in ss) == 5)
    series = _series(otel, "messaging.client.sent.messages", "publish")
    assert len(series) == 1, series
    assert M.MESSAGING_DESTINATION_NAME not in series[0]


def test_ordered_and_ephemeral_consumer_names_stay_off_metrics(otel: Telemetry, js: JetStream,
                                                              stream: Stream) -> None:
    """Ordered and ephemeral consumers are named at random: their deliveries are one series;
    a durable consumer's name is bounded and kept."""
    js.publish(f"{stream.name}.a", b"1")
    for _ in range(3):
        ordered = js.ordered_consumer(stream.name)
        assert [m.data for m in ordered.fetch(1, max_wait=5)] == [b"1"]
    durable = js.create_consumer(stream.name, durable_name="billing", ack_policy="explicit")
    done = threading.Event()
    ctx = durable.consume(lambda m: (m.ack(), done.set()))
    try:
        assert done.wait(10)
    finally:
        ctx.stop()
    otel.wait_for(lambda ss: any(s.name == f"process {stream.name}" for s in ss))
    receives = _series(otel, "messaging.client.consumed.messages", "receive")
    assert len(receives) == 1, receives  # three consumers with three random names: one series
    assert "messaging.nats.consumer" not in receives[0] and M.MESSAGING_CONSUMER_GROUP_NAME not in receives[0]
    processed = _series(otel, "messaging.client.consumed.messages", "process")
    assert [p.get(M.MESSAGING_CONSUMER_GROUP_NAME) for p in processed] == ["billing"]


def test_push_consumers_read_with_next_msg_are_one_series(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    """nats-py style push subscriptions read with ``next_msg``: each has a deliver inbox of its
    own, which names neither the template nor the subscription on the metrics: one series."""
    js.publish(f"{stream.name}.a", b"1")
    for _ in range(3):
        sub = js.subscribe(f"{stream.name}.>")
        try:
            sub.next_msg(timeout=10).ack()
        finally:
            sub.unsubscribe()
    receives = _series(otel, "messaging.client.consumed.messages", "receive")
    assert len(receives) == 1, receives
    assert M.MESSAGING_DESTINATION_SUBSCRIPTION_NAME not in receives[0], receives
    assert not str(receives[0].get(M.MESSAGING_DESTINATION_TEMPLATE, "")).startswith("_INBOX."), receives


def test_subscriptions_to_inboxes_are_one_series_of_pending_counts(otel: Telemetry, nc: nats.Client) -> None:
    for _ in range(3):
        nc.subscribe(nc.new_inbox())
    nc.subscribe("named.sub")
    pending = otel.metrics()["nats.subscription.pending.messages"]
    names = [attrs.get(M.MESSAGING_DESTINATION_SUBSCRIPTION_NAME) for attrs, _ in pending]
    assert "named.sub" in names and not [n for n in names if str(n).startswith("_INBOX.")], names
    assert [attrs.get(M.MESSAGING_DESTINATION_TEMPLATE) for attrs, _ in pending].count("_INBOX.>") == 1


def test_subscriptions_to_inboxes_of_a_custom_prefix_are_one_series_of_pending_counts(
        otel: Telemetry, shared_server: NatsServer) -> None:
    """A client with its own ``inbox_prefix``: its inbox subscriptions are one series too, by its
    prefix's template, never one per inbox subject."""
    with nats.connect(shared_server.url, inbox_prefix="_MINE.app") as mine:
        for _ in range(3):
            mine.subscribe(mine.new_inbox())
        pending = otel.metrics()["nats.subscription.pending.messages"]
    names = [attrs.get(M.MESSAGING_DESTINATION_SUBSCRIPTION_NAME) for attrs, _ in pending]
    assert not [n for n in names if str(n).startswith("_MINE.")], names
    assert [attrs.get(M.MESSAGING_DESTINATION_TEMPLATE) for attrs, _ in pending].count("_MINE.app.>") == 1


def test_a_publish_to_another_clients_reply_inbox_is_temporary(otel: Telemetry, nc: nats.Client,
                                                               shared_server: NatsServer) -> None:
    """A reply made with a plain publish to the reply subject of a request from a client with
    another inbox prefix: the prefix, read in the reply subject, names it by its template."""
    def answer(msg: nats.Msg) -> None:
        nc.publish(msg.reply, b"ok")

    nc.subscribe("svc.manual", cb=answer)
    nc.flush()
    with nats.connect(shared_server.url, inbox_prefix="_THEIRS.app") as requester:
        for _ in range(3):
            assert requester.request("svc.manual", b"", timeout=10).data == b"ok"
    spans = otel.wait_for(lambda ss: sum(s.name == "publish _THEIRS.app.>" for s in ss) == 3)
    for span in spans:
        if span.name == "publish _THEIRS.app.>":
            assert span.attributes[M.MESSAGING_DESTINATION_TEMPORARY] is True
    assert [s for s in _series(otel, "messaging.client.sent.messages", "publish")
            if s.get(M.MESSAGING_DESTINATION_TEMPLATE) == "_THEIRS.app.>"]



def test_answers_to_requesters_of_many_prefixes_stay_a_bounded_number_of_series(
        otel: Telemetry, nc: nats.Client, shared_server: NatsServer) -> None:
    """Another client sends 100 requests with reply subjects under 100 inbox prefixes (its choice)
    and the application answers each: the metrics of its answers are at most 64 templates and
    one series without, never a series per prefix."""
    nc.subscribe("svc.crowd", cb=lambda m: m.respond(b"ok"))
    nc.flush()
    with nats.connect(shared_server.url) as other:
        for i in range(100):
            other.publish("svc.crowd", b"", reply=f"_P{i}.{next_nuid()}")
        other.flush()
        otel.wait_for(lambda ss: sum(s.name.startswith("respond") for s in ss) == 100)
    answers = _series(otel, "messaging.client.sent.messages", "respond")
    templates = [s.get(M.MESSAGING_DESTINATION_TEMPLATE) for s in answers]
    assert len(answers) == 65 and templates.count(None) == 1, templates


def test_reply_subjects_of_many_prefixes_do_not_crowd_out_a_requester(
        otel: Telemetry, nc: nats.Client, shared_server: NatsServer) -> None:
    """Another client sends 100 messages with reply subjects under 100 inbox prefixes, which the
    application does not answer: a requester coming after them is still named by its prefix's
    template when the application answers it with a plain publish."""
    seen = threading.Semaphore(0)
    nc.subscribe("svc.ignored", cb=lambda m: seen.release())
    nc.subscribe("svc.manual2", cb=lambda m: nc.publish(m.reply, b"ok"))
    nc.flush()
    with nats.connect(shared_server.url) as other:
        for i in range(100):
            other.publish("svc.ignored", b"", reply=f"_Q{i}.{next_nuid()}")
        other.flush()
        for _ in range(100):
            assert seen.acquire(timeout=10)
    with nats.connect(shared_server.url, inbox_prefix="_LATE.app") as requester:
        assert requester.request("svc.manual2", b"", timeout=10).data == b"ok"
    assert otel.span("publish _LATE.app.>").attributes[M.MESSAGING_DESTINATION_TEMPORARY] is True


def test_a_reply_subject_from_another_client_never_makes_ordinary_subjects_temporary(
        otel: Telemetry, nc: nats.Client, shared_server: NatsServer) -> None:
    """Any client may send any reply subject: one shaped like an inbox under ``orders`` teaches
    the prefix, and a publish to an inbox under it is temporary, but ``orders.created`` (no NUID
    after the prefix) keeps its own name, on the span and off the template."""
    sub = nc.subscribe("work.poisoned")
    nc.flush()
    with nats.connect(shared_server.url) as other:
        other.publish("work.poisoned", b"", reply="orders.AAAAAAAAAAAAAAAAAAAAAA")
        other.flush()
    assert sub.next_msg(timeout=10).reply == "orders.AAAAAAAAAAAAAAAAAAAAAA"
    nc.publish("orders.created", b"")
    nc.publish("orders.BBBBBBBBBBBBBBBBBBBBBB", b"")
    created = otel.span("publish orders.created")
    assert M.MESSAGING_DESTINATION_TEMPORARY not in created.attributes
    assert M.MESSAGING_DESTINATION_TEMPLATE not in created.attributes
    inbox = otel.span("publish orders.>")
    assert inbox.attributes[M.MESSAGING_DESTINATION_NAME] == "orders.BBBBBBBBBBBBBBBBBBBBBB"
    assert inbox.attributes[M.MESSAGING_DESTINATION_TEMPORARY] is True


# ---------------------------------------------------------------------- a caller's traceparent



def test_a_callers_trace_context_gets_no_field_of_ours_beside_it(otel: Telemetry, nc: nats.Client) -> None:
    """The fields of one trace context go together: beside a caller's valid ``traceparent`` no
    ``tracestate`` of the sender's own trace is added, and a caller's ``tracestate`` beside a
    malformed ``traceparent`` (which ours replaces) does not stay to describe our context."""
    sub = nc.subscribe("relay.state")
    nc.flush()
    ours = trace.SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True,
                             trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
                             trace_state=trace.TraceState([("ours", "1")]))
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("relay", context=trace.set_span_in_context(trace.NonRecordingSpan(ours))):
        nc.publish("relay.state", b"", headers={"Traceparent": CALLER_TRACEPARENT})
        nc.publish("relay.state", b"", headers={"traceparent": "garbage", "tracestate": "theirs=1"})
    with tracer.start_as_current_span("fresh"):  # a new trace: no tracestate of ours
        nc.publish("relay.state", b"", headers={"traceparent": "garbage", "TraceState": "theirs=1"})
    kept = sub.next_msg(timeout=10).headers
    assert kept is not None and kept.get("Traceparent") == CALLER_TRACEPARENT
    assert [k for k in kept if k.lower() == "tracestate"] == []
    replaced = sub.next_msg(timeout=10).headers
    assert replaced is not None and replaced.get("traceparent") != "garbage"
    assert replaced.get("tracestate") == "ours=1"
    fresh = sub.next_msg(timeout=10).headers
    assert fresh is not None and fresh.get("traceparent") != "garbage"
    assert [k for k in fresh if k.lower() in ("traceparent", "tracestate")] == ["traceparent"]


def test_a_callers_traceparent_is_the_creation_context_linked_from_the_send(otel: Telemetry,
                                                                          nc: nats.Client) -> None:
    """Relaying a message with its traceparent: the message keeps it, the send span links to it
    (its own context is not the creation context), a publish stays PRODUCER, a request is CLIENT."""
    sub = nc.subscribe("relay.x")
    nc.subscribe("relay.req", cb=lambda m: m.respond(b"ok"))
    nc.flush()
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("relay"):
        nc.publish("relay.x", b"", headers={"TraceParent": CALLER_TRACEPARENT})
        assert nc.request("relay.req", b"", headers={"traceparent": CALLER_TRACEPARENT}, timeout=10).data == b"ok"
    got = sub.next_msg(timeout=10)
    assert got.raw_headers is not None and got.raw_headers.lower().count(b"traceparent") == 1
    assert natsjs_sync.otel.extract(got.headers) is not None
    assert CALLER_TRACEPARENT.encode() in got.raw_headers
    relay = otel.span("relay")
    for name, kind in (("publish relay.x", SpanKind.PRODUCER), ("request relay.req", SpanKind.CLIENT)):
        span = otel.span(name)
        assert span.kind is kind, name
        assert [(format(li.context.trace_id, "032x"), format(li.context.span_id, "016x")) for li in span.links] \
            == [(CALLER_TRACE, CALLER_SPAN)], name
        assert span.parent is not None and span.parent.span_id == relay.context.span_id


@pytest.mark.parametrize("name", ["traceparent", "TRACEPARENT"])
def test_an_invalid_traceparent_is_replaced_not_doubled(otel: Telemetry, nc: nats.Client, name: str) -> None:
    sub = nc.subscribe("bad.tp")
    nc.publish("bad.tp", b"", headers={name: "00-not-a-context", "X": "1"})
    got = sub.next_msg(timeout=10)
    raw = (got.raw_headers or b"").lower()
    assert raw.count(b"traceparent") == 1, raw
    send = otel.span("publish bad.tp")
    assert got.headers is not None and got.headers["X"] == "1"
    assert f"{send.context.trace_id:032x}-{send.context.span_id:016x}".encode() in raw
    assert send.kind is SpanKind.PRODUCER and not send.links


# ---------------------------------------------------------------------- process() in an ambient span


def test_process_inside_an_ambient_span_is_its_child_and_links_to_the_creation_context(
        otel: Telemetry, nc: nats.Client) -> None:
    sub = nc.subscribe("amb.x")
    nc.publish("amb.x", b"")
    msg = sub.next_msg(timeout=10)
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("batch job"), natsjs_sync.otel.process(msg):
        pass
    send = otel.span("publish amb.x")
    job = otel.span("batch job")
    proc = otel.span("process amb.x")
    assert proc.parent is not None and proc.parent.span_id == job.context.span_id
    assert [li.context.span_id for li in proc.links] == [send.context.span_id]


# ---------------------------------------------------------------------- names


def test_nats_specific_attributes_are_under_messaging_nats(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.a", b"1", msg_id="one")
    js.publish(f"{stream.name}.a", b"1", msg_id="one")  # a duplicate
    consumer = js.create_consumer(stream.name, durable_name="names", ack_policy="explicit")
    with consumer.fetch(1, max_wait=5) as batch:
        for msg in batch:
            with natsjs_sync.otel.process(msg):
                msg.ack_sync()
    spans = otel.wait_for(lambda ss: any(s.name == f"ack_sync {stream.name}" for s in ss))
    keys = {key for span in spans for key in (span.attributes or {})}
    assert {"messaging.nats.stream", "messaging.nats.duplicate", "messaging.nats.ack.kind"} <= keys
    assert not [k for k in keys if k.startswith("nats.")], keys
    events = {key for span in spans for e in span.events for key in (e.attributes or {})}
    assert not [k for k in events if k.startswith("nats.")], events


def test_settle_spans_carry_the_destination(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    js.publish(f"{stream.name}.paid", b"1")
    consumer = js.create_consumer(stream.name, durable_name="settle", ack_policy="explicit")
    with consumer.fetch(1, max_wait=5) as batch:
        for msg in batch:
            msg.ack()
    ack = otel.span(f"ack {stream.name}")
    assert ack.attributes[M.MESSAGING_DESTINATION_NAME] == f"{stream.name}.paid"
    assert ack.attributes[M.MESSAGING_OPERATION_TYPE] == "settle"
    assert ack.attributes["messaging.nats.stream"] == stream.name


@pytest.mark.parametrize("otel", [{}, {"message_body_size": True}], indirect=True, ids=["default", "opted-in"])
def test_message_body_size_is_opt_in(otel: Telemetry, nc: nats.Client, request: pytest.FixtureRequest) -> None:
    sub = nc.subscribe("size.x")
    nc.publish("size.x", b"12345")
    sub.next_msg(timeout=10)
    opted_in = "opted-in" in request.node.callspec.id
    for name in ("publish size.x", "receive size.x"):
        span = otel.span(name)
        assert span.attributes.get(M.MESSAGING_MESSAGE_BODY_SIZE) == (5 if opted_in else None), name


# ---------------------------------------------------------------------- uninstrument, services


def test_uninstrument_leaves_the_service_classes_as_they_were(otel: Telemetry) -> None:
    inst = NatsjsSyncInstrumentor()
    inst.uninstrument()  # the fixture's instrumentation (one per process)
    try:
        assert "add_endpoint" not in Service.__dict__ and "add_endpoint" not in Group.__dict__
        assert not hasattr(Service._add_endpoint, "__wrapped__")
    finally:
        inst.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)


def test_a_batch_iterator_made_before_uninstrument_works_and_records_nothing(
        otel: Telemetry, js: JetStream, stream: Stream) -> None:
    for i in range(3):
        js.publish(f"{stream.name}.a", str(i).encode())
    consumer = js.create_consumer(stream.name, durable_name="it", ack_policy="none")
    batch = consumer.fetch(3, max_wait=5)
    messages = iter(batch)
    assert next(messages).data == b"0"
    inst = NatsjsSyncInstrumentor()
    inst.uninstrument()
    try:
        otel.exporter.clear()
        assert [m.data for m in messages] == [b"1", b"2"]
        assert otel.spans() == []
    finally:
        inst.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)


def test_service_handler_span_is_server_and_async_call_objects_are_refused(otel: Telemetry,
                                                                           nc: nats.Client) -> None:
    class AsyncCall:
        async def __call__(self, req: object) -> None:
            return None

    svc = add_service(nc, name="kinds", version="1.0.0")
    try:
        with pytest.raises(InvalidCallbackTypeError):
            svc.add_endpoint("never", handler=AsyncCall())  # type: ignore[arg-type]
        svc.add_endpoint("echo", handler=lambda req: req.respond(req.data), subject="kinds.echo")
        assert nc.request("kinds.echo", b"hi", timeout=10).data == b"hi"
        server = otel.span("echo")
        assert server.kind is SpanKind.SERVER
        req = otel.span("request kinds.echo")
        assert server.parent is not None and server.parent.span_id == req.context.span_id
    finally:
        svc.stop()


def test_a_batch_links_to_the_creation_context_of_a_relayed_message(otel: Telemetry, js: JetStream) -> None:
    name = "REL" + next_nuid()
    try:
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_atomic=True)
    except nats.FeatureNotSupportedError:
        pytest.skip("atomic batches need nats-server 2.12")
    try:
        with js.atomic_batch() as batch:
            batch.add(f"{name}.a", b"own")
            batch.commit(f"{name}.a", b"relayed", headers={"traceparent": CALLER_TRACEPARENT})
        span = otel.span(f"publish {name}.a")
        assert [format(li.context.span_id, "016x") for li in span.links] == [CALLER_SPAN]
        stored = js.stream(name).get_msg(2)
        assert stored.header("traceparent") == CALLER_TRACEPARENT  # the relayed message keeps its own
    finally:
        js.delete_stream(name)
