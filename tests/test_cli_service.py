"""``natsjs-sync service ls|info|stats|ping`` against running services."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync.cli import main
from natsjs_sync.micro import Request, Service, add_service
from natsjs_sync.testing import NatsServer

REPO = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def services(nats_server: NatsServer) -> Iterator[tuple[str, list[Service]]]:
    """Two instances of ``orders`` and one of ``billing``, with some traffic."""
    with nats.connect(nats_server.url, name="services") as nc:
        running = []
        for i in range(2):
            svc = add_service(nc, name="orders", version="1.2.0", description="order lookups",
                              metadata={"region": f"r{i}"})
            svc.add_endpoint("get", lambda req: req.respond(b"order"), subject="orders.get",
                             metadata={"schema": "v2"})

            def fail(req: Request) -> None:
                req.respond_error(404, "no such order")

            svc.add_endpoint("missing", fail, subject="orders.missing", queue_group_disabled=True)
            running.append(svc)
        billing = add_service(nc, name="billing", version="0.3.0")
        billing.add_endpoint("charge", lambda req: req.respond(b"ok"))
        running.append(billing)
        nc.flush()
        for _ in range(4):
            nc.request("orders.get", timeout=5)
        list(nc.request_many("orders.missing", max_messages=2, timeout=5))
        yield nats_server.url, running
        for svc in running:
            svc.stop()


def test_ls(capsys: pytest.CaptureFixture[str], services: tuple[str, list[Service]]) -> None:
    url, running = services
    code, out, _ = run(capsys, "service", "ls", "--server", url, "--stall", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["name", "version", "id", "endpoints", "description"]
    assert [ln.split()[0] for ln in lines[1:]] == ["billing", "orders", "orders"]
    assert all(svc.id in out for svc in running)
    assert "order lookups" in out

    code, out, _ = run(capsys, "service", "ls", "orders", "--json", "-s", url, "--stall", "2")
    assert code == 0
    docs = json.loads(out)
    assert {d["id"] for d in docs} == {running[0].id, running[1].id}
    assert all(d["type"] == "io.nats.micro.v1.info_response" for d in docs)

    # --timeout bounds the connect too (a loaded machine needs more than 0.5 s for it); nobody listens
    # on the name, so the answer comes at once (no responders) however long it is.
    code, out, _ = run(capsys, "service", "ls", "shipping", "-s", url, "--timeout", "5")
    assert (code, out.strip()) == (0, "no services named shipping")


def test_info(capsys: pytest.CaptureFixture[str], services: tuple[str, list[Service]]) -> None:
    url, running = services
    code, out, _ = run(capsys, "service", "info", "orders", running[1].id, "-s", url)
    assert code == 0
    assert f"orders 1.2.0 (id {running[1].id})" in out and running[0].id not in out
    assert "metadata: region=r1" in out
    get_line = next(ln for ln in out.splitlines() if ln.split()[:1] == ["get"])
    assert get_line.split() == ["get", "orders.get", "q", "schema=v2"]
    missing_line = next(ln for ln in out.splitlines() if ln.split()[:1] == ["missing"])
    assert missing_line.split() == ["missing", "orders.missing", "(none)", "-"]

    code, out, err = run(capsys, "service", "info", "shipping", "-s", url, "--timeout", "5")
    assert code == 1 and "service shipping did not answer" in err


def test_stats(capsys: pytest.CaptureFixture[str], services: tuple[str, list[Service]]) -> None:
    url, running = services
    code, out, _ = run(capsys, "service", "stats", "orders", "-s", url, "--stall", "2")
    assert code == 0
    assert out.splitlines()[-1] == "2 instance(s), 6 request(s), 2 error(s)"
    missing = [ln.split() for ln in out.splitlines() if ln.split()[:1] == ["missing"]]
    assert [m[1:3] for m in missing] == [["1", "1"], ["1", "1"]]
    assert all(ln[-1] == "order" for ln in missing)  # last error "404:no such order"

    code, out, _ = run(capsys, "service", "stats", "orders", running[0].id, "--json", "-s", url)
    (doc,) = json.loads(out)
    assert doc["id"] == running[0].id and doc["type"] == "io.nats.micro.v1.stats_response"
    by_name = {e["name"]: e for e in doc["endpoints"]}
    assert by_name["missing"]["last_error"] == "404:no such order"


def test_ping(capsys: pytest.CaptureFixture[str], services: tuple[str, list[Service]]) -> None:
    url, running = services
    code, out, _ = run(capsys, "service", "ping", "-s", url, "--stall", "2")
    assert code == 0 and out.splitlines()[-1] == "3 answer(s)"
    assert all(ln.endswith(" ms") for ln in out.splitlines()[:-1])
    code, out, _ = run(capsys, "service", "ping", "orders", "--count", "1", "-s", url)
    assert out.splitlines()[-1] == "1 answer(s)"
    code, out, _ = run(capsys, "service", "ping", "billing", running[2].id, "-s", url)
    assert code == 0 and running[2].id in out
    code, _, err = run(capsys, "service", "ping", "shipping", "-s", url, "--timeout", "5")
    assert code == 1 and "did not answer" in err


def test_bad_names_are_refused(capsys: pytest.CaptureFixture[str], nats_server: NatsServer) -> None:
    code, _, err = run(capsys, "service", "info", "bad.name", "-s", nats_server.url)
    assert code == 2 and "invalid service name" in err and "Traceback" not in err


def test_service_ping_from_the_command_line(services: tuple[str, list[Service]]) -> None:
    url, running = services
    env = {**os.environ, "PYTHONPATH": str(REPO), "NATS_URL": url}
    proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "service", "ping", "billing"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert running[2].id in proc.stdout
