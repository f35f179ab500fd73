"""JetStream under the instrumentor: publish (sync and pipelined) -> pull -> process -> ack."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.semconv._incubating.attributes import messaging_attributes as M
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

import natsjs_sync as nats
import natsjs_sync.otel
from natsjs_sync.errors import BatchPublishError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.otel import attributes as A
from natsjs_sync.protocol.nuid import next_nuid

from .conftest import Telemetry


def test_publish_fetch_process_ack_is_one_trace(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    ack = js.publish(f"{name}.a", b"job", msg_id="m-1")
    cons = js.create_consumer(name, durable_name="worker", ack_policy="explicit")
    with cons.fetch(1, max_wait=10) as batch:
        msgs = list(batch)
    assert len(msgs) == 1
    with natsjs_sync.otel.process(msgs[0]):
        msgs[0].ack()
    pub = otel.span(f"publish {name}.a")
    recv = otel.span(f"receive {name}")
    proc = otel.span(f"process {name}")
    settle = otel.span(f"ack {name}")
    assert pub.kind is SpanKind.PRODUCER
    assert pub.attributes[M.MESSAGING_MESSAGE_ID] == "m-1"
    assert pub.attributes[A.NATS_STREAM] == name and pub.attributes[A.NATS_STREAM_SEQUENCE] == ack.seq
    assert [link.context.span_id for link in recv.links] == [pub.context.span_id]
    for span in (recv, proc):
        assert span.attributes[M.MESSAGING_CONSUMER_GROUP_NAME] == "worker"
        assert span.attributes[A.NATS_STREAM_SEQUENCE] == ack.seq
        assert span.attributes[A.NATS_CONSUMER_SEQUENCE] == 1
        assert span.attributes[A.NATS_DELIVERY_COUNT] == 1
        assert span.attributes[M.MESSAGING_MESSAGE_ID] == "m-1"
    assert proc.parent is not None and proc.parent.span_id == pub.context.span_id
    assert settle.parent is not None and settle.parent.span_id == proc.context.span_id
    assert settle.attributes[M.MESSAGING_OPERATION_TYPE] == "settle"
    # the conventions' kinds: a receive (asked for by the application) and a settle are CLIENT spans
    assert recv.kind is SpanKind.CLIENT and settle.kind is SpanKind.CLIENT and proc.kind is SpanKind.CONSUMER
    assert settle.attributes[A.NATS_ACK_KIND] == "ack"


def test_settle_kinds(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    for i in range(3):
        js.publish(f"{name}.k", str(i).encode())
    cons = js.create_consumer(name, durable_name="k", ack_policy="explicit")
    with cons.fetch(3, max_wait=10) as batch:
        a, b, c = list(batch)
    a.in_progress()
    a.nak()
    b.term("bad")
    c.ack_sync(timeout=10)
    kinds = sorted(s.attributes[A.NATS_ACK_KIND] for s in otel.spans()
                   if s.attributes and s.attributes.get(M.MESSAGING_OPERATION_TYPE) == "settle")
    assert kinds == ["ack_sync", "in_progress", "nak", "term"]


def test_refused_publish_records_the_error(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    js.publish(f"{name}.x", b"1")
    with pytest.raises(nats.WrongLastSequenceError):
        js.publish(f"{name}.x", b"2", expected_last_seq=99)
    failed = [s for s in otel.spans() if s.name == f"publish {name}.x" and s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1
    assert failed[0].attributes[error_attributes.ERROR_TYPE].endswith("WrongLastSequenceError")


def test_pipelined_publish_span_ends_when_the_ack_settles(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    good = js.publish_async(f"{name}.p", b"ok")
    bad = js.publish_async(f"{name}.p", b"no", expected_last_seq=1000)
    assert good.result(10).seq == 1
    with pytest.raises(nats.WrongLastSequenceError):
        bad.result(10)
    spans = otel.wait_for(lambda ss: sum(s.name == f"publish {name}.p" for s in ss) == 2)
    pubs = [s for s in spans if s.name == f"publish {name}.p"]
    ok = [s for s in pubs if s.status.status_code is not StatusCode.ERROR]
    refused = [s for s in pubs if s.status.status_code is StatusCode.ERROR]
    assert len(ok) == 1 and ok[0].attributes[A.NATS_STREAM_SEQUENCE] == 1
    assert len(refused) == 1 and refused[0].attributes[error_attributes.ERROR_TYPE].endswith("WrongLastSequenceError")


def test_pipelined_publish_carries_its_own_span_in_the_headers(otel: Telemetry, js: JetStream,
                                                               stream: Stream) -> None:
    name = stream.name
    js.publish_async(f"{name}.h", b"x").result(10)
    msg = js.get_msg(name, 1) if hasattr(js, "get_msg") else stream.get_msg(1)
    assert msg.headers is not None and "traceparent" in msg.headers
    pub = otel.span(f"publish {name}.h")
    assert msg.headers["traceparent"].split("-")[2] == format(pub.context.span_id, "016x")


def test_messages_iterator_and_consume_handler(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    js.publish(f"{name}.i", b"1")
    js.publish(f"{name}.i", b"2")
    cons = js.create_consumer(name, durable_name="iter", ack_policy="explicit")
    with cons.messages() as it:
        first = it.next(timeout=10)
        first.ack()
    recv = otel.span(f"receive {name}")
    assert recv.attributes[A.NATS_STREAM_SEQUENCE] == 1
    # A for loop over the iterator, the usual way to read it, records the same spans. On a consumer
    # of its own from message 2: the first iterator's prefetch holds message 2 unacked, and this
    # consumer would see it again only once its ack wait ran out.
    rest = js.create_consumer(name, durable_name="loop", ack_policy="explicit",
                              deliver_policy="by_start_sequence", opt_start_seq=2)
    with rest.messages() as it:
        for msg in it:
            msg.ack()
            break
    assert [s.attributes[A.NATS_STREAM_SEQUENCE] for s in otel.spans() if s.name == f"receive {name}"] == [1, 2]

    done = threading.Event()
    seen: list[int] = []

    def handler(msg: nats.Msg) -> None:
        seen.append(msg.metadata.sequence.stream)
        msg.ack()
        done.set()

    cons2 = js.create_consumer(name, durable_name="handler", ack_policy="explicit")
    ctx = cons2.consume(handler, stop_after=1)
    try:
        assert done.wait(10)
    finally:
        ctx.stop()
    proc = otel.span(f"process {name}")
    pub_spans = [s for s in otel.spans() if s.name == f"publish {name}.i"]
    assert proc.parent is not None and proc.parent.span_id in {s.context.span_id for s in pub_spans}
    acks = otel.wait_for(lambda ss: any(s.name == f"ack {name}" and s.parent is not None
                                        and s.parent.span_id == proc.context.span_id for s in ss))
    assert acks


def test_publishes_in_flight_metric(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    js.publish_async(f"{stream.name}.m", b"x").result(10)
    otel.span(f"publish {stream.name}.m")  # the ack's callback ends the span after counting
    metrics = otel.metrics()
    assert "nats.jetstream.publish.pending" in metrics
    sent = metrics["messaging.client.sent.messages"]
    # the stream the ack named, never the subject (unbounded): see test_metric_attributes_are_bounded
    assert any(attrs.get("messaging.nats.stream") == stream.name for attrs, _ in sent), sent


def test_push_consumers_and_nats_py_style_subscribe(otel: Telemetry, js: JetStream, stream: Stream) -> None:
    name = stream.name
    js.publish(f"{name}.push", b"1")
    pub = otel.span(f"publish {name}.push")
    # nats.go style push consumer: the handler runs in a process span, child of the producer
    done = threading.Event()
    pc = js.create_push_consumer(name, durable_name="pusher", deliver_subject=js.nc.new_inbox(),
                                 ack_policy="explicit")

    def handler(msg: nats.Msg) -> None:
        msg.ack()
        done.set()

    with pc.consume(handler):
        assert done.wait(10)
    proc = otel.span(f"process {name}")
    assert proc.parent is not None and proc.parent.span_id == pub.context.span_id
    # nats-py style js.subscribe without a callback: next_msg makes a receive span linked to the producer
    sub = js.subscribe(f"{name}.push")
    msg = sub.next_msg(timeout=10)
    msg.ack()
    recv = otel.span(f"receive {name}")
    assert [link.context.span_id for link in recv.links] == [pub.context.span_id]
    sub.unsubscribe()


def _batched_stream(js: JetStream, feature: str, **config: object) -> Stream:
    if not js.supports(feature):
        pytest.skip(f"{feature} needs a newer nats-server than {js.server_version}")
    name = "B" + next_nuid()
    return js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", **config)  # type: ignore[arg-type]


def test_an_atomic_batch_is_one_span_until_its_commit_is_acknowledged(otel: Telemetry, js: JetStream) -> None:
    st = _batched_stream(js, "atomic_batch", allow_atomic=True)
    try:
        with js.atomic_batch() as batch:
            for i in range(3):
                batch.add(f"{st.name}.a", b"%d" % i)
            assert not [s for s in otel.spans() if s.name == f"publish {st.name}.a"]  # open until the ack
            ack = batch.commit(f"{st.name}.a", b"last")
        span = otel.span(f"publish {st.name}.a")
        assert span.kind is SpanKind.PRODUCER and span.status.status_code is not StatusCode.ERROR
        assert span.attributes[M.MESSAGING_BATCH_MESSAGE_COUNT] == 4 == ack.batch_size
        assert span.attributes[A.NATS_BATCH_KIND] == "atomic" and span.attributes[A.NATS_BATCH_ID] == batch.batch_id
        assert span.attributes[A.NATS_STREAM] == st.name and span.attributes[A.NATS_STREAM_SEQUENCE] == ack.seq
        assert len([s for s in otel.spans() if s.name == f"publish {st.name}.a"]) == 1
        # every message carries the batch span's context
        stored = st.get_msg(1)
        assert stored.header("traceparent") is not None
        assert stored.header("traceparent").split("-")[2] == format(span.context.span_id, "016x")
        # a refused batch records the error
        js.publish(f"{st.name}.b", b"first")
        refused = js.atomic_batch()
        with pytest.raises(BatchPublishError):  # at the first message or at the commit, by server version
            refused.add(f"{st.name}.b", b"1", expected_last_seq=999)
            refused.add(f"{st.name}.b", b"2")
            refused.commit(f"{st.name}.b", b"3")
        # the single publish before it is "publish" too: pick the batch's
        failed = next(s for s in otel.spans() if s.name == f"publish {st.name}.b"
                      and s.attributes.get(A.NATS_BATCH_KIND) == "atomic")
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes[error_attributes.ERROR_TYPE].endswith("WrongLastSequenceError")
    finally:
        js.delete_stream(st.name)


def test_a_fast_batch_is_one_span_until_its_commit_is_acknowledged(otel: Telemetry, js: JetStream) -> None:
    st = _batched_stream(js, "fast_batch", allow_batched=True)
    try:
        with js.fast_batch(flow=10, timeout=10) as batch:
            for i in range(25):
                batch.add(f"{st.name}.x", b"%d" % i)
        span = otel.span(f"publish {st.name}.x")
        assert batch.result is not None and batch.result.batch_size == 25
        assert span.attributes[M.MESSAGING_BATCH_MESSAGE_COUNT] == 25
        assert span.attributes[A.NATS_BATCH_KIND] == "fast"
        assert span.status.status_code is not StatusCode.ERROR
        # refused at a failed check: the span ends with the error and what was stored
        failing = js.fast_batch(flow=100, timeout=10)
        for i in range(3):
            failing.add(f"{st.name}.y", b"%d" % i)
        failing.add(f"{st.name}.y", b"wrong", expected_last_seq=1)
        with pytest.raises(BatchPublishError):
            for _ in range(5):
                failing.add(f"{st.name}.y", b"after")
            failing.commit(f"{st.name}.y", b"end")
        failed = otel.span(f"publish {st.name}.y")
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes[error_attributes.ERROR_TYPE].endswith("WrongLastSequenceError")
        assert failed.attributes[M.MESSAGING_BATCH_MESSAGE_COUNT] == 3
    finally:
        js.delete_stream(st.name)
