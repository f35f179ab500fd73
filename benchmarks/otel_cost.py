"""What OpenTelemetry costs: the same benchmark without the extra, with it loaded but off, and on.

    python benchmarks/otel_cost.py [pub,pubsub,jspub,ack] [RUNS] [DIVISOR] [MODES]

Every run of every row starts a fresh process per mode, the three taking turns
against one server, so the machine's drift lands on all of them; each figure
is the median of RUNS runs (3 by default). Modes:

* ``base``: natsjs_sync alone (OpenTelemetry never imported);
* ``again``: ``base`` once more, in its own processes: how far two runs of
  the same code drift apart on this machine (the floor below which a
  difference between modes says nothing);
* ``off``: the SDK and ``natsjs_sync.otel`` imported, a tracer and meter
  provider set globally, the instrumentor made but never ``instrument()``-ed
  (the promise: >= 0.97x of ``base``);
* ``on``: instrumented into an SDK whose spans go through a
  ``BatchSpanProcessor`` to an exporter that drops them, with a metric reader
  attached (what a production setup pays before its exporter's own cost).

The rows are those of ``ab.py`` (core publish, publish+subscribe, pipelined
JetStream publish, pull consumption with acks); DIVISOR divides their message
counts (1 by default; instrumented runs are slow on a busy machine); MODES
(``base,off,on`` by default) runs fewer modes, ``base,again,off`` for the cost
of off beside the noise.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

from _common import server_url

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[5])
mode = sys.argv[6]
if mode not in ("base", "again"):
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(Drop()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    trace.set_tracer_provider(tp)
    metrics.set_meter_provider(mp)
    from natsjs_sync.otel import NatsjsSyncInstrumentor
    inst = NatsjsSyncInstrumentor()
    if mode == "on":
        inst.instrument(tracer_provider=tp, meter_provider=mp)
import natsjs_sync
assert natsjs_sync.__file__.startswith(sys.argv[1]), natsjs_sync.__file__
url, kind, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
import core as C
import jetstream as J
if kind == "jspub":
    r = J._with_stream(url, 0, J.ours_pipelined(url, n))()
elif kind == "ack":
    r = J._with_stream(url, n, J.ours_consume(url, n, True))()
elif kind == "pub":
    r = C.ours_publish(url, n, 16)
else:
    r = C.ours_pubsub(url, n, 16)
if mode in ("base", "again"):
    assert not any(m.startswith("opentelemetry") for m in sys.modules), "base must not load OpenTelemetry"
print(r)
"""

COUNTS = {"pub": 200_000, "pubsub": 100_000, "jspub": 50_000, "ack": 50_000}
MODES = ("base", "again", "off", "on")


def main() -> None:
    kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else list(COUNTS)
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    divisor = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else ["base", "off", "on"]
    if "base" not in modes or set(modes) - set(MODES):
        sys.exit(f"modes: base and any of {MODES[1:]}")
    unknown = set(kinds) - set(COUNTS)
    if unknown:
        sys.exit(f"unknown rows {sorted(unknown)}; known: {','.join(COUNTS)}")
    with server_url(None) as url:
        for kind in kinds:
            got: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(runs):
                for mode in modes:
                    count = str(COUNTS[kind] // divisor)
                    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), url, kind, count, str(HERE), mode],
                                         capture_output=True, text=True, timeout=600)
                    if out.returncode:
                        sys.exit(out.stderr[-2000:])
                    got[mode].append(float(out.stdout.strip().splitlines()[-1]))
            base = statistics.median(got["base"])
            row = [f"{kind}: base {base:,.0f}"]
            for mode in modes[1:]:
                value = statistics.median(got[mode])
                row.append(f"{mode} {value:,.0f} ({value / base:.2f}x)")
            print("  ".join(row), flush=True)

if __name__ == "__main__":
    main()
