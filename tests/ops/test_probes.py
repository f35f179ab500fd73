"""The Kubernetes probes docs/monitoring.rst documents, run as the kubelet runs them, against a
3-node cluster through a rolling restart's degraded state and then an outage: a liveness probe
never fails on what a restart cannot mend, and a readiness probe fails on CRITICAL only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from natsjs_sync.testing import NatsCluster

from ._kit import ACCOUNTS, eventually, replicated_stream

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "monitoring.rst"
_PROBE = re.compile(r"^ +(livenessProbe|readinessProbe|startupProbe):\n +exec:\n +command: (\[[^\]]*\])", re.M)


def documented_probes() -> list[tuple[str, list[str]]]:
    """``(kind, command)`` of every exec probe on the page, as written."""
    return [(kind, json.loads(command)) for kind, command in _PROBE.findall(PAGE.read_text())]


def as_here(command: list[str], url: str) -> list[str]:
    """The page's command pointed at the test's cluster: this Python's natsjs-sync, the
    cluster's URL, and its user instead of a credentials file."""
    here: list[str] = []
    words = iter(command)
    for word in words:
        if word == "natsjs-sync":
            here += [sys.executable, "-m", "natsjs_sync"]
        elif word == "--creds":
            next(words)
            here += ["--user", "app", "--password", "app"]
        else:
            here.append(word.replace("natsjs-sync ", f"{sys.executable} -m natsjs_sync ")
                        .replace("nats://nats:4222", url)
                        .replace("--creds /etc/nats/app.creds", "--user app --password app"))
    return here


def run(command: list[str]) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd=REPO).returncode


def test_the_documented_probes_pass_while_degraded_and_readiness_fails_when_down() -> None:
    probes = documented_probes()
    assert probes
    with NatsCluster(3, name="prb", config=ACCOUNTS) as cluster:
        victims = replicated_stream(cluster, "ORDERS")
        commands = [(kind, as_here(command, cluster.url)) for kind, command in probes]
        check = [sys.executable, "-m", "natsjs_sync", "server", "check", "stream", "--stream", "ORDERS",
                 "--server", cluster.url, "--user", "app", "--password", "app"]
        assert eventually(lambda: run(check) == 0, 30.0)  # once the new stream's replicas are current
        assert all(run(command) == 0 for _, command in commands)

        # A rolling restart's state: one server stopped (gracefully, as a restart stops it), its
        # replica offline, the stream still led and writable.
        cluster.stop_node(victims[0])
        assert eventually(lambda: run(check) == 1, 30.0)  # WARNING: degraded but working
        for kind, command in commands:
            assert run(command) == 0, f"the documented {kind} fails while the stream is degraded: {command}"

        # Down: the stream has lost its quorum. Readiness fails; a liveness probe would restart for nothing.
        # (A stopped server tells its peers it is gone: a crash is noticed only after the server's
        # own 10 s without a heartbeat, which test_server_check's test of exit codes goes through.)
        assert any(kind == "readinessProbe" for kind, _ in probes), probes
        cluster.stop_node(victims[1])
        assert eventually(lambda: run(check) == 2, 60.0)
        for kind, command in commands:
            if kind == "readinessProbe":
                assert run(command) != 0, command
            else:
                raise AssertionError(f"a {kind} that runs a NATS check: a restart does not mend what it finds")
