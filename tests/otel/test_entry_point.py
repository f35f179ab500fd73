"""The extra's contract with the rest of the world: the ``opentelemetry_instrumentor`` entry
point works under ``opentelemetry-instrument``, and natsjs_sync alone never loads OpenTelemetry."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from natsjs_sync.testing import NatsServer

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "natsjs_sync = natsjs_sync.otel:NatsjsSyncInstrumentor"


def test_setup_cfg_declares_the_extra_and_the_entry_point() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extra = cfg["options.extras_require"]["otel"]
    for needed in ("opentelemetry-api", "opentelemetry-instrumentation", "wrapt"):
        assert needed in extra
    for needed in ("opentelemetry-api", "opentelemetry-instrumentation", "opentelemetry-sdk"):
        assert needed in cfg["options.extras_require"]["test"]
    assert ENTRY in cfg["options.entry_points"]["opentelemetry_instrumentor"]


def test_the_library_alone_imports_nothing_of_opentelemetry(shared_server: NatsServer) -> None:
    code = textwrap.dedent(f"""
        import sys
        import natsjs_sync, natsjs_sync.jetstream, natsjs_sync.micro
        with natsjs_sync.connect({shared_server.url!r}) as nc:
            sub = nc.subscribe("quiet")
            nc.publish("quiet", b"x")
            sub.next_msg(timeout=10)
            nc.jetstream()
        loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "wrapt")))
        print(loaded)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _entry_point_registered() -> bool:
    return any(ep.value == "natsjs_sync.otel:NatsjsSyncInstrumentor"
               for ep in metadata.entry_points(group="opentelemetry_instrumentor"))


def test_opentelemetry_instrument_picks_the_instrumentor_up(shared_server: NatsServer, tmp_path: Path) -> None:
    tool = shutil.which("opentelemetry-instrument")
    if tool is None:
        pytest.skip("opentelemetry-instrument is not installed (opentelemetry-instrumentation)")
    pytest.importorskip("opentelemetry.distro", reason="opentelemetry-distro configures the console exporter")
    env = dict(os.environ)
    path = [str(ROOT)]
    if not _entry_point_registered():
        # An install made before the entry point existed (an editable one): declare it
        # the way an install from this setup.cfg does, in a dist-info of its own.
        dist = tmp_path / "natsjs_sync_otel_entry-0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: natsjs-sync-otel-entry\nVersion: 0\n")
        (dist / "entry_points.txt").write_text(f"[opentelemetry_instrumentor]\n{ENTRY}\n")
        path.append(str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
    env.update(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               OTEL_SERVICE_NAME="ep-test", OTEL_BSP_SCHEDULE_DELAY="50")
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(f"""
        import natsjs_sync
        with natsjs_sync.connect({shared_server.url!r}) as nc:  # no OpenTelemetry in the application
            nc.publish("otel.entry", b"hello")
            nc.flush()
    """))
    out = subprocess.run([tool, sys.executable, str(app)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    decoder = json.JSONDecoder()
    spans, text, i = [], out.stdout, 0
    while True:
        i = text.find("{", i)
        if i < 0:
            break
        obj, end = decoder.raw_decode(text, i)
        spans.append(obj)
        i = end
    names = [s.get("name") for s in spans]
    assert "publish otel.entry" in names, out.stdout + out.stderr
    span = spans[names.index("publish otel.entry")]
    assert span["attributes"]["messaging.system"] == "nats"


def test_installed_but_not_instrumented_runs_the_library_s_own_methods() -> None:
    """Off costs nothing because off is the library's own code: importing the package wraps nothing."""
    code = textwrap.dedent("""
        import types
        from natsjs_sync.client import Client
        from natsjs_sync.msg import Msg
        from natsjs_sync.subscription import Subscription
        from natsjs_sync.jetstream.context import JetStream
        from natsjs_sync.jetstream.messages import MessagesContext
        from natsjs_sync.jetstream.pull import MessageBatch
        before = [Client.publish, Client.request, Client.subscribe, Msg.ack, Msg.respond, Subscription.next_msg,
                  JetStream.publish, JetStream.publish_async, MessageBatch.__iter__, MessagesContext._next]
        import natsjs_sync.otel
        natsjs_sync.otel.NatsjsSyncInstrumentor()  # made, never instrumented
        after = [Client.publish, Client.request, Client.subscribe, Msg.ack, Msg.respond, Subscription.next_msg,
                 JetStream.publish, JetStream.publish_async, MessageBatch.__iter__, MessagesContext._next]
        print(before == after and all(type(f) is types.FunctionType for f in after))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "True", out.stdout + out.stderr
