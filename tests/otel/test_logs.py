"""Correlated logs: every record names its connection and server, and a callback's exception
is logged inside the callback's process span (its trace id on the record)."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator

import pytest
from opentelemetry import trace

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer
from tests.conftest import wait_until

from .conftest import Telemetry

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "max_reconnect_attempts": -1}


class Capture(logging.Handler):
    """Keeps each record with the trace id current when it was emitted: what OpenTelemetry's
    logging instrumentation (and the SDK's LoggingHandler) read on the emitting thread."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[logging.LogRecord, int]] = []
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        trace_id = trace.get_current_span().get_span_context().trace_id
        with self.changed:
            self.records.append((record, trace_id))
            self.changed.notify_all()

    def wait_for(self, match: Callable[[logging.LogRecord], bool],
                 timeout: float = 10.0) -> tuple[logging.LogRecord, int]:
        """The first record ``match`` accepts, waiting up to ``timeout`` seconds for it."""
        found: list[tuple[logging.LogRecord, int]] = []

        def seen() -> bool:
            found[:] = [r for r in self.records if match(r[0])]
            return bool(found)

        with self.changed:
            assert self.changed.wait_for(seen, timeout), [r.getMessage() for r, _ in self.records]
        return found[0]


@pytest.fixture
def capture() -> Iterator[Capture]:
    handler = Capture()
    root = logging.getLogger("natsjs_sync")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_loss_and_reconnect_records_carry_the_name_and_the_server(capture: Capture) -> None:
    with NatsServer(jetstream=False) as server:
        with nats.connect(server.url, name="logs-test", **FAST) as nc:  # type: ignore[arg-type]
            port = int(server.url.rsplit(":", 1)[1])
            cid = nc.client_id
            server.restart(kill=True)
            lost, _ = capture.wait_for(lambda r: r.getMessage().startswith("disconnected from"))
            back, _ = capture.wait_for(lambda r: r.getMessage().startswith("reconnected to"))
            for record in (lost, back):
                assert record.name == "natsjs_sync.reconnect"
                assert record.__dict__["nats.connection.name"] == "logs-test"
                assert record.__dict__["server.address"] == "127.0.0.1"
                assert record.__dict__["server.port"] == port
            assert lost.__dict__["messaging.client.id"] == cid
            # read when emitted: the new connection's id, not the one before the loss
            assert back.__dict__["messaging.client.id"] == nc.client_id
            # the record names the line that logged it, not the adapter
            assert back.pathname.endswith("reconnect.py")


def test_a_callbacks_exception_is_logged_inside_its_process_span(otel: Telemetry, capture: Capture,
                                                                shared_server: NatsServer) -> None:
    def cb(msg: nats.Msg) -> None:
        raise ValueError("bad order")

    with nats.connect(shared_server.url, name="logs-cb") as nc:  # no error_cb: the error is logged
        nc.subscribe("logs.orders", cb=cb)
        nc.flush()
        nc.publish("logs.orders", b"x")
        record, trace_id = capture.wait_for(lambda r: r.exc_info is not None
                                            and isinstance(r.exc_info[1], ValueError))
    proc = otel.span("process logs.orders")
    assert trace_id == proc.context.trace_id != 0
    assert str(record.threadName).startswith("natsjs-dispatch-logs-cb")
    assert record.__dict__["nats.connection.name"] == "logs-cb"
    assert record.__dict__["server.address"] == "127.0.0.1"


def test_an_endpoint_handlers_exception_is_logged_inside_its_server_span(otel: Telemetry, capture: Capture,
                                                                         nc: nats.Client) -> None:
    from natsjs_sync.micro import add_service

    def handler(request: object) -> None:
        raise ValueError("broken endpoint")

    svc = add_service(nc, name="logsvc", version="1.0.0")
    try:
        svc.add_endpoint("boom", handler, subject="logs.boom")
        nc.flush()
        reply = nc.request("logs.boom", b"", timeout=10)
        assert reply.headers is not None and reply.headers.get("Nats-Service-Error-Code") == "500"
        record, trace_id = capture.wait_for(lambda r: r.exc_info is not None
                                            and isinstance(r.exc_info[1], ValueError))
    finally:
        svc.stop()
    span = otel.span("boom")
    assert trace_id == span.context.trace_id != 0
    assert record.__dict__["nats.connection.name"] == "test"


def test_the_sdks_logging_handler_gets_the_trace_and_the_attributes(otel: Telemetry,
                                                                     shared_server: NatsServer) -> None:
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    with warnings.catch_warnings():  # deprecated for opentelemetry-instrumentation-logging's, which is not installed
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(logging.ERROR, logger_provider=provider)
    logger = logging.getLogger("natsjs_sync")
    logger.addHandler(handler)
    arrived = threading.Event()

    def cb(msg: nats.Msg) -> None:
        arrived.set()
        raise ValueError("bad order")

    try:
        with nats.connect(shared_server.url, name="logs-sdk") as nc:
            nc.subscribe("logs.sdk", cb=cb)
            nc.flush()
            nc.publish("logs.sdk", b"x")
            assert arrived.wait(10)
            proc = otel.span("process logs.sdk")
            # logged on the callback's thread once the callback has returned
            assert wait_until(lambda: bool(exporter.get_finished_logs()), 10), "no log record exported"
    finally:
        logger.removeHandler(handler)
        provider.shutdown()
    logs = [d.log_record for d in exporter.get_finished_logs()]
    record = logs[0]
    assert record.trace_id == proc.context.trace_id
    assert record.attributes is not None
    assert record.attributes["server.address"] == "127.0.0.1"
    assert record.attributes["nats.connection.name"] == "logs-sdk"


def test_a_consume_handlers_exception_is_logged_inside_its_process_span(otel: Telemetry, capture: Capture,
                                                                        nc: nats.Client) -> None:
    from natsjs_sync.protocol.nuid import next_nuid

    js = nc.jetstream()
    name = "L" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        js.publish(f"{name}.a", b"job")
        cons = js.create_consumer(name, durable_name="worker", ack_policy="explicit")

        def handler(msg: nats.Msg) -> None:
            raise ValueError("bad job")

        ctx = cons.consume(handler)
        try:
            record, trace_id = capture.wait_for(lambda r: r.exc_info is not None
                                                and isinstance(r.exc_info[1], ValueError))
        finally:
            ctx.stop()
        proc = otel.span(f"process {name}")
        assert trace_id == proc.context.trace_id != 0
        assert record.__dict__["nats.connection.name"] == "test"
    finally:
        js.delete_stream(name)


def test_a_logging_handler_that_raises_does_not_stop_a_subscriptions_callbacks(shared_server: NatsServer) -> None:
    """Logging's own failure (a handler's filter raising; entering the span a callback's exception was
    raised in failing) loses that record, never the thread that logs it: the subscription goes on."""
    from natsjs_sync._core.logs import mark_raised_in

    class Refusing(logging.Handler):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("this handler's filter is broken")

        def emit(self, record: logging.LogRecord) -> None:
            pass

    class BrokenContext:
        def __enter__(self) -> None:
            raise RuntimeError("cannot enter")

        def __exit__(self, *exc: object) -> None:
            pass

    handler = Refusing()
    logger = logging.getLogger("natsjs_sync")
    logger.addHandler(handler)
    got: list[bytes] = []
    second = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(msg.data)
        if msg.data == b"first":
            exc = ValueError("bad order")
            mark_raised_in(exc, BrokenContext)
            raise exc
        if msg.data == b"second":
            raise ValueError("bad order, unmarked")
        second.set()

    try:
        with nats.connect(shared_server.url, name="logs-raise") as nc:  # no error_cb: the errors are logged
            nc.subscribe("logs.raise", cb=cb)
            nc.flush()
            for data in (b"first", b"second", b"third"):
                nc.publish("logs.raise", data)
            assert second.wait(10), got
    finally:
        logger.removeHandler(handler)
    assert got == [b"first", b"second", b"third"]
