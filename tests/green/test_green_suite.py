"""natsjs_sync under green threads, as gunicorn's gevent worker and eventlet apps run it.

With ``gevent.monkey.patch_all()`` or ``eventlet.monkey_patch()`` the client's reader,
flusher, timer and dispatcher threads become greenlets and its sockets cooperative: the
suite's own tests of core messaging, reconnects, timeouts, JetStream, the key-value and the
object store run again in such a process and must pass as they do with threads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A representative part of the suite: every kind of call, blocking and iterating, and the
#: faults (server restarts, outages, timeouts) that make a hub-blocking bug show.
SELECTION = (
    "tests/core/test_pubsub.py",
    "tests/core/test_request.py",
    "tests/core/test_request_many.py",
    "tests/core/test_reconnect.py",
    "tests/core/test_timeouts.py",
    "tests/core/test_unsent_requests.py",
    "tests/jetstream/test_publish.py",
    "tests/jetstream/test_pull.py",
    "tests/jetstream/test_ordered.py",
    "tests/jetstream/test_acks.py",
    "tests/jetstream/test_drain_consume.py",
    "tests/kv",
    "tests/object_store",
)

PYTEST_ARGS = ("-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:benchmark", "--timeout", "120",
               # eventlet warns on every fork (the tests' subprocesses); the warning is not a failure
               "-W", "ignore:Using fork:DeprecationWarning")

#: eventlet (in bugfix-only mode upstream) runs a smaller part: core messaging, reconnects and the KV.
EVENTLET_SELECTION = tuple(p for p in SELECTION if p.startswith("tests/core") or p == "tests/kv")

RUNNERS = {
    "gevent": [sys.executable, "-m", "gevent.monkey", "--module", "pytest"],
    "eventlet": [sys.executable, "-W", "ignore::DeprecationWarning", "-c",
                 "import eventlet; eventlet.monkey_patch(); import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"],
}


def _needs(library: str) -> None:
    # Never imported here: eventlet, once imported, warns on every fork of this process.
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"needs {library}")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("library", sorted(RUNNERS))
def test_the_suite_passes_with_green_threads(library: str, tmp_path: Path) -> None:
    _needs(library)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "HOME": str(tmp_path)}
    selection = SELECTION if library == "gevent" else EVENTLET_SELECTION
    done = subprocess.run([*RUNNERS[library], *PYTEST_ARGS, *selection], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1100)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= (250 if library == "gevent" else 100), tail  # all of it ran


@pytest.mark.parametrize("library", sorted(RUNNERS))
def test_blocking_calls_let_other_greenlets_run_and_keep_their_timeouts(library: str) -> None:
    _needs(library)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    probe = str(Path(__file__).with_name("hub_probe.py"))
    done = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", probe, library], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    waits = {"request": "TimeoutError", "request_reading": "TimeoutError", "fetch": "ok", "next": "TimeoutError",
             "iterator": "TimeoutError",
             "flush_while_away": "TimeoutError", "publish_while_away": "NotSentError"}
    for call, outcome in waits.items():
        r = report[call]
        assert r["outcome"] == outcome, (call, report)
        assert r["ticks"] > 0, f"{call} blocked every other greenlet: {report}"
        assert r["seconds"] < 1.0 + 10, (call, report)  # its timeout, with room for a loaded machine
    for call in ("flush_reading", "flush_after_restart", "publish_after_restart", "drain"):
        assert report[call]["outcome"] == "ok", (call, report)


#: A TLS client made before eventlet patches the process (eventlet deletes select.poll then).
_LATE_PATCH = """
import ssl, sys
import natsjs_sync as nats
import eventlet
eventlet.monkey_patch()
ctx = ssl.create_default_context(cafile=sys.argv[2])
with nats.connect(sys.argv[1], tls=ctx, max_reconnect_attempts=0, connect_timeout=10) as nc:
    nc.subscribe("late.echo", cb=lambda m: m.respond(m.data))
    nc.flush(timeout=10)
    assert nc.request("late.echo", b"x" * 200000, timeout=10).data == b"x" * 200000
print("ok")
"""


def test_tls_works_when_eventlet_patches_after_the_import(tmp_path: Path) -> None:
    # eventlet.monkey_patch() deletes select.poll from the select module: a TLS socket's
    # waits must not have decided at import that poll() is there (every connect failed).
    _needs("eventlet")
    from natsjs_sync.testing import NatsServer
    from tests.certs import make_certs

    certs = make_certs(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        done = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", _LATE_PATCH, server.url,
                               str(certs.ca)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (done.stdout + done.stderr)[-4000:]
