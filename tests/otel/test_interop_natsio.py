"""A trace crosses natsio (with natsio-otel) and natsio in both directions.

natsio needs Python 3.13: it runs in its own interpreter (see
``tests/natsio_env.py``: ``NATSIO_PYTHON``, or a virtual environment made
once from a Python 3.13 on the machine); the test is skipped, saying so,
only where there is none. That
process writes its finished spans as JSON lines; the trace ids and parents
prove the W3C headers were read on both sides.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
from pathlib import Path

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..natsio_env import natsio_python
from .conftest import Telemetry

NATSIO_SIDE = textwrap.dedent("""
    import asyncio, json, sys
    import natsio
    from natsio.otel import inject, traced_handler
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    out = open(sys.argv[2], "a")

    class Lines(SpanExporter):
        def export(self, spans):
            for s in spans:
                out.write(json.dumps({"name": s.name, "trace": s.context.trace_id, "span": s.context.span_id,
                                      "parent": s.parent.span_id if s.parent else None}) + "\\n")
                out.flush()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Lines()))

    async def main():
        nc = await natsio.connect(sys.argv[1])
        done = asyncio.Event()

        async def relay(msg):
            await nc.publish("natsio.out", msg.data + b"!", headers=inject())
            done.set()

        nc.subscribe("natsio.in", cb=traced_handler(relay, tracer=provider))
        await nc.flush()
        print("ready", flush=True)
        await asyncio.wait_for(done.wait(), 60)
        await nc.flush()
        await nc.close()

    asyncio.run(main())
""")


def test_us_to_natsio_and_back_is_one_trace(otel: Telemetry, nc: nats.Client, shared_server: NatsServer,
                                            tmp_path: Path) -> None:
    natsio = natsio_python("natsio.otel", "opentelemetry.sdk")
    lines = tmp_path / "natsio-spans.jsonl"
    back = threading.Event()
    nc.subscribe("natsio.out", cb=lambda m: back.set())
    nc.flush()
    with subprocess.Popen([natsio, "-c", NATSIO_SIDE, shared_server.url, str(lines)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            with otel.tracer_provider.get_tracer("app").start_as_current_span("app-root"):
                nc.publish("natsio.in", b"ping")
            assert back.wait(30)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    theirs = {s["name"]: s for s in map(json.loads, lines.read_text().splitlines())}
    ours = {s.name: s for s in otel.wait_for(lambda ss: any(s.name == "process natsio.out" for s in ss))}
    root, pub, back_span = ours["app-root"], ours["publish natsio.in"], ours["process natsio.out"]
    their_proc = theirs["process natsio.in"]
    assert their_proc["trace"] == root.context.trace_id
    assert their_proc["parent"] == pub.context.span_id
    assert back_span.context.trace_id == root.context.trace_id
    assert back_span.parent is not None and back_span.parent.span_id == their_proc["span"]
