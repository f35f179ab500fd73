"""The ASGI Django project under daphne, as under uvicorn (tests/web/test_asgi.py): async views
through run_sync, the health view, and what daphne does instead of the ASGI lifespan."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer, free_port

from ..conftest import wait_until
from ._kit import call, daphne_start, django_project, stop

pytest.importorskip("daphne")


def _shop(tmp_path: Path, servers: str) -> dict[str, str]:
    return django_project(tmp_path, {"servers": [servers], "on_connect": ["shop.nats.declare_shop"],
                                     "options": {"name": "daphne-shop", "reconnect_time_wait": 0.2},
                                     "drain_timeout": 20})


def _stored(nats_server: NatsServer, subject: str) -> int:
    with nats.connect(nats_server.url) as nc:
        info = nc.jetstream().stream_info("SHOP", subjects_filter=subject)
        return sum((info.state.subjects or {}).values())


def test_daphne_serves_async_publishes_and_the_health_view(nats_server: NatsServer, tmp_path: Path) -> None:
    log = tmp_path / "daphne.log"
    with daphne_start("shop.asgi:application", _shop(tmp_path, nats_server.url), log, cwd=tmp_path) as (proc, base):
        assert base is not None, log.read_text()
        assert call("GET", f"{base}/healthz/nats")[0] == 200
        with ThreadPoolExecutor(max_workers=50) as pool:
            answers = list(pool.map(lambda i: call("POST", f"{base}/async/orders", {"id": i}), range(200)))
        assert {status for status, _ in answers} == {201}, answers
        assert len({body["seq"] for _, body in answers}) == 200
        status, state = call("GET", f"{base}/async/state")
        assert status == 200 and state["connected"] and state["on_loop_thread"], state
        stop(proc, signal.SIGTERM, timeout=30)
    assert _stored(nats_server, "orders.new") == 200


def test_daphne_sends_no_lifespan_the_client_connects_on_first_use_and_flushes_at_exit(
        nats_server: NatsServer, tmp_path: Path) -> None:
    # daphne does not speak the ASGI lifespan protocol: NatsLifespan's startup never runs, so a
    # server that cannot be reached does not stop daphne (the health view says 503), and the
    # client connects on first use and is closed at exit (atexit), flushing buffered publishes.
    log = tmp_path / "daphne.log"
    away = _shop(tmp_path, f"nats://127.0.0.1:{free_port()}")
    with daphne_start("shop.asgi:application", away, log, cwd=tmp_path) as (proc, base):
        assert base is not None, log.read_text()
        assert call("GET", f"{base}/healthz/nats")[0] == 503
        stop(proc, signal.SIGTERM, timeout=30)

    with daphne_start("shop.asgi:application", _shop(tmp_path, nats_server.url), log, cwd=tmp_path) as (proc, base):
        assert base is not None, log.read_text()
        with ThreadPoolExecutor(max_workers=20) as pool:
            statuses = list(pool.map(lambda i: call("POST", f"{base}/async/notes", {"n": i})[0], range(300)))
        assert set(statuses) == {202}
        code = stop(proc, signal.SIGTERM, timeout=30)
    assert code == 0, log.read_text()
    assert "lifespan" not in log.read_text().lower()
    assert wait_until(lambda: _stored(nats_server, "notes.new") == 300, timeout=10), _stored(nats_server, "notes.new")
