"""W3C trace context and baggage carried in NATS message headers.

The globally configured propagator (``traceparent``, ``tracestate`` and
``baggage`` by default) writes into a copy of the caller's headers: the
caller's mapping is never changed and a header the caller set is never
replaced. Header names are those of the propagator, lower case, as nats-py's
and natsio's instrumentations write them, so traces cross clients.
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
    """Writes a propagation field unless the carrier already holds it (the user's value wins)."""

    def set(self, carrier: dict[str, Any], key: str, value: str) -> None:
        if key not in carrier:
            carrier[key] = value


class HeadersGetter(Getter[Mapping[str, Any]]):
    """Reads propagation fields from received headers (a value may be a list of values)."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        if isinstance(carrier, Headers):
            values = carrier.get_all(key)
            return values or None
        value = carrier.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value]

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return list(carrier.keys())


_SETTER = HeadersSetter()
_GETTER = HeadersGetter()


def inject(headers: HeadersInput | None, context: Context | None = None) -> HeadersInput | None:
    """The headers to send: ``headers`` plus the trace context of ``context`` (default: the current one).

    Args:
        headers: the caller's headers (left unchanged), or None.
        context: the context to propagate.

    Returns:
        A new mapping when there was something to add, else ``headers`` itself.
    """
    fields: dict[str, Any] = {}
    propagate.inject(fields, context=context, setter=_SETTER)
    if not fields:
        return headers
    if headers is None:
        return fields
    merged: dict[str, Any] = dict(_items(headers))
    for key, value in fields.items():
        merged.setdefault(key, value)
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
