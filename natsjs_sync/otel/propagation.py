"""W3C trace context and baggage carried in NATS message headers.

The globally configured propagator (``traceparent``, ``tracestate`` and
``baggage`` by default) writes into a copy of the caller's headers: the
caller's mapping is never changed and a header the caller set is never
replaced. Header names are those of the propagator, lower case, as nats-py's
and natsio's instrumentations write them, so traces cross clients.

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

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter

from ..protocol.headers import Headers, HeadersInput

__all__ = ["HeadersGetter", "HeadersSetter", "extract", "inject"]


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
    merged: dict[str, Any] = dict(_items(headers)) if headers else {}
    before = len(merged)
    propagate.inject(merged, context=context, setter=_SETTER)
    if len(merged) == before:
        return headers
    return merged


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
