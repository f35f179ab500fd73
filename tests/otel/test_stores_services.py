"""KV, object store and services under the instrumentor: one span per operation, in the caller's trace."""

from __future__ import annotations

import pytest
from opentelemetry.semconv._incubating.attributes import messaging_attributes as M
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

import natsjs_sync as nats
from natsjs_sync.micro import ServiceError, add_service
from natsjs_sync.otel import attributes as A
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from .conftest import Telemetry


@pytest.mark.parametrize("otel", [{"message_body_size": True}], indirect=True)
def test_kv_put_get_watch(otel: Telemetry, nc: nats.Client) -> None:
    js = nc.jetstream()
    bucket = "B" + next_nuid()
    kv = js.create_key_value(bucket=bucket)
    try:
        tracer = otel.tracer_provider.get_tracer("app")
        with tracer.start_as_current_span("handler") as root:
            rev = kv.put("user.1", b"blue")
            entry = kv.get("user.1")
            watcher = kv.watch("user.*")
        assert entry.value == b"blue"
        watcher.stop()
        assert kv.keys() == ["user.1"] and len(kv.history("user.1")) == 1
        history = otel.span(f"history {bucket}")
        assert history.attributes[A.NATS_KV_KEY] == "user.1"
        assert not [s for s in otel.spans() if s.name.startswith("receive KV_")]  # its entries are the one span
        put, get = otel.span(f"put {bucket}"), otel.span(f"get {bucket}")
        watch = otel.span(f"watch {bucket}")
        # a write carries its span's context (its creation context): PRODUCER; reads and the watch: CLIENT
        assert put.kind is SpanKind.PRODUCER and get.kind is SpanKind.CLIENT and watch.kind is SpanKind.CLIENT
        # a watch moves no message itself: none of the conventions' operation types (it is no "create")
        assert M.MESSAGING_OPERATION_TYPE not in watch.attributes
        assert watch.attributes[M.MESSAGING_OPERATION_NAME] == "watch"
        for span in (put, get, watch):
            assert span.parent is not None and span.parent.span_id == root.get_span_context().span_id
            assert span.attributes[A.NATS_KV_BUCKET] == bucket
        assert put.attributes[A.NATS_KV_KEY] == "user.1" and put.attributes[A.NATS_STREAM_SEQUENCE] == rev
        assert get.attributes[M.MESSAGING_MESSAGE_BODY_SIZE] == 4
        # one span per operation: what KV does underneath records nothing of its own
        assert not [s for s in otel.spans() if s.name.startswith("publish $KV.")]
        with pytest.raises(nats.KeyNotFoundError):
            kv.get("nobody")
        missing = [s for s in otel.spans() if s.name == f"get {bucket}" and s.status.status_code is StatusCode.ERROR]
        assert missing and missing[0].attributes[error_attributes.ERROR_TYPE].endswith("KeyNotFoundError")
    finally:
        js.delete_key_value(bucket)


@pytest.mark.parametrize("otel", [{"message_body_size": True}], indirect=True)
def test_object_put_get_one_span_each(otel: Telemetry, nc: nats.Client) -> None:
    js = nc.jetstream()
    bucket = "O" + next_nuid()
    obs = js.create_object_store(bucket)
    data = bytes(range(256)) * 1000  # several chunks
    try:
        obs.put("blob", data, chunk_size=32_000)
        with obs.get("blob") as result:
            assert result.read() == data
        put = otel.span(f"put {bucket}")
        get = otel.span(f"get {bucket}")
        assert put.attributes[A.NATS_OBJECT_NAME] == "blob"
        assert put.attributes[M.MESSAGING_MESSAGE_BODY_SIZE] == len(data)
        assert get.attributes[A.NATS_OBJECT_NAME] == "blob"
        assert [s.name for s in otel.spans()].count(f"put {bucket}") == 1
        assert not [s for s in otel.spans() if s.name.startswith(("publish $O.", "receive OBJ_"))]
    finally:
        js.delete_object_store(bucket)


def test_service_endpoint_is_a_server_span_child_of_the_request(otel: Telemetry, nc: nats.Client,
                                                                shared_server: NatsServer) -> None:
    def echo(req: object) -> None:
        req.respond(req.data)  # type: ignore[attr-defined]

    def broken(req: object) -> None:
        raise ServiceError("418", "teapot")

    svc = add_service(nc, name="otelsvc", version="1.0.0")
    try:
        svc.add_endpoint("echo", echo, subject="otelsvc.echo")
        svc.add_endpoint("broken", broken, subject="otelsvc.broken")
        nc.flush()
        with nats.connect(shared_server.url, name="caller") as caller:
            assert caller.request("otelsvc.echo", b"hi", timeout=10).data == b"hi"
            caller.request("otelsvc.broken", b"", timeout=10)
        req = otel.span("request otelsvc.echo")
        server = otel.span("echo")
        reply = otel.span("respond _INBOX.>")
        assert server.kind is SpanKind.SERVER
        assert server.parent is not None and server.parent.span_id == req.context.span_id
        assert server.attributes[M.MESSAGING_CONSUMER_GROUP_NAME] == "q"
        assert reply.parent is not None and reply.parent.span_id == server.context.span_id
        failed = otel.span("broken")
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes[error_attributes.ERROR_TYPE].endswith("ServiceError")
    finally:
        svc.stop()


def test_each_kv_watch_update_is_a_receive_span_child_of_its_writer(otel: Telemetry, nc: nats.Client) -> None:
    js = nc.jetstream()
    bucket = "B" + next_nuid()
    kv = js.create_key_value(bucket=bucket)
    try:
        watcher = kv.watch("user.*", ignore_deletes=True)
        assert watcher.next(timeout=10) is None  # nothing there yet
        tracer = otel.tracer_provider.get_tracer("app")
        with tracer.start_as_current_span("writer"):
            kv.put("user.1", b"blue")
            kv.delete("user.1")  # skipped by this watcher: no span
            rev = kv.put("user.2", b"green")
        entries = [watcher.next(timeout=10), watcher.next(timeout=10)]
        watcher.stop()
        assert [e.key for e in entries if e is not None] == ["user.1", "user.2"]
        puts = [s for s in otel.spans() if s.name == f"put {bucket}"]
        updates = [s for s in otel.spans() if s.name == f"receive {bucket}"]
        assert len(puts) == 2 and len(updates) == 2
        for put, update in zip(puts, updates, strict=True):
            assert update.kind is SpanKind.CLIENT  # read by the application's call: a receive
            assert update.parent is not None and update.parent.span_id == put.context.span_id
            assert update.attributes[M.MESSAGING_OPERATION_TYPE] == "receive"
            assert update.attributes[A.NATS_KV_BUCKET] == bucket
            assert update.attributes[A.NATS_KV_KEY] == put.attributes[A.NATS_KV_KEY]
        assert updates[1].attributes[A.NATS_STREAM_SEQUENCE] == rev
    finally:
        js.delete_key_value(bucket)


def test_list_keys_is_one_span_as_keys_is(otel: Telemetry, nc: nats.Client) -> None:
    """Streaming the keys records one span, like collecting them: none per key, however they are read."""
    js = nc.jetstream()
    bucket = "B" + next_nuid()
    kv = js.create_key_value(bucket=bucket)
    try:
        for i in range(5):
            kv.put(f"k.{i}", b"v")
        assert sorted(kv.keys()) == [f"k.{i}" for i in range(5)]
        with kv.list_keys() as lister:
            listed = list(lister)
        assert sorted(listed) == [f"k.{i}" for i in range(5)]
        names = [s.name for s in otel.spans()]
        assert names.count(f"keys {bucket}") == 1
        assert names.count(f"list_keys {bucket}") == 1
        assert not [n for n in names if n.startswith(("receive", "watch"))], names
        consumed = [value for attrs, value in otel.metrics()["messaging.client.consumed.messages"]
                    if attrs.get(M.MESSAGING_DESTINATION_NAME) == bucket]
        assert consumed == [1, 1]  # one for each listing (keys, list_keys), never one per key
    finally:
        js.delete_key_value(bucket)
