"""W3C trace context and baggage carried in NATS message headers.

The globally configured propagator (``traceparent``, ``tracestate`` and
``baggage`` by default) writes into a copy of the caller's headers: the
caller's mapping is never changed and a valid trace context the caller set is
never replaced. Header names are those of the propagator, lower case, as nats-py's
and natsio's instrumentations write them, so traces cross clients.

A message whose headers already carry a valid trace context (the caller set
``traceparent``: a relayed message) keeps it: that is the message's creation
context, and the conventions say it is not to be modified
(:func:`creation_context` reads it, for the producer span to link to). A trace
context field that carries no valid context (a malformed ``traceparent``) is
replaced by ours, whatever its case, never sent beside it.

The propagation fields are matched without regard to case, in both
directions: NATS keeps a header's case as sent and compares it exactly
(ADR-4), and ADR-4's case-insensitive lookup is the one that fits fields
defined for HTTP, where case never mattered. A Go service that propagates
through ``propagation.HeaderCarrier`` sends ``Traceparent`` (``http.Header``
canonical case): it is read, and a message carrying it gets no second
``traceparent`` beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from ..protocol.headers import Headers, HeadersInput

__all__ = ["HeadersGetter", "HeadersSetter", "creation_context", "extract", "inject"]


class HeadersSetter(Setter[dict[str, Any]]):
    """Writes a propagation field unless the carrier already holds it in any case (the user's value wins)."""

    def set(self, carrier: dict[str, Any], key: str, value: str) -> None:
        folded = key.casefold()
        if not any(isinstance(k, str) and k.casefold() == folded for k in carrier):
            carrier[key] = value


class HeadersGetter(Getter[Mapping[str, Any]]):
    """Reads propagation fields from received headers, whatever their case (a value may be a list of values)."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        folded = key.casefold()
        values: list[str] = []
        for name in carrier:
            if isinstance(name, str) and name.casefold() == folded:
                values.extend(_values(carrier, name))
        return values or None

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return list(carrier.keys())


def _values(carrier: Mapping[str, Any], name: str) -> list[str]:
    if isinstance(carrier, Headers):
        return carrier.get_all(name)
    value = carrier[name]
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


_SETTER = HeadersSetter()
_GETTER = HeadersGetter()


def inject(headers: HeadersInput | None, context: Context | None = None) -> HeadersInput | None:
    """The headers to send: ``headers`` plus the trace context of ``context`` (default: the current one).

    A valid trace context already in ``headers`` is kept as it is (the caller's
    creation context), with no span context field of ours beside it; trace context
    fields that carry none are all replaced.

    Args:
        headers: the caller's headers (left unchanged), or None.
        context: the context to propagate.

    Returns:
        A new mapping when there was something to add, else ``headers`` itself
        (also when ``headers`` is not a mapping: the client refuses it as it would
        without instrumentation).
    """
    if headers is not None and not isinstance(headers, Mapping):
        return headers
    ours: dict[str, Any] = {}
    propagate.inject(ours, context=context, setter=_SETTER)
    if not ours:
        return headers
    merged: dict[str, Any] = dict(_items(headers)) if headers else {}
    changed = False
    span_fields = _span_fields()
    theirs = [k for k in merged if isinstance(k, str) and k.casefold() in span_fields]
    if theirs and creation_context(headers) is None and any(k.casefold() in span_fields for k in ours):
        # Fields of a context that is not valid (a malformed traceparent): ours replaces all of them,
        # those ours has no value for included (a tracestate of theirs would describe our traceparent).
        for key in theirs:
            del merged[key]
        changed = True
        theirs = []
    before = len(merged)
    for key, value in ours.items():
        # The caller's valid context stays whole: beside it, only fields of ours that are no part
        # of a span context (baggage), never a tracestate of another trace.
        if not theirs or key.casefold() not in span_fields:
            _SETTER.set(merged, key, value)
    if not changed and len(merged) == before:
        return headers
    return merged


def without_span_context(headers: HeadersInput) -> dict[str, Any]:
    """A copy of ``headers`` without the fields that carry a span context (``traceparent``,
    ``tracestate`` for W3C): a request's headers that its reply echoes, whose context is
    the requester's, not the reply's."""
    span_fields = _span_fields()
    return {k: v for k, v in _items(headers) if not (isinstance(k, str) and k.casefold() in span_fields)}


def creation_context(headers: Any) -> SpanContext | None:
    """The valid span context ``headers`` already carry (a caller's creation context), or None."""
    if not headers or not isinstance(headers, Mapping):
        return None
    try:
        found = trace.get_current_span(extract(headers)).get_span_context()
    except Exception:  # headers a propagator cannot read: none
        return None
    return found if found.is_valid else None


def _fields(context: Context | None) -> list[str]:
    """The fields the global propagator writes for ``context``."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return list(carrier)


# A span context that is valid, to ask the propagator which of its fields carry one.
_PROBE = trace.set_span_in_context(NonRecordingSpan(SpanContext(
    trace_id=1, span_id=1, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("k", "v")]))), Context())
_span_fields_of: tuple[Any, frozenset[str]] | None = None


def _span_fields() -> frozenset[str]:
    """The fields (case folded) the global propagator writes for a span context alone
    (``traceparent``, ``tracestate`` for W3C): what a caller's invalid context is made of."""
    global _span_fields_of
    propagator = propagate.get_global_textmap()
    cached = _span_fields_of
    if cached is None or cached[0] is not propagator:
        cached = _span_fields_of = (propagator, frozenset(k.casefold() for k in _fields(_PROBE)))
    return cached[1]


def _items(headers: HeadersInput) -> Iterable[tuple[str, Any]]:
    if isinstance(headers, Headers):
        for key in headers:
            values = headers.get_all(key)
            yield key, values if len(values) > 1 else values[0]
    else:
        yield from headers.items()


def extract(headers: Mapping[str, Any] | None) -> Context:
    """The producer's context carried in received headers (an empty context when none is).

    The result never inherits the current context: a message without trace
    headers starts a new trace instead of joining whatever the receiving
    thread happens to be doing.
    """
    if not headers:
        return Context()
    return propagate.extract(headers, context=Context(), getter=_GETTER)
