"""A traced message's path (ADR-41) as spans: one per server, the forwarded-to server's a
child of the forwarder's, the origin's a child of the caller's span; steps as span events."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync.monitor import trace_message
from natsjs_sync.otel import record_message_trace
from natsjs_sync.testing import NatsCluster
from tests.otel.conftest import Telemetry


@pytest.mark.server("2.11")
def test_a_route_hop_becomes_a_child_span(otel: Telemetry) -> None:
    with NatsCluster(2, jetstream=False) as cluster:
        cluster.wait_routes()
        with nats.connect(cluster.urls[0], name="near") as nc, nats.connect(cluster.urls[1], name="far") as far:
            far.subscribe("spans.x")
            far.flush(timeout=5)
            for _ in range(100):  # bounded: until the first server knows of the interest over the route
                traced = trace_message(nc, "spans.x", timeout=5)
                if traced.origin is not None and traced.origin.hops:
                    break
            else:
                pytest.fail("the subscription never reached the other server")
            tracer = otel.tracer_provider.get_tracer("app")
            with tracer.start_as_current_span("tracing it") as outer:
                made = record_message_trace(traced, tracer_provider=otel.tracer_provider)
        assert len(made) == 2
        spans = {s.name: s for s in otel.spans()}
        origin = spans[f"trace {cluster.nodes[0].server_name}"]
        remote = spans[f"trace {cluster.nodes[1].server_name}"]
        assert origin.parent is not None and origin.parent.span_id == outer.get_span_context().span_id
        assert remote.parent is not None and remote.parent.span_id == origin.context.span_id
        assert origin.context.trace_id == remote.context.trace_id == outer.get_span_context().trace_id
        assert origin.attributes is not None and origin.attributes["messaging.system"] == "nats"
        assert origin.attributes["messaging.nats.trace.hops"] == 1
        assert remote.attributes is not None and remote.attributes["messaging.nats.trace.hop"] == "1"
        assert [e.name for e in origin.events] == ["ingress", "egress"]
        assert [e.name for e in remote.events] == ["ingress", "egress"]
        delivered = remote.events[1].attributes or {}
        assert delivered["messaging.nats.trace.connection.name"] == "far"
        assert delivered["messaging.destination.subscription.name"] == "spans.x"
        assert origin.start_time is not None and origin.end_time is not None
        assert origin.start_time <= origin.end_time
        assert origin.status.is_ok


@pytest.mark.server("2.11")
def test_an_error_step_fails_its_span(otel: Telemetry) -> None:
    from natsjs_sync.testing import NatsServer

    users = [{"user": "u", "password": "p", "permissions": {"publish": {"deny": ["secret.>"]},
                                                            "subscribe": {"allow": [">"]}}}]
    with NatsServer(jetstream=False, users=users) as server, \
            nats.connect(server.url, user="u", password="p", error_cb=lambda e: None) as nc:
        traced = trace_message(nc, "secret.x", timeout=5)
        [span] = record_message_trace(traced, tracer_provider=otel.tracer_provider)
    assert not span.status.is_ok and "Permissions Violation" in (span.status.description or "")
