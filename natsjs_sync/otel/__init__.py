"""OpenTelemetry for natsjs_sync: traces, metrics and trace context across clients.

Install the extra (``pip install "natsjs-sync[otel]"``) and either run the
application under ``opentelemetry-instrument`` (the instrumentor is an entry
point of ``opentelemetry_instrumentor``) or call::

    from natsjs_sync.otel import NatsjsSyncInstrumentor
    NatsjsSyncInstrumentor().instrument(tracer_provider=..., meter_provider=...)

The rest of natsjs_sync never imports this package, so nothing of
OpenTelemetry is loaded, and nothing is wrapped, unless it is used.
See the "Observability" page of the documentation.
"""

from __future__ import annotations

from .instrumentor import ConsumeHook, NatsjsSyncInstrumentor, PublishHook, process
from .lag import ConsumerLag, ConsumerLagGauges
from .msgtrace import record_message_trace
from .propagation import extract, inject

__all__ = ["ConsumeHook", "ConsumerLag", "ConsumerLagGauges", "NatsjsSyncInstrumentor", "PublishHook", "extract",
           "inject", "process", "record_message_trace"]
