"""Observe the JetStream API traffic: each ``$JS.API`` request sent and the response received.

The equivalent of nats.go's ``jetstream.WithClientTrace``, for every
JetStream context of the process (the OpenTelemetry instrumentation uses it
to put each API exchange on the span of the operation that made it)::

    from natsjs_sync.jetstream.client_trace import ClientTrace, add_client_trace

    handle = add_client_trace(ClientTrace(
        request_sent=lambda subject, payload: log.debug("-> %s %r", subject, payload),
        response_received=lambda subject, payload, headers: log.debug("<- %s %r", subject, payload),
    ))
    ...
    handle.cancel()

Both callbacks run on the thread that made the API call, before it goes out
and as soon as the answer is in (before it is decoded: an error response is
seen too). They must not block; an exception from one is logged and
ignored. Management calls, KV and object store metadata, consumer creation and
``stream_info`` go through the API; publishes and message deliveries do not.
With no trace added, an API call pays one check of an empty tuple.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .._core.spi import Handle
from ..protocol.headers import Headers

__all__ = ["ClientTrace", "add_client_trace"]

log = logging.getLogger("natsjs_sync.jetstream")


@dataclass(frozen=True)
class ClientTrace:
    """What to call on API traffic (either may be None). Immutable; thread-safe.

    Attributes:
        request_sent: ``request_sent(subject, payload)`` before a request goes out.
        response_received: ``response_received(subject, payload, headers)`` when
            its answer came (``subject`` is the request's; ``headers`` None
            when the answer had none).
    """

    request_sent: Callable[[str, bytes], None] | None = None
    response_received: Callable[[str, bytes, Headers | None], None] | None = None


_lock = threading.Lock()
#: The traces added; replaced as a whole (never mutated) so readers need no lock.
traces: tuple[ClientTrace, ...] = ()


def add_client_trace(trace: ClientTrace) -> Handle:
    """Start calling ``trace`` on every JetStream API exchange of this process.

    Returns:
        A handle whose ``cancel()`` stops it (idempotent).

    Raises:
        TypeError: ``trace`` is not a :class:`ClientTrace`.
    """
    global traces
    if not isinstance(trace, ClientTrace):
        raise TypeError(f"expected a ClientTrace, not {type(trace).__name__}")
    with _lock:
        traces = (*traces, trace)

    def cancel() -> None:
        global traces
        with _lock:
            traces = tuple(t for t in traces if t is not trace)

    return Handle(cancel)


def request_sent(subject: str, payload: bytes) -> None:
    """Tell every trace a request is going out (only called when some trace is added)."""
    for t in traces:
        if t.request_sent is not None:
            try:
                t.request_sent(subject, payload)
            except Exception:
                log.exception("ClientTrace.request_sent raised")


def response_received(subject: str, payload: bytes, headers: Headers | None) -> None:
    """Tell every trace an answer came (only called when some trace is added)."""
    for t in traces:
        if t.response_received is not None:
            try:
                t.response_received(subject, payload, headers)
            except Exception:
                log.exception("ClientTrace.response_received raised")
