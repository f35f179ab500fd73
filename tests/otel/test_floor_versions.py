"""The ``otel`` extra works with the oldest versions it declares.

The floors are read from setup.cfg (``name>=version`` becomes ``name==version``),
so raising one there tests the new one. They are installed from PyPI into a
virtual environment of their own, made once per machine and set of floors
(under ``~/.cache/natsjs-sync-tests``), with OpenTelemetry's SDK of the same
release as the floor API; a script there instruments natsjs_sync (this
checkout) and runs a round of core, JetStream and KV calls against the test
server. A floor that lacks a name the code uses fails here: under
``opentelemetry-instrument`` such an ``instrument()`` error also stops every
instrumentor loaded after this one. Skipped, saying why, only when PyPI cannot
be reached.
"""

from __future__ import annotations

import configparser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from natsjs_sync._version import __version__
from natsjs_sync.testing import NatsServer

ROOT = Path(__file__).resolve().parents[2]

# What pip says when it cannot reach an index (as opposed to a version that does not exist).
_UNREACHABLE = re.compile(r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
                          r"Network is unreachable|ConnectTimeoutError|ReadTimeoutError|Could not fetch URL")


def floor_pins() -> list[str]:
    """``name==version`` for every requirement of the ``otel`` extra, at its declared floor."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    pins = []
    for line in cfg["options.extras_require"]["otel"].split("\n"):
        line = line.split("#")[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", line)
        assert match, f"the otel extra's requirement {line!r} has no floor (name>=version) to test"
        pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


def _pin_of(pins: list[str], name: str) -> str:
    return next(p.split("==")[1] for p in pins if p.split("==")[0] == name)


def _environment(pins: list[str]) -> Path:
    """The interpreter of a virtual environment holding ``pins`` (made once; skips when PyPI is unreachable)."""
    wanted = [*pins, f"opentelemetry-sdk=={_pin_of(pins, 'opentelemetry-api')}",
              f"msgspec=={metadata.version('msgspec')}"]
    key = hashlib.sha256("\n".join([sys.version, *wanted]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "natsjs-sync-tests"
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"otel-floor-{key}"
    python = venv / "bin" / "python"
    with open(cache / "otel-floor.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker at a time (parallel test runs)
        if (venv / "complete").exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        try:
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted],
                           check=True, capture_output=True, text=True, timeout=600)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(venv, ignore_errors=True)
            if _UNREACHABLE.search(exc.stderr or ""):
                pytest.skip(f"PyPI cannot be reached to install {' '.join(wanted)}")
            raise AssertionError(f"could not install the declared floors {wanted}:\n{exc.stderr}") from None
        except subprocess.TimeoutExpired:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.skip(f"installing {' '.join(wanted)} from PyPI took more than 10 minutes")
        (venv / "complete").write_text("\n".join(wanted))
    return python


_SCRIPT = textwrap.dedent("""
    import json, sys, threading
    from importlib import metadata

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import natsjs_sync as nats
    from natsjs_sync.otel import NatsjsSyncInstrumentor
    from natsjs_sync.protocol.nuid import next_nuid

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    NatsjsSyncInstrumentor().instrument(tracer_provider=tracer_provider,
                                        meter_provider=MeterProvider(metric_readers=[reader]))
    processed = threading.Event()
    with nats.connect(sys.argv[1]) as nc:
        nc.subscribe("floor.x", cb=lambda m: processed.set())
        nc.subscribe("floor.svc", cb=lambda m: m.respond(b"ok"))
        nc.flush()
        nc.publish("floor.x", b"hi")
        assert processed.wait(10)
        assert nc.request("floor.svc", b"", timeout=10).data == b"ok"
        js = nc.jetstream()
        name = "FLOOR" + next_nuid()
        js.create_stream(name=name, subjects=[name + ".>"], storage="memory")
        try:
            js.publish(name + ".a", b"job")
            with js.create_consumer(name, durable_name="w", ack_policy="explicit").fetch(1, max_wait=10) as batch:
                for msg in batch:
                    msg.ack_sync(timeout=10)
        finally:
            js.delete_stream(name)
        kv = js.create_key_value(bucket=name)
        try:
            kv.put("k", b"v")
            assert kv.get("k").value == b"v"
        finally:
            js.delete_key_value(name)
    data = reader.get_metrics_data()
    metrics = sorted({m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics})
    spans = sorted({(s.name, s.kind.name) for s in exporter.get_finished_spans()})
    versions = {d: metadata.version(d) for d in ("opentelemetry-api", "opentelemetry-sdk",
                                                 "opentelemetry-instrumentation", "wrapt")}
    print(json.dumps({"spans": spans, "metrics": metrics, "versions": versions}))
""")


@pytest.mark.slow
def test_the_otel_extra_works_at_its_declared_floors(shared_server: NatsServer, tmp_path: Path) -> None:
    pins = floor_pins()
    python = _environment(pins)
    script = tmp_path / "floor.py"
    script.write_text(_SCRIPT)
    # natsjs-sync as an installed distribution, as an application has it: the instrumentor
    # checks that the distribution it instruments is there before it wraps anything.
    dist = tmp_path / "site" / f"natsjs_sync-{__version__}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: natsjs-sync\nVersion: {__version__}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "site")])}
    out = subprocess.run([str(python), str(script), shared_server.url], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    for pin in pins:  # really the floors, not something newer
        name, version = pin.split("==")
        if name in report["versions"]:
            assert report["versions"][name].split(".")[:2] == version.split(".")[:2], (name, report["versions"])
    spans = {tuple(s) for s in report["spans"]}
    assert {("publish floor.x", "PRODUCER"), ("process floor.x", "CONSUMER"), ("request floor.svc", "PRODUCER"),
            ("respond _INBOX.>", "PRODUCER")} <= spans, spans
    assert any(n.startswith("ack_sync FLOOR") and k == "CLIENT" for n, k in spans), spans
    assert any(n.startswith("receive FLOOR") and k == "CLIENT" for n, k in spans), spans
    assert any(n.startswith("put FLOOR") and k == "PRODUCER" for n, k in spans), spans
    assert {"messaging.client.sent.messages", "messaging.client.consumed.messages",
            "messaging.client.operation.duration", "messaging.process.duration"} <= set(report["metrics"])
