"""Instrumentation never changes what a call does: bad headers and trace headers that would not fit.

Each case runs against a real server, uninstrumented first and then
instrumented, and compares what the caller sees (the exception's class and
text) and what a subscriber receives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.otel import NatsjsSyncInstrumentor
from natsjs_sync.protocol.headers import encode_headers
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from .conftest import Telemetry

BAD_HEADERS: dict[str, Any] = {
    "colon in a name": {"A:B": "1"},
    "space in a name": {"A B": "1"},
    "int value": {"X": 1},
    "int message id": {"Nats-Msg-Id": 5},
    "not a mapping": [("X", "1")],
    "a str": "X: 1",
}

Send = Callable[[nats.Client, JetStream, str, Any], Any]
SENDS: dict[str, Send] = {
    "publish": lambda nc, js, subject, h: nc.publish(subject, b"x", headers=h),
    "request": lambda nc, js, subject, h: nc.request(subject, b"x", headers=h, timeout=5),
    "js.publish": lambda nc, js, subject, h: js.publish(subject, b"x", headers=h),
    "js.publish_async": lambda nc, js, subject, h: js.publish_async(subject, b"x", headers=h).result(10),
}


def _outcome(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as exc:
        return f"{type(exc).__qualname__}: {exc}"
    return "ok"


@pytest.fixture
def stream_subject(js: JetStream) -> Iterator[str]:
    name = "U" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    yield f"{name}.x"
    js.delete_stream(name)


def _nothing_sent_before_sentinel(nc: nats.Client, sub: nats.Subscription, subject: str) -> None:
    """What the subscriber gets first is the sentinel published after the bad call: the bad call sent nothing."""
    nc.publish(subject, b"sentinel")
    assert sub.next_msg(timeout=10).data == b"sentinel"


@pytest.mark.parametrize("send", SENDS.values(), ids=SENDS.keys())
@pytest.mark.parametrize("headers", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_bad_headers_raise_the_same_error_and_send_nothing(
        nc: nats.Client, js: JetStream, stream_subject: str, send: Send, headers: Any) -> None:
    sub = nc.subscribe(stream_subject)
    nc.flush()
    plain = _outcome(lambda: send(nc, js, stream_subject, headers))
    assert plain.startswith("BadHeaderError"), plain
    _nothing_sent_before_sentinel(nc, sub, stream_subject)

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = NatsjsSyncInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        assert _outcome(lambda: send(nc, js, stream_subject, headers)) == plain
        _nothing_sent_before_sentinel(nc, sub, stream_subject)
        # refused before anything was traced: no span of a send that never happened, only the sentinel's
        sends = [s.name for s in exporter.get_finished_spans() if s.name.startswith(("publish", "request"))]
        assert sends == [f"publish {stream_subject}"]
    finally:
        inst.uninstrument()
        provider.shutdown()


# ---------------------------------------------------------------------- trace headers and max_payload

MAX_PAYLOAD = 4096


@pytest.fixture(scope="module")
def small_server() -> Iterator[NatsServer]:
    with NatsServer(config={"max_payload": MAX_PAYLOAD}) as server:
        yield server


def _skipped(otel: Telemetry) -> int:
    return sum(int(v) for _, v in otel.metrics().get("nats.client.trace_context.skipped", []))  # type: ignore[call-overload]


def test_a_message_that_fits_only_without_trace_headers_is_sent_without_them(
        otel: Telemetry, small_server: NatsServer) -> None:
    """A payload of exactly max_payload is accepted uninstrumented: instrumented, it is too (the trace
    context is left out and counted), where adding it made the publish fail with MaxPayloadError."""
    with nats.connect(small_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="BIG", subjects=["bigjs.>"], storage="memory")
        sub = nc.subscribe("big.core")
        full = b"x" * MAX_PAYLOAD
        nc.publish("big.core", full)
        got = sub.next_msg(timeout=10)
        assert got.data == full and got.raw_headers is None  # the same bytes as uninstrumented
        # a JetStream publish (and a pipelined one) with the library's own headers (msg_id) near the limit
        with_id = b"y" * (MAX_PAYLOAD - 40)
        assert js.publish("bigjs.x", with_id, msg_id="m-1").seq == 1
        assert js.publish_async("bigjs.x", with_id, msg_id="m-2").result(10).seq == 2
        assert _skipped(otel) == 3
        # one byte too many is refused as uninstrumented: the same error, the same text
        with pytest.raises(nats.MaxPayloadError, match=f"message of {MAX_PAYLOAD + 1} bytes"):
            nc.publish("big.core", full + b"x")
        assert _skipped(otel) == 3  # not sent at all: not counted as sent without the trace context
        # a message with room to spare still carries the trace context
        nc.publish("big.core", b"small")
        assert "traceparent" in (sub.next_msg(timeout=10).headers or {})
        js.delete_stream("BIG")


def test_a_batch_message_near_max_payload_goes_without_trace_headers(
        otel: Telemetry, small_server: NatsServer) -> None:
    with nats.connect(small_server.url) as nc:
        js = nc.jetstream()
        try:
            js.create_stream(name="BATCH", subjects=["batch.>"], storage="memory", allow_atomic=True)
        except nats.FeatureNotSupportedError:
            pytest.skip("atomic batches need nats-server 2.12")
        try:
            with js.atomic_batch() as batch:
                batch.add("batch.a", b"small")
                # exactly max_payload with the batch's own headers, as the batch sends it
                own = len(encode_headers({"Nats-Batch-Id": batch.batch_id, "Nats-Batch-Sequence": "2"}))
                batch.add("batch.b", b"z" * (MAX_PAYLOAD - own))
                ack = batch.commit("batch.c", b"last")
            assert ack.batch_size == 3
            assert _skipped(otel) == 1
        finally:
            js.delete_stream("BATCH")


def _commit_near_max_payload(js: JetStream, subject: str, msg_id: str) -> str:
    """An atomic batch whose commit, with a long ``msg_id``, is exactly max_payload as the batch sends it."""
    def run() -> Any:
        with js.atomic_batch() as batch:
            batch.add(subject, b"small")
            own = len(encode_headers({"Nats-Msg-Id": msg_id, "Nats-Batch-Id": batch.batch_id,
                                      "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1"}))
            return batch.commit(subject, b"z" * (MAX_PAYLOAD - own), msg_id=msg_id).batch_size
    return _outcome(run)


def test_a_batch_message_whose_options_fill_max_payload_goes_without_trace_headers(
        small_server: NatsServer) -> None:
    """The headers a batch message's options make (a long ``msg_id``) count: a commit that fits
    max_payload uninstrumented is stored instrumented too, where the trace context made it fail
    with MaxPayloadError after the batch was over."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    with nats.connect(small_server.url) as nc:
        js = nc.jetstream()
        try:
            js.create_stream(name="BATCHOPT", subjects=["batchopt.>"], storage="memory", allow_atomic=True)
        except nats.FeatureNotSupportedError:
            pytest.skip("atomic batches need nats-server 2.12")
        try:
            assert _commit_near_max_payload(js, "batchopt.a", "a" * 600) == "ok"
            reader = InMemoryMetricReader()
            inst = NatsjsSyncInstrumentor()
            inst.instrument(tracer_provider=TracerProvider(), meter_provider=MeterProvider(metric_readers=[reader]))
            try:
                assert _commit_near_max_payload(js, "batchopt.b", "b" * 600) == "ok"
                # the small first message carried the trace context, the commit went without it
                stream = js.stream("BATCHOPT")
                assert stream.get_msg(3).header("traceparent") is not None
                assert stream.get_msg(4).header("traceparent") is None
                skipped = reader.get_metrics_data()
                assert skipped is not None and "nats.client.trace_context.skipped" in skipped.to_json()
            finally:
                inst.uninstrument()
        finally:
            js.delete_stream("BATCHOPT")
