"""Fixtures for the OpenTelemetry tests: an SDK with an in-memory span exporter and metric reader."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra (and the SDK) is part of the test extra")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from natsjs_sync.otel import NatsjsSyncInstrumentor
from tests.conftest import wait_until


@dataclass
class Telemetry:
    """What an instrumented test reads: the finished spans and the metrics."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str, timeout: float = 10.0) -> ReadableSpan:
        """The first finished span called ``name`` (spans of callbacks end on other threads)."""
        found: list[ReadableSpan] = []

        def seen() -> bool:
            found[:] = [s for s in self.spans() if s.name == name]
            return bool(found)

        assert wait_until(seen, timeout), f"no span {name!r} in {[s.name for s in self.spans()]}"
        return found[0]

    def wait_for(self, predicate: Callable[[list[ReadableSpan]], bool], timeout: float = 10.0) -> list[ReadableSpan]:
        assert wait_until(lambda: predicate(self.spans()), timeout), [s.name for s in self.spans()]
        return self.spans()

    def metrics(self) -> dict[str, list[tuple[dict[str, object], object]]]:
        """metric name -> [(attributes, value or histogram count)]."""
        out: dict[str, list[tuple[dict[str, object], object]]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.data.data_points:
                        value = getattr(p, "value", None)
                        if value is None:
                            value = p.count  # type: ignore[attr-defined]
                        out.setdefault(m.name, []).append((dict(p.attributes or {}), value))
        return out


@pytest.fixture
def otel(request: pytest.FixtureRequest) -> Iterator[Telemetry]:
    """natsjs_sync instrumented into a private SDK for the duration of one test (options of
    ``instrument()`` by indirect parametrization)."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    inst = NatsjsSyncInstrumentor()
    inst.instrument(tracer_provider=tp, meter_provider=mp, **getattr(request, "param", {}))
    try:
        yield Telemetry(exporter, reader, tp, mp)
    finally:
        inst.uninstrument()
        tp.shutdown()
        mp.shutdown()
