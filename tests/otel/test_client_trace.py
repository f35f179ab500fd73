"""The JetStream API traffic hook (nats.go's WithClientTrace), alone and as the instrumentor uses it."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream.client_trace import ClientTrace, add_client_trace
from natsjs_sync.protocol.nuid import next_nuid

from .conftest import Telemetry


def test_requests_and_responses_are_seen_in_the_calling_thread(nc: nats.Client) -> None:
    import threading

    seen: list[tuple[str, str, int]] = []
    me = threading.get_ident()

    def sent(subject: str, payload: bytes) -> None:
        seen.append(("sent", subject, threading.get_ident()))

    def received(subject: str, payload: bytes, headers: object) -> None:
        seen.append(("received", subject, threading.get_ident()))
        assert b'"type":"io.nats.jetstream.api.v1.' in payload

    js = nc.jetstream()
    name = "T" + next_nuid()
    handle = add_client_trace(ClientTrace(request_sent=sent, response_received=received))
    try:
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        with pytest.raises(nats.StreamNotFoundError):
            js.stream("NOPE" + next_nuid())  # an error answer is seen too
    finally:
        handle.cancel()
    js.delete_stream(name)  # after cancel: not seen
    create = f"$JS.API.STREAM.CREATE.{name}"
    assert ("sent", create, me) in seen and ("received", create, me) in seen
    assert [s for s in seen if s[1].startswith("$JS.API.STREAM.INFO.NOPE")] != []
    assert not [s for s in seen if s[1].startswith("$JS.API.STREAM.DELETE")]


def test_a_raising_observer_does_not_break_the_call(nc: nats.Client, caplog: pytest.LogCaptureFixture) -> None:
    def boom(subject: str, payload: bytes) -> None:
        raise RuntimeError("observer bug")

    handle = add_client_trace(ClientTrace(request_sent=boom))
    try:
        nc.jetstream().account_info()
    finally:
        handle.cancel()
    assert "ClientTrace.request_sent raised" in caplog.text
    with pytest.raises(TypeError):
        add_client_trace(lambda s, p: None)  # type: ignore[arg-type]


def test_instrumentor_puts_api_exchanges_on_the_current_span(otel: Telemetry, nc: nats.Client) -> None:
    js = nc.jetstream()
    name = "T" + next_nuid()
    with otel.tracer_provider.get_tracer("app").start_as_current_span("setup"):
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    js.delete_stream(name)
    setup = otel.span("setup")
    events = [(e.name, e.attributes["messaging.nats.api.subject"]) for e in setup.events]
    create = f"$JS.API.STREAM.CREATE.{name}"
    assert events == [("nats.jetstream.api.request", create), ("nats.jetstream.api.response", create)]
