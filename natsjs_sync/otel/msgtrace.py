"""A traced message's path (ADR-41) as OpenTelemetry spans: one span per server.

:func:`record_message_trace` turns a :class:`~natsjs_sync.monitor.MessageTrace`
into spans at the times the servers reported: each server's span starts at its
ingress and ends at its last step, each step (a subject mapping, an account
import or export, a JetStream store, an egress) is an event of that span, and the
span of a server the message was forwarded to (a route, a gateway, a leafnode)
is a child of the span of the server that forwarded it. The origin's span is a
child of the span current where it is called (the application's), so the path
of the message shows inside the trace of the code that traced it. A step that
reports an error marks its server's span as failed.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from .._version import __version__
from . import attributes as a

if TYPE_CHECKING:
    from ..monitor.trace import MessageTrace, TraceEvent

__all__ = ["record_message_trace"]


def _ns(at: datetime.datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1_000_000_000)


def _step_event(step: Any) -> tuple[str, dict[str, Any]]:
    """(the event's name, its attributes) for one step of a server's event."""
    from ..monitor.trace import (
        ConnectionKind,
        TraceEgress,
        TraceIngress,
        TraceJetStream,
        TraceServiceImport,
        TraceStreamExport,
        TraceSubjectMapping,
    )

    attrs: dict[str, Any] = {}
    if isinstance(step, (TraceIngress, TraceEgress)):
        attrs[a.NATS_TRACE_CONNECTION_KIND] = ConnectionKind.NAMES.get(step.kind, str(step.kind))
        attrs[a.NATS_TRACE_CONNECTION_ID] = step.cid
        if step.name:
            attrs[a.NATS_TRACE_CONNECTION_NAME] = step.name
        if step.account:
            attrs[a.NATS_TRACE_ACCOUNT] = step.account
    if isinstance(step, TraceIngress):
        attrs[a.MESSAGING_DESTINATION_NAME] = step.subject
        return "ingress", attrs
    if isinstance(step, TraceEgress):
        if step.subscription:
            attrs[a.MESSAGING_DESTINATION_SUBSCRIPTION_NAME] = step.subscription
        if step.queue:
            attrs[a.MESSAGING_CONSUMER_GROUP_NAME] = step.queue
        if step.hop:
            attrs[a.NATS_TRACE_HOP] = step.hop
        return "egress", attrs
    if isinstance(step, TraceSubjectMapping):
        return "subject mapping", {a.MESSAGING_DESTINATION_NAME: step.mapped_to}
    if isinstance(step, TraceServiceImport):
        return "service import", {a.NATS_TRACE_ACCOUNT: step.account, a.MESSAGING_DESTINATION_NAME: step.to}
    if isinstance(step, TraceStreamExport):
        return "stream export", {a.NATS_TRACE_ACCOUNT: step.account, a.MESSAGING_DESTINATION_NAME: step.to}
    assert isinstance(step, TraceJetStream)
    attrs = {a.NATS_STREAM: step.stream, a.NATS_TRACE_NO_INTEREST: step.no_interest}
    if step.subject:
        attrs[a.MESSAGING_DESTINATION_NAME] = step.subject
    return "jetstream", attrs


def record_message_trace(message_trace: MessageTrace, tracer_provider: Any = None) -> list[Span]:
    """Record ``message_trace``'s path as spans (see the module's docstring).

    Args:
        message_trace: what :func:`natsjs_sync.monitor.trace_message` returned.
        tracer_provider: where the spans go (default: the global provider).

    Returns:
        The spans, ended, in path order (the origin's first).
    """
    tracer = trace.get_tracer(__name__, __version__, tracer_provider=tracer_provider, schema_url=a.SCHEMA_URL)
    made: list[Span] = []
    parents: dict[int, Span] = {}
    for _depth, event in message_trace.walk():
        parent = parents.get(id(event))
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = _server_span(tracer, event, message_trace.subject, context)
        made.append(span)
        for egress in event.egresses:
            nxt = message_trace.next_hop(egress)
            if nxt is not None:
                parents[id(nxt)] = span
    return made


def _server_span(tracer: Any, event: TraceEvent, subject: str, context: Any) -> Span:
    ingress = event.ingress
    times = [t for t in (_ns(getattr(step, "timestamp", None)) for step in event.events) if t is not None]
    start = times[0] if times else None
    attrs: dict[str, Any] = {
        a.MESSAGING_SYSTEM: a.SYSTEM,
        a.MESSAGING_DESTINATION_NAME: ingress.subject if ingress is not None and ingress.subject else subject,
        a.NATS_TRACE_SERVER_NAME: event.server.name,
        a.NATS_TRACE_SERVER_ID: event.server.id,
        a.NATS_TRACE_HOP: event.hop,
        a.NATS_TRACE_HOPS: event.hops,
    }
    if event.server.cluster:
        attrs[a.NATS_TRACE_SERVER_CLUSTER] = event.server.cluster
    span: Span = tracer.start_span(f"trace {event.server.name or event.server.id}", context=context,
                             kind=SpanKind.INTERNAL, attributes=attrs, start_time=start)
    errors = []
    for step in event.events:
        name, step_attrs = _step_event(step)
        error = getattr(step, "error", "")
        if error:
            step_attrs[a.ERROR_TYPE] = error
            errors.append(f"{name}: {error}")
        span.add_event(name, step_attrs, timestamp=_ns(step.timestamp))
    if errors:
        span.set_status(StatusCode.ERROR, "; ".join(errors))
    span.end(end_time=max(times) if times else None)
    return span
