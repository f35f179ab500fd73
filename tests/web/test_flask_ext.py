"""The Flask extension: settings from app.config, one lazily made client per process, health, errors."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

import natsjs_sync as nats
from natsjs_sync.contrib.flask import NATS
from natsjs_sync.contrib.process import ProcessClient, SettingsError
from natsjs_sync.testing import FaultProxy, NatsServer, free_port

from ..conftest import wait_until
from ._kit import OPERATOR_HEADER, broken_decider, operators_only


def _app(url: str, **config: Any) -> tuple[Flask, NATS]:
    app = Flask("shop")
    app.config.update(NATS_SERVERS=url, **config)
    ext = NATS(app)

    @app.get("/ping")
    def ping() -> Any:
        reply = ext.client.request("svc.ping", b"", timeout=10.0)  # answered in ms; generous for a loaded machine
        return {"client_id": ext.client.client_id, "reply": reply.data.decode()}

    return app, ext


@pytest.fixture
def responder(nats_server: NatsServer) -> Iterator[None]:
    nc = nats.connect(nats_server.url)
    nc.subscribe("svc.ping", cb=lambda msg: msg.respond(b"pong"))
    nc.flush()
    yield
    nc.close()


def test_the_client_is_made_by_the_first_request_not_by_init_app(nats_server: NatsServer, responder: None) -> None:
    app, _ = _app(nats_server.url)
    holder: ProcessClient = app.extensions["nats"]
    try:
        assert holder.current is None  # a pre-fork master makes none
        web = app.test_client()
        first = web.get("/ping")
        assert first.status_code == 200 and first.json is not None and first.json["reply"] == "pong"
        nc = holder.current
        assert nc is not None and nc.is_connected
        assert [web.get("/ping").json["client_id"] for _ in range(3)] == [nc.client_id] * 3  # type: ignore[index]

        nc.close()  # as if it had given up: the next request makes a new one
        assert web.get("/ping").status_code == 200
        assert holder.current is not None and holder.current is not nc and holder.current.is_connected
    finally:
        holder.close()


def test_bad_settings_stop_the_app_at_init_app_naming_each_mistake() -> None:
    app = Flask("shop")
    app.config.update(NATS_SERVERS="http://127.0.0.1:4222", NATS_OPTIONS={"max_reconect_attempts": -1},
                      NATS_HEALTH={"stream": ["ORDERS"]}, NATS_ON_CONNECT=["shop.missing.declare"])
    with pytest.raises(SettingsError) as info:
        NATS(app)
    problems = "\n".join(info.value.problems)
    assert len(info.value.problems) == 4, problems
    for word in ("'http'", "max_reconect_attempts", "'stream'", "shop.missing.declare"):
        assert word in problems
    app.config.update(NATS_SERVERS=None, NATS_OPTIONS=None, NATS_HEALTH=None, NATS_ON_CONNECT=None,
                      NATS_HEALTH_URL="healthz")
    with pytest.raises(SettingsError, match="NATS_HEALTH_URL"):
        NATS(app)


@pytest.mark.parametrize(("config", "named"), [
    # Each of these passed init_app, then made every request and health probe answer 500.
    ({"NATS_HEALTH": {"consumers": ["ORDERS"]}}, "NATS_HEALTH['consumers']: a consumer is named 'STREAM/CONSUMER'"),
    ({"NATS_HEALTH": {"max_usage": 90}}, "NATS_HEALTH['max_usage']: max_usage is a share of a limit"),
    ({"NATS_HEALTH": {"streams": "ORDERS"}}, "NATS_HEALTH['streams']: streams is a list of names"),
    ({"NATS_HEALTH": {"timeout": "2s"}}, "NATS_HEALTH['timeout']: timeout must be a number of seconds"),
    ({"NATS_OPTIONS": {"connect_timeout": "2s"}}, "NATS_OPTIONS['connect_timeout']: connect_timeout must be a number"),
    ({"NATS_OPTIONS": {"max_reconnect_attempts": 1.5}}, "NATS_OPTIONS['max_reconnect_attempts']"),
    ({"NATS_OPTIONS": {"error_cb": "myapp.errors"}}, "NATS_OPTIONS['error_cb']: error_cb must be callable"),
    ({"NATS_HEALTH_DETAILS": "yes"}, "NATS_HEALTH_DETAILS: 'yes' cannot be used"),
    ({"NATS_ERROR_HANDLERS": "no"}, "NATS_ERROR_HANDLERS is True or False"),
])
def test_bad_values_stop_the_app_at_init_app_naming_the_setting_and_key(config: dict[str, Any], named: str) -> None:
    app = Flask("shop")
    app.config.update(NATS_SERVERS="nats://127.0.0.1:4222", **config)
    with pytest.raises(SettingsError) as info:
        NATS(app)
    assert len(info.value.problems) == 1 and info.value.problems[0].startswith(named), info.value.problems


def test_settings_errors_show_no_secret() -> None:
    app = Flask("shop")
    app.config.update(NATS_SERVERS=["nats://127.0.0.1:4222", "http://alice:hunter2@nats.internal:4222",
                                    "nats://bob:hunter3@nats.internal:42x2", "nats://tok-hunter4@h:1:2"],
                      NATS_OPTIONS={"password": 12345678, "token": ["hunter5"], "connect_timeout": "hunter6"})
    with pytest.raises(SettingsError) as info:
        NATS(app)
    text = str(info.value)
    assert len(info.value.problems) == 6, info.value.problems
    for secret in ("hunter2", "hunter3", "hunter4", "12345678", "hunter5", "hunter6"):
        assert secret not in text, text
    for named in ("'http'", "NATS_SERVERS", "NATS_OPTIONS['password']", "NATS_OPTIONS['connect_timeout']"):
        assert named in text, text


def test_errors_escaping_a_view_are_answered_503_or_504(nats_server: NatsServer) -> None:
    app, _ = _app(nats_server.url)
    try:
        reply = app.test_client().get("/ping")  # nobody serves svc.ping
        assert reply.status_code == 503 and reply.json == {"error": "service unavailable: no responders on 'svc.ping'"}
    finally:
        app.extensions["nats"].close()

    app, _ = _app(nats_server.url, NATS_ERROR_HANDLERS=False)
    app.testing = False
    try:
        assert app.test_client().get("/ping").status_code == 500
    finally:
        app.extensions["nats"].close()


def test_on_connect_runs_for_each_new_client_and_a_failure_is_an_answer(nats_server: NatsServer) -> None:
    made: list[nats.Client] = []
    ext = NATS()

    @ext.on_connect
    def declare(nc: nats.Client) -> None:
        made.append(nc)
        nc.jetstream().create_or_update_stream(name="EVENTS", subjects=["events.>"])

    app = Flask("events")
    app.config["NATS_SERVERS"] = nats_server.url
    ext.init_app(app)

    @app.post("/events")
    def post_event() -> Any:
        return {"seq": ext.jetstream().publish("events.x", b"1").seq}, 201

    web = app.test_client()
    try:
        assert web.post("/events").status_code == 201 and len(made) == 1
        made[0].close()
        assert web.post("/events").json == {"seq": 2} and len(made) == 2

        ext.holder(app).close()

        @ext.on_connect
        def refuse(nc: nats.Client) -> None:
            raise nats.NoServersError("declaring failed")

        answer = web.post("/events")
        assert answer.status_code == 503 and "declaring failed" in answer.json["error"]  # type: ignore[index]
        assert made[-1].is_closed  # the half-set-up client was closed, not handed out
    finally:
        ext.holder(app).close()


def test_health_endpoint_is_served_only_where_the_app_asks(nats_server: NatsServer) -> None:
    app, ext = _app(nats_server.url)
    try:
        assert app.test_client().get("/healthz/nats").status_code == 404  # no route the app did not ask for
        assert ext.holder(app).current is None  # and so no connection made by a stranger's request
    finally:
        ext.holder(app).close()
    app, ext = _app(nats_server.url, NATS_HEALTH_URL="/ops/ready")
    try:
        web = app.test_client()
        assert web.get("/healthz/nats").status_code == 404
        assert web.get("/ops/ready").status_code == 200
    finally:
        ext.holder(app).close()


def test_health_body_is_the_status_alone_unless_the_caller_may_see_more(nats_server: NatsServer) -> None:
    details_shown = {"status", "elapsed_ms", "checks"}
    for details, shown_to in ((False, ()), (True, ("anyone", "operator")), (operators_only, ("operator",)),
                              ("tests.web._kit.operators_only", ("operator",)), (broken_decider, ())):
        app, ext = _app(nats_server.url, NATS_HEALTH_URL="/healthz/nats", NATS_HEALTH={"timeout": 5.0},
                        NATS_HEALTH_DETAILS=details)
        web = app.test_client()
        try:
            for who, headers in (("anyone", {}), ("operator", dict([OPERATOR_HEADER]))):
                answer = web.get("/healthz/nats", headers=headers)
                assert answer.status_code == 200, answer.json
                if who in shown_to:
                    assert set(answer.json) == details_shown, (details, who)  # type: ignore[arg-type]
                    connection = answer.json["checks"]["connection"]  # type: ignore[index]
                    assert connection["url"] == ext.holder(app).current.connected_url  # type: ignore[union-attr]
                else:
                    assert answer.json == {"status": "pass"}, (details, who)
        finally:
            ext.holder(app).close()


def test_health_endpoint_follows_the_server_away_and_back(nats_server: NatsServer) -> None:
    with FaultProxy(nats_server.url) as proxy:
        # The passing check must fit its budget on a loaded machine; the failing one fails at once.
        app, ext = _app(proxy.url, NATS_HEALTH={"timeout": 5.0}, NATS_HEALTH_URL="/healthz/nats")
        web = app.test_client()
        try:
            ok = web.get("/healthz/nats")
            assert ok.status_code == 200 and ok.json == {"status": "pass"}, ok.json
            assert ok.headers["Cache-Control"] == "no-store"
            head = web.head("/healthz/nats")  # a probe may ask with HEAD: the same answer, no body
            assert (head.status_code, head.data, head.headers["Cache-Control"]) == (200, b"", "no-store")
            first = ext.holder(app).current

            proxy.refuse_new()
            proxy.cut()
            down = web.get("/healthz/nats")
            assert down.status_code == 503 and down.json == {"status": "fail"}, down.json  # no error text, no URL
            assert web.head("/healthz/nats").status_code == 503

            proxy.heal()
            assert wait_until(lambda: web.get("/healthz/nats").status_code == 200, timeout=60, interval=0.2)
            assert ext.holder(app).current is first  # the same client reconnected
        finally:
            ext.holder(app).close()


def test_no_server_fails_fast_and_is_tried_again_after_retry_wait() -> None:
    holder = ProcessClient(f"nats://127.0.0.1:{free_port()}", retry_wait=60.0)
    with pytest.raises(nats.NoServersError):
        holder()
    with pytest.raises(nats.NoServersError, match=r"tried .* s ago"):  # no second connect attempt
        holder()
    health = holder.health()
    assert health.status == "fail" and "tried" in health.checks["connection"]["error"]


def test_a_first_connect_for_the_health_check_spends_the_check_s_own_budget() -> None:
    # Servers that take the TCP connection and never answer (a hung server behind a load balancer):
    # connect_timeout applied to each in turn, so the first probe of a process took 3 x 10 s while
    # the docs' probe timeout was 5 s. One budget, the check's, bounds the connect and the checks.
    holes = [socket.create_server(("127.0.0.1", 0), backlog=16) for _ in range(3)]
    try:
        urls = [f"nats://127.0.0.1:{hole.getsockname()[1]}" for hole in holes]
        app = Flask("blackhole")
        app.config.update(NATS_SERVERS=urls, NATS_OPTIONS={"connect_timeout": 10.0, "no_randomize": True},
                          NATS_HEALTH={"timeout": 1.0}, NATS_HEALTH_URL="/healthz/nats", NATS_HEALTH_DETAILS=True)
        ext = NATS(app)
        start = time.monotonic()
        answer = app.test_client().get("/healthz/nats")
        elapsed = time.monotonic() - start
        assert answer.status_code == 503 and answer.json is not None, answer.data
        error = answer.json["checks"]["connection"]["error"]
        assert "not tried, the time to connect ran out" in error and urls[2] in error, error
        assert elapsed < 10, elapsed  # within its budget (1 s); the three connect timeouts took 30 s
        ext.holder(app).close()
    finally:
        for hole in holes:
            hole.close()
