"""The Django app natsjs_sync.contrib.django: system checks, the health view, and the nats_worker
command draining on SIGTERM (run on the example project, examples/django_app.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer, free_port

from ..conftest import wait_until
from ._kit import EXAMPLES, OPERATOR_HEADER, call, django_project, example_env, gunicorn_start, load_example, stop

N_ORDERS = 200


@pytest.fixture
def project(nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example project, configured (settings, URLs) and pointed at the test's server."""
    monkeypatch.setenv("NATS_URL", nats_server.url)
    module = load_example("django_app")
    from natsjs_sync.contrib.django import close_client

    yield module
    close_client()


def test_system_checks_report_each_bad_setting(project: ModuleType) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError
    from django.test import override_settings

    from natsjs_sync.contrib.django.checks import check_settings

    assert check_settings() == []  # the example's settings are right
    bad = {"servers": ["nats://127.0.0.1:4222", "http://127.0.0.1:8222"], "options": {"nmae": "x"},
           "workers": ["example_django_app.no_such_worker"], "drain_timeout": 0, "helth": {}}
    with override_settings(NATS=bad):
        errors = check_settings()
        assert [e.id for e in errors] == ["natsjs_sync.E001"] * 5, errors
        text = "\n".join(e.msg for e in errors)
        for word in ("'http'", "'nmae'", "no_such_worker", "drain_timeout", "'helth'"):
            assert word in text
        with pytest.raises(SystemCheckError, match=r"natsjs_sync\.E001"):
            call_command("check")

    # Values too: each of these passed the checks, then every health probe answered 500.
    bad = {"servers": "nats://alice:hunter2@127.0.0.1:4x22",
           "options": {"connect_timeout": "2s", "password": 1234567},
           "health": {"consumers": ["ORDERS"], "max_usage": 90}}
    with override_settings(NATS=bad):
        text = "\n".join(e.msg for e in check_settings())
        for named in ("NATS['servers']: bad port", "NATS['options']['connect_timeout']: ",
                      "NATS['options']['password']: password must be a str", "NATS['health']['consumers']: ",
                      "NATS['health']['max_usage']: "):
            assert named in text, text
        assert "hunter2" not in text and "1234567" not in text, text


def test_the_app_refuses_bad_settings_when_django_starts(project: ModuleType) -> None:
    # gunicorn and uwsgi run no system checks: AppConfig.ready() is where such a server stops.
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    config = apps.get_app_config("natsjs_sync")
    config.ready()  # the example's settings are right, its dotted paths import
    with override_settings(NATS={"health": {"max_usage": 90}, "options": {"connect_timeout": "2s"}}):
        with pytest.raises(ImproperlyConfigured) as info:
            config.ready()
    assert "NATS['health']['max_usage']" in str(info.value)
    assert "NATS['options']['connect_timeout']" in str(info.value)
    # A mistyped dotted path passed start-up, then every NATS view answered 500: imported here too.
    with override_settings(NATS={"health_details": "example_django_app.operators", "on_connect": "nowhere.declare"}):
        with pytest.raises(ImproperlyConfigured) as info:
            config.ready()
    assert "NATS['health_details']: 'example_django_app.operators' cannot be used" in str(info.value)
    assert "NATS['on_connect']: 'nowhere.declare' cannot be used" in str(info.value)


@pytest.mark.parametrize(("nats", "named"), [
    ({"health_details": "shop.auth.operator_only"}, "NATS['health_details']: 'shop.auth.operator_only' cannot be used"),
    ({"on_connect": ["shop.nats.declare_stream"]}, "NATS['on_connect']: 'shop.nats.declare_stream' cannot be used"),
    ({"options": {"connect_timeout": "2s"}}, "NATS['options']['connect_timeout']: connect_timeout must be"),
])
@pytest.mark.parametrize("preload", [True, False], ids=["preload", "app-in-worker"])
def test_gunicorn_stops_at_start_on_a_mistake_in_the_setting(nats: dict[str, Any], named: str, preload: bool,
                                                             nats_server: NatsServer, tmp_path: Path) -> None:
    # gunicorn runs no system checks; a mistyped dotted path passed its start-up (paths were imported
    # on first use only), then the health probe and every view using NATS answered 500.
    env = django_project(tmp_path, {"servers": nats_server.url, **nats})
    log = tmp_path / "gunicorn.log"
    args = ("--preload", "-w", "1") if preload else ("-w", "1")
    with gunicorn_start("shop.wsgi:application", env, log, chdir=tmp_path, args=args) as (proc, _):
        # With --preload the master stops before it listens; without, once its worker failed to boot.
        assert wait_until(lambda: proc.poll() is not None, timeout=60), f"gunicorn served with {named}"
    assert proc.returncode != 0 and named in log.read_text(), log.read_text()


def test_gunicorn_serves_a_project_whose_dotted_paths_import(nats_server: NatsServer, tmp_path: Path) -> None:
    env = django_project(tmp_path, {"servers": nats_server.url, "health_details": "shop.auth.operators_only",
                                    "on_connect": "shop.nats.declare_streams", "health": {"jetstream": False}})
    log = tmp_path / "gunicorn.log"
    with gunicorn_start("shop.wsgi:application", env, log, chdir=tmp_path, args=("-w", "1")) as (_, base):
        assert base is not None, log.read_text()
        assert call("GET", f"{base}/healthz/nats", timeout=30) == (200, {"status": "pass"})
        status, body = call("GET", f"{base}/healthz/nats", timeout=30, headers={"X-Ops": "yes"})
        assert status == 200 and body["checks"]["connection"]["connected"] is True, body


def test_manage_py_check_reports_each_mistake_and_other_commands_still_run(tmp_path: Path) -> None:
    # The start-up check raised ImproperlyConfigured before any system check ran: 'manage.py check'
    # printed a traceback instead of natsjs_sync.E001, and 'diffsettings' could not run at all.
    env = django_project(tmp_path, {"options": {"connect_timeout": "2s"}, "health": {"timeout": 0},
                                    "health_details": "shop.auth.operator_only"})

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)

    check = manage("check")
    out = check.stdout + check.stderr
    assert check.returncode == 1 and "Traceback" not in out, out
    assert out.count("(natsjs_sync.E001)") == 3, out
    for named in ("NATS['options']['connect_timeout']: ", "NATS['health']['timeout']: ",
                  "NATS['health_details']: 'shop.auth.operator_only' cannot be used"):
        assert named in out, out
    diff = manage("diffsettings")
    assert diff.returncode == 0 and "NATS = " in diff.stdout, diff.stderr
    serve = manage("runserver", "--noreload", f"127.0.0.1:{free_port()}")  # refuses to serve
    assert serve.returncode != 0 and "(natsjs_sync.E001)" in serve.stderr, serve.stderr


def test_health_view_and_get_client_follow_the_settings(project: ModuleType) -> None:
    from django.test import Client as WebClient
    from django.test import override_settings

    from natsjs_sync.contrib.django import get_client, get_holder

    web = WebClient()
    assert get_holder().current is None  # nothing connects before it is asked to
    answer = web.get("/healthz/nats")
    assert answer.status_code == 200 and answer.json() == {"status": "pass"}  # no URL, id or usage by default
    head = web.head("/healthz/nats")  # a probe may ask with HEAD: the same status and headers, no body
    assert (head.status_code, head.content, head["Content-Type"]) == (200, b"", answer["Content-Type"])
    assert "no-store" in head["Cache-Control"]
    nc = get_client()
    assert get_client() is nc and nc.is_connected
    nc.close()
    assert get_client() is not nc  # a closed client is replaced

    with override_settings(NATS={"health": {"streams": ["MISSING"], "jetstream": False}}):
        answer = web.get("/healthz/nats")
        assert answer.status_code == 503 and answer.json() == {"status": "fail"}, answer.json()
        assert web.head("/healthz/nats").status_code == 503
        assert "Cache-Control" in answer  # never cached by a proxy
    with override_settings(NATS={"health": {"streams": ["MISSING"], "jetstream": False},
                                 "health_details": "tests.web._kit.operators_only"}):
        assert web.get("/healthz/nats").json() == {"status": "fail"}
        answer = web.get("/healthz/nats", headers=dict([OPERATOR_HEADER]))
        assert answer.status_code == 503 and answer.json()["checks"]["stream:MISSING"]["status"] == "fail"
    with override_settings(NATS={"health_details": True}):
        assert set(web.get("/healthz/nats").json()["checks"]) == {"connection", "jetstream"}


def _fulfilled(nc: nats.Client) -> dict[str, int]:
    info = nc.jetstream().stream("FULFILMENTS").info(subjects_filter="fulfilments.>")
    return dict(info.state.subjects or {})


def test_nats_worker_drains_on_sigterm_mid_batch(nats_server: NatsServer, tmp_path: Path) -> None:
    env = example_env(nats_server.url, tmp_path, FULFIL_SECONDS="0.05")
    command = [sys.executable, str(EXAMPLES / "django_app.py"), "nats_worker"]

    def start(n: int) -> tuple[subprocess.Popen[bytes], Path]:
        out = tmp_path / f"worker{n}.out"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)

        def running() -> bool:
            assert proc.poll() is None, out.read_text()
            return "running" in out.read_text()

        assert wait_until(running, timeout=60, interval=0.1), out.read_text()
        return proc, out

    with nats.connect(nats_server.url) as nc:
        first, out = start(1)  # it declares the streams and the consumer
        js = nc.jetstream()
        seq_of = {js.publish("orders.new", json.dumps({"id": i}).encode(), msg_id=f"order-{i}").seq: i
                  for i in range(N_ORDERS)}

        assert wait_until(lambda: sum(_fulfilled(nc).values()) >= 20, timeout=60, interval=0.05)
        assert stop(first, timeout=60) == 0, out.read_text()  # SIGTERM mid-batch: a clean exit
        assert "drained" in out.read_text()
        after_first = js.consumer("ORDERS", "fulfil").info()
        acked = {seq_of[s] for s in seq_of if s <= after_first.ack_floor.stream_seq}
        assert 20 <= len(acked) < N_ORDERS, after_first
        assert after_first.num_ack_pending == 0  # what it had received, it finished and acknowledged

        second, out = start(2)
        try:
            def all_done() -> bool:
                info = js.consumer("ORDERS", "fulfil").info()
                return info.num_pending == 0 and info.num_ack_pending == 0
            assert wait_until(all_done, timeout=120, interval=0.1)
        finally:
            assert stop(second, timeout=60) == 0, out.read_text()

        done = _fulfilled(nc)
        assert set(done) == {f"fulfilments.{i}" for i in range(N_ORDERS)}  # nothing acknowledged was lost
        twice = {i for i in acked if done[f"fulfilments.{i}"] != 1}
        assert not twice, twice  # nothing acknowledged was processed again


def test_nats_worker_without_workers_or_with_a_bad_path_says_so(nats_server: NatsServer, tmp_path: Path) -> None:
    env = example_env(nats_server.url, tmp_path)
    bad = subprocess.run([sys.executable, str(EXAMPLES / "django_app.py"), "nats_worker", "nowhere.worker"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "nowhere" in bad.stderr, bad.stderr


def test_nats_worker_runs_a_service_and_stops_it_on_sigterm(nats_server: NatsServer, tmp_path: Path) -> None:
    out = tmp_path / "worker.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, str(EXAMPLES / "django_app.py"), "nats_worker",
                                 "tests.web.workers.stock_service"],
                                env=example_env(nats_server.url, tmp_path), stdout=sink, stderr=subprocess.STDOUT)
    with nats.connect(nats_server.url) as nc:
        try:
            def running() -> bool:
                assert proc.poll() is None, out.read_text()
                return "running" in out.read_text()

            assert wait_until(running, timeout=60, interval=0.1), out.read_text()
            assert nc.request("stock.sku-1", b"", timeout=5).data == b"12"
        finally:
            assert stop(proc, timeout=60) == 0, out.read_text()
        assert "drained" in out.read_text()
        with pytest.raises(nats.NoRespondersError):
            nc.request("stock.sku-1", b"", timeout=5)
