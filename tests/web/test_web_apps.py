"""The Flask and Django examples serve concurrent requests through one shared
Client, and gunicorn's pre-fork workers each end up with a connection of their own."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from socketserver import ThreadingMixIn
from types import ModuleType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer, free_port

from ..conftest import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
N_ORDERS = 100
N_PRICES = 100


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 256  # 200 requests arrive at once


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Django finds its URLconf by module name
    spec.loader.exec_module(module)
    if name == "django_app":
        from django.urls import clear_url_caches

        clear_url_caches()  # resolve to this module's views, not those of an earlier load
    return module


def _serve(app: Callable[..., Any]) -> Iterator[str]:
    httpd = make_server("127.0.0.1", 0, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def pricing(nats_server: NatsServer) -> Iterator[Counter[str]]:
    """A pricing service on ``pricing.*``, counting the requests it answers."""
    served: Counter[str] = Counter()
    lock = threading.Lock()
    nc = nats.connect(nats_server.url, name="pricing")

    def answer(msg: nats.Msg) -> None:
        sku = msg.subject.split(".", 1)[1]
        with lock:
            served[sku] += 1
        msg.respond(f"{len(sku) * 1.5:.2f}".encode())

    nc.subscribe("pricing.*", cb=answer)
    nc.flush()
    yield served
    nc.close()


def _exercise(base: str, nats_server: NatsServer, served: Counter[str]) -> None:
    """200 concurrent requests (100 JetStream publishes, 100 requests), then exact accounting."""
    jobs: list[tuple[str, str, Any]] = [("POST", f"{base}/orders", {"id": i, "item": f"sku-{i % 9}"})
                                        for i in range(N_ORDERS)]
    jobs += [("GET", f"{base}/price/sku-{i}", None) for i in range(N_PRICES)]
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda job: _call(*job), jobs))

    orders, prices = results[:N_ORDERS], results[N_ORDERS:]
    assert [status for status, _ in orders] == [201] * N_ORDERS, orders
    assert sorted(body["seq"] for _, body in orders) == list(range(1, N_ORDERS + 1))
    assert not any(body["duplicate"] for _, body in orders)
    assert [status for status, _ in prices] == [200] * N_PRICES, prices
    for i, (_, body) in enumerate(prices):
        assert body == {"sku": f"sku-{i}", "price": f"{len(f'sku-{i}') * 1.5:.2f}"}
    assert served == Counter({f"sku-{i}": 1 for i in range(N_PRICES)})

    # Retried POSTs are recognised, and nothing more is stored.
    with ThreadPoolExecutor(max_workers=20) as pool:
        retried = list(pool.map(lambda i: _call("POST", f"{base}/orders", {"id": i}), range(20)))
    assert all(status == 201 and body["duplicate"] for status, body in retried)
    with nats.connect(nats_server.url) as nc:
        state = nc.jetstream().stream_info("ORDERS").state
        assert (state.messages, state.first_seq, state.last_seq) == (N_ORDERS, 1, N_ORDERS)

    # Mistakes and outages are answers, not 500 pages.
    assert _call("POST", f"{base}/orders", b"not json")[0] == 400
    status, body = _call("GET", f"{base}/price/discontinued.item")  # pricing.* does not match two tokens
    assert status == 503 and "service unavailable" in body["error"]


def test_flask_app_shares_one_client(nats_server: NatsServer, pricing: Counter[str]) -> None:
    app = _load("flask_app").create_app(nats_server.url)
    nc: nats.Client = app.extensions["nats"]()
    try:
        for base in _serve(app):
            _exercise(base, nats_server, pricing)
        # One connection served every request thread.
        assert nc.stats.out_msgs >= N_ORDERS + N_PRICES
    finally:
        nc.close()


def test_django_app_shares_one_client(nats_server: NatsServer, pricing: Counter[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", nats_server.url)
    module = _load("django_app")
    try:
        for base in _serve(module.application):
            _exercise(base, nats_server, pricing)
        assert module._client is not None and module._client.stats.out_msgs >= N_ORDERS + N_PRICES
    finally:
        if module._client is not None:
            module._client.close()


def _outlive_outages(base: str, proxy: FaultProxy, get_client: Callable[[], nats.Client]) -> None:
    """The app's holder rides out an outage with its client, and replaces a client that closed."""
    assert _call("GET", f"{base}/price/sku-1") == (200, {"sku": "sku-1", "price": "7.50"})
    first = get_client()

    proxy.refuse_new()
    proxy.cut()  # the server is gone: open connections reset, new ones refused
    status, body = _call("GET", f"{base}/price/sku-1")
    assert status in (503, 504), body  # an answer, not a 500 page
    proxy.heal()
    assert wait_until(lambda: _call("GET", f"{base}/price/sku-1")[0] == 200, timeout=60, interval=0.2)
    assert get_client() is first  # the same client reconnected

    proxy.refuse_new()
    proxy.cut()
    first.close()  # as if it had given up during a long outage
    status, body = _call("GET", f"{base}/price/sku-1")
    assert status == 503 and "NATS unavailable" in body["error"], body  # the replacement cannot connect yet
    proxy.heal()
    assert wait_until(lambda: _call("GET", f"{base}/price/sku-1")[0] == 200, timeout=60, interval=0.2)
    second = get_client()
    assert second is not first and not second.is_closed
    assert _call("POST", f"{base}/orders", {"id": "after-outage"})[0] == 201


def test_flask_app_outlives_outages(nats_server: NatsServer, pricing: Counter[str]) -> None:
    with FaultProxy(nats_server.url) as proxy:
        app = _load("flask_app").create_app(proxy.url)
        try:
            for base in _serve(app):
                _outlive_outages(base, proxy, app.extensions["nats"])
        finally:
            app.extensions["nats"]().close()


def test_django_app_outlives_outages(nats_server: NatsServer, pricing: Counter[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultProxy(nats_server.url) as proxy:
        monkeypatch.setenv("NATS_URL", proxy.url)
        module = _load("django_app")
        try:
            for base in _serve(module.application):
                _outlive_outages(base, proxy, module.get_client)
        finally:
            if module._client is not None:
                module._client.close()


def test_gunicorn_prefork_workers_each_have_their_own_connection(nats_server: NatsServer,
                                                                 tmp_path: Path) -> None:
    workers = 3
    port = free_port()
    # HOME: newer gunicorns put a control socket under ~/.gunicorn.
    env = {**os.environ, "NATS_URL": nats_server.url, "HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))}
    # --preload: the app, and so its Client, is made in the master before the fork.
    with open(tmp_path / "gunicorn.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--preload", "-w", str(workers), "-b", f"127.0.0.1:{port}",
             "--chdir", str(EXAMPLES), "--graceful-timeout", "5", "flask_app:create_app()"],
            env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        def serving() -> bool:
            assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        # Another process's start-up offers nothing to wait on but its port.
        assert wait_until(serving, timeout=60, interval=0.1), "gunicorn did not start"

        seen: dict[int, set[int]] = {}
        made_by: set[tuple[int, int]] = set()
        with ThreadPoolExecutor(max_workers=2 * workers) as pool:
            for _ in range(20):  # bounded: 20 rounds of 30 requests
                for status, body in pool.map(lambda _: _call("GET", f"{base}/whoami"), range(30)):
                    assert status == 200
                    seen.setdefault(body["pid"], set()).add(body["client_id"])
                    made_by.add((body["made_by"]["pid"], body["made_by"]["client_id"]))
                if len(seen) == workers:
                    break
        assert len(seen) == workers, f"requests reached only {len(seen)} workers"
        assert made_by == {(proc.pid, next(iter(made_by))[1])}  # all inherited one client from the master
        master_cid = next(iter(made_by))[1]
        per_worker = {pid: cids for pid, cids in seen.items()}
        assert all(len(cids) == 1 for cids in per_worker.values()), per_worker  # one connection per worker
        worker_cids = {next(iter(cids)) for cids in per_worker.values()}
        assert len(worker_cids) == workers and master_cid not in worker_cids

        # And each worker's connection does real work: every order stored once.
        with ThreadPoolExecutor(max_workers=2 * workers) as pool:
            results = list(pool.map(lambda i: _call("POST", f"{base}/orders", {"id": i}), range(60)))
        assert all(status == 201 for status, _ in results)
        with nats.connect(nats_server.url) as nc:
            assert nc.jetstream().stream_info("ORDERS").state.messages == 60
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
