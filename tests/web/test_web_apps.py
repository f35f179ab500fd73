"""The Flask and Django examples, built on natsjs_sync.contrib: concurrent requests through one
client per process, outages answered 503/504, and gunicorn's pre-forked workers each with a
connection of their own, made by their first request."""

from __future__ import annotations

import importlib.util
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until
from ._kit import call, example_env, gunicorn, gunicorn_start, load_example, serve

N_ORDERS = 100
N_PRICES = 100
WORKERS = 3
# 200 requests at once on a loaded 2-core machine: the examples' 2 s per NATS
# call (and for the health check) was once not enough for the last of them.
BURST_CALL_TIMEOUT = 10.0
APPS = {"flask": "flask_app:create_app()", "django": "django_app:application"}


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
        results = list(pool.map(lambda job: call(*job), jobs))

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
        retried = list(pool.map(lambda i: call("POST", f"{base}/orders", {"id": i}), range(20)))
    assert all(status == 201 and body["duplicate"] for status, body in retried)
    with nats.connect(nats_server.url) as nc:
        state = nc.jetstream().stream_info("ORDERS").state
        assert (state.messages, state.first_seq, state.last_seq) == (N_ORDERS, 1, N_ORDERS)

    # Mistakes and outages are answers, not 500 pages.
    assert call("POST", f"{base}/orders", b"not json")[0] == 400
    status, body = call("GET", f"{base}/price/discontinued.item")  # pricing.* does not match two tokens
    assert status == 503 and "service unavailable" in body["error"]
    assert call("GET", f"{base}/healthz/nats") == (200, {"status": "pass"})  # the status alone, by default


def test_flask_app_shares_one_client(nats_server: NatsServer, pricing: Counter[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_CALL_TIMEOUT", str(BURST_CALL_TIMEOUT))
    app = load_example("flask_app").create_app(nats_server.url)
    holder = app.extensions["nats"]
    try:
        for base in serve(app):
            _exercise(base, nats_server, pricing)
        # One connection served every request thread.
        assert holder.current.stats.out_msgs >= N_ORDERS + N_PRICES
    finally:
        holder.close()


def test_django_app_shares_one_client(nats_server: NatsServer, pricing: Counter[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", nats_server.url)
    monkeypatch.setenv("NATS_CALL_TIMEOUT", str(BURST_CALL_TIMEOUT))
    module = load_example("django_app")
    from django.conf import settings

    from natsjs_sync.contrib.django import close_client, get_holder

    # Django is configured once a process: an earlier load may have set the health budget.
    monkeypatch.setitem(settings.NATS["health"], "timeout", BURST_CALL_TIMEOUT)
    close_client()  # the next client is made from the settings of now

    try:
        for base in serve(module.application):
            _exercise(base, nats_server, pricing)
        nc = get_holder().current
        assert nc is not None and nc.stats.out_msgs >= N_ORDERS + N_PRICES
    finally:
        close_client()


def _outlive_outages(base: str, proxy: FaultProxy, get_client: Callable[[], nats.Client]) -> None:
    """The app rides out an outage with its client, and replaces a client that closed."""
    assert call("GET", f"{base}/price/sku-1") == (200, {"sku": "sku-1", "price": "7.50"})
    first = get_client()

    proxy.refuse_new()
    proxy.cut()  # the server is gone: open connections reset, new ones refused
    status, body = call("GET", f"{base}/price/sku-1")
    assert status in (503, 504), body  # an answer, not a 500 page
    assert call("GET", f"{base}/healthz/nats")[0] == 503
    proxy.heal()
    assert wait_until(lambda: call("GET", f"{base}/price/sku-1")[0] == 200, timeout=60, interval=0.2)
    assert get_client() is first  # the same client reconnected

    proxy.refuse_new()
    proxy.cut()
    first.close()  # as if it had given up during a long outage
    status, body = call("GET", f"{base}/price/sku-1")
    assert status == 503 and "NATS unavailable" in body["error"], body  # the replacement cannot connect yet
    proxy.heal()
    assert wait_until(lambda: call("GET", f"{base}/price/sku-1")[0] == 200, timeout=60, interval=0.2)
    second = get_client()
    assert second is not first and not second.is_closed
    assert call("POST", f"{base}/orders", {"id": "after-outage"})[0] == 201


def test_flask_app_outlives_outages(nats_server: NatsServer, pricing: Counter[str]) -> None:
    with FaultProxy(nats_server.url) as proxy:
        app = load_example("flask_app").create_app(proxy.url)
        try:
            for base in serve(app):
                _outlive_outages(base, proxy, app.extensions["nats"])
        finally:
            app.extensions["nats"].close()


def _order_while_away(base: str, proxy: FaultProxy, holder: Any, nats_server: NatsServer) -> None:
    assert call("POST", f"{base}/orders", {"id": "first"})[0] == 201  # connected, stream made
    proxy.refuse_new()
    proxy.cut()
    assert wait_until(lambda: holder.current is not None and not holder.current.is_connected, 15)
    status, body = call("POST", f"{base}/orders", {"id": "while-away"})
    assert status == 503 and "nothing was sent" in body["error"], body
    status, body = call("GET", f"{base}/price/sku-1")
    assert status == 503 and "nothing was sent" in body["error"], body
    proxy.heal()
    assert wait_until(lambda: call("GET", f"{base}/price/sku-1")[0] == 200, timeout=60, interval=0.2)
    holder.current.flush(timeout=10)
    with nats.connect(nats_server.url) as nc:
        assert nc.jetstream().stream_info("ORDERS").state.messages == 1, "stored after the reconnect"
    status, body = call("POST", f"{base}/orders", {"id": "while-away"})  # the client's retry
    assert status == 201 and body["seq"] == 2 and not body["duplicate"], body


def test_an_order_posted_while_the_server_is_away_is_answered_not_sent_and_never_stored(
        nats_server: NatsServer, pricing: Counter[str]) -> None:
    """web.rst's outage promises: a JetStream publish (and a request) that times out
    unsent answers 503 "nothing was sent", and the order is not stored after the
    reconnect, so the client's retry stores it once. The old code answered 504
    "timed out: no reply" and stored the order once the server was back."""
    with FaultProxy(nats_server.url) as proxy:
        app = load_example("flask_app").create_app(proxy.url)
        try:
            for base in serve(app):
                _order_while_away(base, proxy, app.extensions["nats"], nats_server)
        finally:
            app.extensions["nats"].close()


def test_django_app_outlives_outages(nats_server: NatsServer, pricing: Counter[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultProxy(nats_server.url) as proxy:
        monkeypatch.setenv("NATS_URL", proxy.url)
        module = load_example("django_app")
        from natsjs_sync.contrib.django import close_client

        try:
            for base in serve(module.application):
                _outlive_outages(base, proxy, module.get_client)
        finally:
            close_client()


def _whoami_until_every_worker_answered(base: str) -> dict[int, set[int]]:
    seen: dict[int, set[int]] = {}
    with ThreadPoolExecutor(max_workers=2 * WORKERS) as pool:
        for _ in range(20):  # bounded: 20 rounds of 30 requests
            for status, body in pool.map(lambda _: call("GET", f"{base}/whoami"), range(30)):
                assert status == 200, body
                seen.setdefault(body["pid"], set()).add(body["client_id"])
            if len(seen) == WORKERS:
                break
    assert len(seen) == WORKERS, f"requests reached only {len(seen)} workers"
    return seen


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_gunicorn_prefork_workers_each_make_their_own_connection(kind: str, nats_server: NatsServer,
                                                                 tmp_path: Path) -> None:
    with FaultProxy(nats_server.url) as proxy, \
            gunicorn(APPS[kind], example_env(proxy.url, tmp_path), tmp_path / "gunicorn.log") as base:
        assert proxy.accepted == 0  # --preload made the app in the master, and no connection with it
        seen = _whoami_until_every_worker_answered(base)
        assert all(len(cids) == 1 for cids in seen.values()), seen  # one connection per worker
        assert len({next(iter(cids)) for cids in seen.values()}) == WORKERS
        assert proxy.accepted == WORKERS  # and none more: no master's, no spare

        # And each worker's connection does real work: every order stored once.
        with ThreadPoolExecutor(max_workers=2 * WORKERS) as pool:
            results = list(pool.map(lambda i: call("POST", f"{base}/orders", {"id": i}), range(60)))
        assert all(status == 201 for status, _ in results), results
        with nats.connect(nats_server.url) as nc:
            assert nc.jetstream().stream_info("ORDERS").state.messages == 60


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_gunicorn_workers_answer_every_request_while_the_server_is_away(
        kind: str, nats_server: NatsServer, pricing: Counter[str], tmp_path: Path) -> None:
    with FaultProxy(nats_server.url) as proxy, \
            gunicorn(APPS[kind], example_env(proxy.url, tmp_path), tmp_path / "gunicorn.log") as base:
        # The examples' default 2 s per call stays: while the server is away each
        # request waits it out, and three sync workers take 30 requests.
        _whoami_until_every_worker_answered(base)  # every worker has its client

        urls = [f"{base}/price/sku-1", f"{base}/healthz/nats", f"{base}/whoami"]

        def burst(n: int = 30) -> list[tuple[int, Any]]:
            with ThreadPoolExecutor(max_workers=2 * WORKERS) as pool:
                return list(pool.map(lambda i: call("GET", urls[i % 3]), range(n)))

        assert {status for status, _ in burst()} == {200}

        proxy.refuse_new()
        proxy.cut()  # every worker's connection reset; no new one accepted
        away = burst()
        statuses = Counter(status for status, _ in away)
        assert set(statuses) <= {200, 503, 504}, away  # every request answered, none with a 500 page
        assert statuses[503] + statuses[504] > 0, away
        health = [answer for i, answer in enumerate(away) if urls[i % 3].endswith("/healthz/nats")]
        assert health and all(answer == (503, {"status": "fail"}) for answer in health), health

        proxy.heal()

        def all_back() -> bool:
            results = burst()
            assert {status for status, _ in results} <= {200, 503, 504}, results
            return {status for status, _ in results} == {200}

        assert wait_until(all_back, timeout=90, interval=0.2)  # bounded: each round is 30 requests
        assert len(_whoami_until_every_worker_answered(base)) == WORKERS


def test_gunicorn_workers_forked_while_the_master_connects_make_their_own_connection(
        nats_server: NatsServer, tmp_path: Path) -> None:
    # The master's warm-up thread holds the per-process client's lock, mid-connect, while
    # gunicorn forks: each worker must get a lock (and a connection) of its own, not wait for
    # ever on one no thread of the worker will release.
    log = tmp_path / "gunicorn.log"
    with gunicorn("tests.web.forking_app:create_app()", example_env(nats_server.url, tmp_path), log,
                  workers=2) as base:
        seen: dict[int, int] = {}
        for _ in range(20):  # bounded: 20 rounds of 6 requests
            with ThreadPoolExecutor(max_workers=4) as pool:
                for status, body in pool.map(lambda _: call("GET", f"{base}/whoami", timeout=20), range(6)):
                    assert status == 200, (body, log.read_text())
                    seen[body["pid"]] = body["client_id"]
            if len(seen) == 2:
                break
        assert len(seen) == 2, f"requests reached only {len(seen)} workers"
        assert len(set(seen.values())) == 2  # a connection each
        status, body = call("GET", f"{base}/healthz/nats", timeout=20)
        assert (status, body) == (200, {"status": "pass"}), body


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_gunicorn_stops_at_start_on_a_bad_setting(kind: str, nats_server: NatsServer, tmp_path: Path) -> None:
    # A health timeout of -1 s once passed start-up; then every health probe answered 500.
    # gunicorn runs no Django system checks: the app's own start-up check must stop it.
    log = tmp_path / "gunicorn.log"
    with gunicorn_start(APPS[kind], example_env(nats_server.url, tmp_path, NATS_CALL_TIMEOUT="-1"), log,
                        args=("--preload", "-w", "1")) as (proc, base):
        assert base is None, "gunicorn started serving with a bad setting"
    named = "NATS_HEALTH['timeout']" if kind == "flask" else "NATS['health']['timeout']"
    assert proc.returncode != 0 and named in log.read_text(), log.read_text()
    assert "timeout must be >= 0" in log.read_text()


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_gunicorn_gevent_workers_serve_through_a_server_restart(kind: str, nats_server: NatsServer,
                                                               pricing: Counter[str], tmp_path: Path) -> None:
    if importlib.util.find_spec("gevent") is None:  # not imported here: gunicorn's worker does it
        pytest.skip("needs gevent")
    log = tmp_path / "gunicorn.log"
    args = ("-k", "gevent", "--worker-connections", "100", "-w", "2", "--graceful-timeout", "5", "--timeout", "60")
    orders = iter(range(100_000))
    answered: Counter[int] = Counter()

    def burst(n: int = 40) -> list[int]:
        jobs: list[tuple[str, str, Any]] = []
        for i in range(n):
            jobs.append(("POST", f"{base}/orders", {"id": next(orders), "item": "sku-1"}) if i % 2
                        else ("GET", f"{base}/price/sku-{i}", None))
        with ThreadPoolExecutor(max_workers=40) as pool:  # one worker's greenlets take them all at once
            statuses = [status for status, _ in pool.map(lambda job: call(*job), jobs)]
        answered.update(statuses)
        assert set(statuses) <= {200, 201, 503, 504}, statuses  # answered, never a 500 page
        return statuses

    with gunicorn_start(APPS[kind], example_env(nats_server.url, tmp_path), log, args=args) as (_, url):
        assert url is not None, log.read_text()
        base = url
        assert set(burst()) == {200, 201}, log.read_text()
        nats_server.restart()
        assert wait_until(lambda: set(burst()) == {200, 201}, timeout=90, interval=0.2), log.read_text()
    with nats.connect(nats_server.url) as nc:
        stored = nc.jetstream().stream_info("ORDERS").state.messages
    # Every order answered 201 is stored once; one answered 504 (sent, unanswered) may be too.
    assert answered[201] <= stored <= answered[201] + answered[504], (answered, stored)
