"""Services against a real server: endpoints, groups, queue groups, errors,
the discovery documents, stats, reset and stop."""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timezone
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import micro
from natsjs_sync.micro import (
    EndpointConfig,
    GroupConfig,
    Request,
    ServiceConfig,
    ServiceError,
    ServiceVerb,
    add_service,
    control_subject,
)

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def noop(req: Request) -> None:
    pass


def echo(req: Request) -> None:
    req.respond(req.data)


# ---------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": ""}, ValueError),
        ({"name": "has.dot"}, ValueError),
        ({"name": "has space"}, ValueError),
        ({"version": "1.0"}, ValueError),
        ({"version": "v1.0.0"}, ValueError),
        ({"version": ""}, ValueError),
        ({"metadata": {"k": 1}}, TypeError),
        ({"metadata": ["k"]}, TypeError),
        ({"queue_group": "has space"}, nats.BadSubjectError),
        ({"queue_group": "q2", "queue_group_disabled": True}, ValueError),
        ({"max_concurrency": 0}, ValueError),
        ({"max_concurrency": True}, ValueError),
        ({"stats_handler": "nope"}, TypeError),
    ],
)
def test_service_config_is_checked(kwargs: dict[str, Any], error: type[Exception]) -> None:
    args: dict[str, Any] = {"name": "svc", "version": "1.0.0", **kwargs}
    with pytest.raises(error):
        ServiceConfig(**args)


@pytest.mark.parametrize("version", ["0.0.1", "1.2.3-alpha.1", "1.0.0+build.5", "10.20.30-rc.1+meta"])
def test_semantic_versions_are_accepted(version: str) -> None:
    assert ServiceConfig(name="svc", version=version).version == version


async def _coroutine_handler(req: Request) -> None:
    pass


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": "a.b"}, ValueError),
        ({"subject": "has space"}, nats.BadSubjectError),
        ({"subject": "a.>.b"}, nats.BadSubjectError),
        ({"handler": None}, TypeError),
        ({"handler": _coroutine_handler}, TypeError),
        ({"queue_group": "x", "queue_group_disabled": True}, ValueError),
        ({"metadata": {"k": None}}, TypeError),
    ],
)
def test_endpoint_config_is_checked(kwargs: dict[str, Any], error: type[Exception]) -> None:
    args: dict[str, Any] = {"name": "ep", "handler": noop, **kwargs}
    with pytest.raises(error):
        EndpointConfig(**args)


def test_group_config_is_checked() -> None:
    with pytest.raises(nats.BadSubjectError):
        GroupConfig(name="a.>")
    with pytest.raises(nats.BadSubjectError):
        GroupConfig(name="a..b")
    assert GroupConfig(name="").name == ""


def test_control_subjects() -> None:
    assert control_subject(ServiceVerb.PING) == "$SRV.PING"
    assert control_subject("info", "svc") == "$SRV.INFO.svc"
    assert control_subject(ServiceVerb.STATS, "svc", "abc") == "$SRV.STATS.svc.abc"
    assert control_subject("PING", prefix="$X") == "$X.PING"
    with pytest.raises(ValueError):
        control_subject("HELLO")
    with pytest.raises(ValueError):
        control_subject("PING", id="abc")


@pytest.mark.usefixtures("instrumentation")
def test_bad_input_is_refused_before_anything_is_sent(nc: nats.Client) -> None:
    sent = nc.stats.out_msgs
    with pytest.raises(TypeError):
        add_service(object(), name="svc", version="1.0.0")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        add_service(nc, name="svc", version="one")
    svc = add_service(nc, name="svc", version="1.0.0")
    try:
        with pytest.raises(TypeError):
            svc.add_endpoint("ep", _coroutine_handler)
        with pytest.raises(TypeError):
            svc.add_endpoint(42)  # type: ignore[arg-type]
        with pytest.raises(nats.BadSubjectError):
            svc.add_group("g").add_endpoint("ep", noop, subject="*.>.x")
        assert svc.endpoints == []
    finally:
        svc.stop()
    assert nc.stats.out_msgs == sent


# ---------------------------------------------------------------------- endpoints and groups


def test_endpoint_answers_with_data_json_and_headers(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="answers", version="1.0.0")
    svc.add_endpoint("echo", echo)
    svc.add_endpoint(name="json", subject="answers.json",
                     handler=lambda req: req.respond_json({"got": req.json(), "subject": req.subject}))
    svc.add_endpoint("hdr", lambda req: req.respond(b"", headers={"Seen": (req.headers or {}).get("In", "")}))
    nc.flush()
    try:
        assert caller.request("echo", b"hi", timeout=5).data == b"hi"
        reply = caller.request("answers.json", b'{"n": [1, 2]}', timeout=5)
        assert json.loads(reply.data) == {"got": {"n": [1, 2]}, "subject": "answers.json"}
        assert caller.request("hdr", b"", headers={"In": "v"}, timeout=5).headers == {"Seen": "v"}
        # A service's answer carries its own headers only, nothing of the request's.
        assert caller.request("echo", b"hi", headers={"In": "v"}, timeout=5).headers is None
    finally:
        svc.stop()


def test_groups_prefix_subjects(nc: nats.Client) -> None:
    svc = add_service(nc, name="groups", version="1.0.0")
    try:
        svc.add_endpoint("top", noop)
        g1 = svc.add_group("g1")
        g1.add_endpoint("a", noop)
        g1.add_endpoint("b", noop, subject="custom.b")
        g1.add_group(GroupConfig(name="g2")).add_group("").add_endpoint(EndpointConfig(name="c", handler=noop))
        svc.add_group("").add_endpoint("d", noop)
        svc.add_group("x.y").add_endpoint("e", noop, subject="*")
        subjects = {e.name: e.subject for e in svc.info().endpoints}
        assert subjects == {"top": "top", "a": "g1.a", "b": "g1.custom.b", "c": "g1.g2.c", "d": "d", "e": "x.y.*"}
    finally:
        svc.stop()


def test_queue_groups_default_override_inherit_and_none(nc: nats.Client) -> None:
    svc = add_service(nc, name="queues", version="1.0.0", queue_group="svcq")
    try:
        svc.add_endpoint("inherit", noop)
        svc.add_endpoint("empty_inherits", noop, queue_group="")
        svc.add_endpoint("own", noop, queue_group="mine")
        svc.add_endpoint("none", noop, queue_group_disabled=True)
        grp = svc.add_group("g", queue_group="gq")
        grp.add_endpoint("from_group", noop)
        grp.add_group("h").add_endpoint("nested", noop)
        quiet = svc.add_group("quiet", queue_group_disabled=True)
        quiet.add_endpoint("no_queue", noop)
        quiet.add_endpoint("own_again", noop, queue_group="back")
        queues = {e.name: e.queue_group for e in svc.info().endpoints}
        assert queues == {"inherit": "svcq", "empty_inherits": "svcq", "own": "mine", "none": "",
                          "from_group": "gq", "nested": "gq", "no_queue": "", "own_again": "back"}
    finally:
        svc.stop()
    plain = add_service(nc, name="queues", version="1.0.0")
    try:
        assert plain.add_endpoint("default", noop).queue_group == "q"
    finally:
        plain.stop()


def test_queue_group_spreads_requests_and_no_queue_reaches_every_instance(
    nc: nats.Client, caller: nats.Client
) -> None:
    services = [add_service(nc, name="spread", version="1.0.0") for _ in range(3)]
    try:
        for i, svc in enumerate(services):
            svc.add_endpoint("one", lambda req, i=i: req.respond(str(i).encode()), subject="spread.one")
            svc.add_endpoint("all", lambda req, i=i: req.respond(str(i).encode()), subject="spread.all",
                             queue_group_disabled=True)
        nc.flush()
        one = [m.data for m in caller.request_many("spread.one", timeout=5, stall=0.5)]
        assert len(one) == 1
        everyone = sorted(m.data for m in caller.request_many("spread.all", timeout=5, max_messages=3))
        assert everyone == [b"0", b"1", b"2"]
    finally:
        for svc in services:
            svc.stop()


# ---------------------------------------------------------------------- errors


def test_errors_become_error_replies_and_counts(nc: nats.Client, caller: nats.Client) -> None:
    def explicit(req: Request) -> None:
        req.respond_error(404, "no such order", b'{"id": 7}', headers={"Extra": "x"})

    def raises_service_error(req: Request) -> None:
        raise ServiceError("409", "already there")

    def raises_bug(req: Request) -> None:
        raise KeyError("missing\nline")

    def answers_then_raises(req: Request) -> None:
        req.respond(b"done")
        raise RuntimeError("after the answer")

    svc = add_service(nc, name="errors", version="1.0.0")
    for name, handler in [("explicit", explicit), ("service_error", raises_service_error),
                          ("bug", raises_bug), ("late", answers_then_raises), ("fine", echo)]:
        svc.add_endpoint(name, handler)
    nc.flush()
    try:
        r = caller.request("explicit", timeout=5)
        assert r.headers == {"Extra": "x", "Nats-Service-Error": "no such order", "Nats-Service-Error-Code": "404"}
        assert r.data == b'{"id": 7}'
        assert micro.service_error(r) == ServiceError("404", "no such order", b'{"id": 7}')
        r = caller.request("service_error", timeout=5)
        assert (r.headers or {})["Nats-Service-Error-Code"] == "409"
        r = caller.request("bug", timeout=5)
        assert (r.headers or {})["Nats-Service-Error-Code"] == "500"
        assert (r.headers or {})["Nats-Service-Error"] == "KeyError"  # the type only; the rest is logged
        late = list(caller.request_many("late", timeout=5, stall=0.5))
        assert [m.data for m in late] == [b"done"]  # no second, error reply
        caller.publish("fine", b"nobody waits")  # respond() without a reply subject raises: an error
        assert caller.request("fine", b"still alive", timeout=5).data == b"still alive"
        nc.flush()
        stats = {e.name: e for e in svc.stats().endpoints}
        assert (stats["explicit"].num_errors, stats["explicit"].last_error) == (1, "404:no such order")
        assert stats["service_error"].last_error == "409:already there"
        assert stats["bug"].last_error == r"KeyError('missing\nline')"
        assert (stats["late"].num_requests, stats["late"].num_errors) == (1, 1)
        assert (stats["fine"].num_requests, stats["fine"].num_errors) == (2, 1)
        assert stats["fine"].last_error.startswith("ValueError(")
    finally:
        svc.stop()


def test_respond_error_checks_its_arguments(nc: nats.Client, caller: nats.Client) -> None:
    problems: list[str] = []

    def handler(req: Request) -> None:
        for code, desc in [("", "x"), (None, "x"), ("500", ""), (True, "x")]:
            try:
                req.respond_error(code, desc)  # type: ignore[arg-type]
            except ValueError:
                problems.append("refused")
        try:
            req.respond_error(500, "two\nlines")
        except nats.BadHeaderError:
            problems.append("refused")
        req.respond(b"ok")

    svc = add_service(nc, name="checks", version="1.0.0")
    svc.add_endpoint("check", handler)
    nc.flush()
    try:
        assert caller.request("check", timeout=5).data == b"ok"
        assert problems == ["refused"] * 5
    finally:
        svc.stop()


def test_service_client_request_raises_service_errors(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="calls", version="1.0.0")
    svc.add_endpoint("bad", lambda req: req.respond_error("400", "bad input", b"details"))
    svc.add_endpoint("good", echo)
    nc.flush()
    client = micro.ServiceClient(caller)
    try:
        assert client.request("good", b"x").data == b"x"
        with pytest.raises(ServiceError) as info:
            client.request("bad", b"x")
        assert (info.value.code, info.value.description, info.value.data) == ("400", "bad input", b"details")
        with pytest.raises(nats.NoRespondersError):
            client.request("nobody.here")
    finally:
        svc.stop()


# ---------------------------------------------------------------------- discovery


def _request_json(client: nats.Client, subject: str) -> dict[str, Any]:
    reply = client.request(subject, b"", timeout=5)
    data: dict[str, Any] = json.loads(reply.data)
    return data


def test_discovery_documents_on_every_subject(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="disco", version="2.1.0", description="finds things", metadata={"zone": "a"})
    svc.add_endpoint("find", echo, subject="disco.find", metadata={"schema": "v1"})
    svc.add_endpoint("plain", noop, queue_group_disabled=True)
    nc.flush()
    ident = {"name": "disco", "id": svc.id, "version": "2.1.0", "metadata": {"zone": "a"}}
    endpoints_info = [
        {"name": "find", "subject": "disco.find", "queue_group": "q", "metadata": {"schema": "v1"}},
        {"name": "plain", "subject": "plain", "queue_group": "", "metadata": {}},
    ]
    try:
        for suffix in ("", ".disco", f".disco.{svc.id}"):
            ping = _request_json(caller, f"$SRV.PING{suffix}")
            assert ping == {"type": "io.nats.micro.v1.ping_response", **ident}
            info = _request_json(caller, f"$SRV.INFO{suffix}")
            assert info == {"type": "io.nats.micro.v1.info_response", **ident, "description": "finds things",
                            "endpoints": endpoints_info}
            stats = _request_json(caller, f"$SRV.STATS{suffix}")
            assert RFC3339.match(stats.pop("started"))
            assert stats == {"type": "io.nats.micro.v1.stats_response", **ident, "endpoints": [
                {"name": e["name"], "subject": e["subject"], "queue_group": e["queue_group"], "num_requests": 0,
                 "num_errors": 0, "last_error": "", "processing_time": 0, "average_processing_time": 0,
                 "data": None}
                for e in endpoints_info]}
        other = add_service(nc, name="disco", version="2.1.0")
        try:
            found = micro.ServiceClient(caller).ping("disco", max_results=2, timeout=5)
            assert sorted(p.id for p in found) == sorted([svc.id, other.id])
            assert [p.id for p in micro.ServiceClient(caller).ping("disco", svc.id)] == [svc.id]
        finally:
            other.stop()
    finally:
        svc.stop()


def test_stats_count_time_and_custom_data(nc: nats.Client, caller: nats.Client) -> None:
    seen: list[micro.EndpointStats] = []

    def stats_handler(endpoint: micro.EndpointStats) -> Any:
        seen.append(endpoint)
        if endpoint.name == "broken":
            raise RuntimeError("stats handler bug")
        return {"endpoint": endpoint.name, "requests": endpoint.num_requests}

    svc = add_service(nc, name="counted", version="1.0.0", stats_handler=stats_handler)
    svc.add_endpoint("work", echo)
    svc.add_endpoint("broken", echo)
    nc.flush()
    try:
        for _ in range(5):
            caller.request("work", b"x", timeout=5)
        (stats,) = micro.ServiceClient(caller).stats("counted", svc.id)
        work = next(e for e in stats.endpoints if e.name == "work")
        assert work.num_requests == 5 and work.num_errors == 0
        assert work.processing_time > 0
        assert work.average_processing_time == work.processing_time // 5
        assert work.data == {"endpoint": "work", "requests": 5}
        assert next(e for e in stats.endpoints if e.name == "broken").data is None
        assert stats.started.tzinfo is not None and stats.started <= datetime.now(timezone.utc)
        assert {e.name for e in seen} == {"work", "broken"}
    finally:
        svc.stop()


def test_reset_zeroes_counters_and_restarts_the_clock(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="resets", version="1.0.0")
    svc.add_endpoint("fail", lambda req: req.respond_error(500, "always"))
    nc.flush()
    try:
        caller.request("fail", timeout=5)
        before = svc.stats()
        assert before.endpoints[0].num_errors == 1
        svc.reset()
        after = svc.stats()
        assert after.endpoints[0] == micro.EndpointStats(name="fail", subject="fail", queue_group="q")
        assert after.started >= before.started
    finally:
        svc.stop()


# ---------------------------------------------------------------------- life cycle


def test_stop_drains_queued_requests_then_stops_answering(nc: nats.Client, caller: nats.Client) -> None:
    entered, release = threading.Event(), threading.Event()
    handled: list[bytes] = []

    def slow(req: Request) -> None:
        entered.set()
        release.wait(30)
        handled.append(req.data)
        req.respond(req.data)

    svc = add_service(nc, name="drains", version="1.0.0")
    svc.add_endpoint("slow", slow)
    nc.flush()
    replies = [caller.request_many("slow", str(i).encode(), max_messages=1, timeout=30) for i in range(3)]
    assert entered.wait(10)
    stopper = threading.Thread(target=svc.stop)
    stopper.start()
    release.set()
    stopper.join(30)
    assert svc.stopped.is_set() and svc.is_stopped
    assert sorted(next(r).data for r in replies) == [b"0", b"1", b"2"]
    with pytest.raises(nats.NoRespondersError):
        caller.request("slow", timeout=5)
    with pytest.raises(nats.NoRespondersError):
        caller.request("$SRV.PING.drains", timeout=5)
    with pytest.raises(RuntimeError):
        svc.add_endpoint("late", noop)
    svc.stop()  # again: nothing to do


def test_stop_from_a_handler_returns_and_the_service_stops(nc: nats.Client, caller: nats.Client) -> None:
    svc = add_service(nc, name="selfstop", version="1.0.0")

    def quit_handler(req: Request) -> None:
        svc.stop()  # must not wait for this very handler
        req.respond(b"bye")

    svc.add_endpoint("quit", quit_handler)
    nc.flush()
    assert caller.request("quit", timeout=5).data == b"bye"
    assert svc.stopped.wait(10)


def test_with_block_starts_and_stops(nc: nats.Client, caller: nats.Client) -> None:
    with micro.Service(nc, ServiceConfig(name="scoped", version="1.0.0")) as svc:
        svc.add_endpoint("scoped", echo)
        nc.flush()
        assert caller.request("scoped", b"in", timeout=5).data == b"in"
        assert [p.id for p in micro.ServiceClient(caller).ping("scoped")] == [svc.id]
    assert svc.stopped.is_set()
    with pytest.raises(nats.NoRespondersError):
        caller.request("scoped", timeout=5)


@pytest.mark.parametrize("max_concurrency", [None, 2])
def test_client_drain_drains_the_service(shared_server: Any, caller: nats.Client, max_concurrency: int | None) -> None:
    nc = nats.connect(shared_server.url, name="draining")
    entered, release = threading.Event(), threading.Event()

    def slow(req: Request) -> None:
        entered.set()
        release.wait(30)
        req.respond(req.data)

    svc = add_service(nc, name="clientdrain", version="1.0.0", max_concurrency=max_concurrency)
    svc.add_endpoint("slow", slow, subject="clientdrain.slow")
    nc.flush()
    replies = [caller.request_many("clientdrain.slow", str(i).encode(), max_messages=1, timeout=30)
               for i in range(3)]
    assert entered.wait(10)
    drainer = threading.Thread(target=nc.drain, kwargs={"timeout": 30})
    drainer.start()
    release.set()
    drainer.join(30)
    assert nc.is_closed and svc.is_stopped
    # With a pool, the requests handed to it were answered before the client stopped publishing.
    assert sorted(next(r).data for r in replies) == [b"0", b"1", b"2"]


def test_a_closed_client_stops_the_service(shared_server: Any) -> None:
    nc = nats.connect(shared_server.url)
    svc = add_service(nc, name="closing", version="1.0.0", max_concurrency=2)
    svc.add_endpoint("echo", echo)
    nc.close()
    assert svc.stopped.wait(10) and svc.is_stopped
    svc.stop()  # nothing left to do, and no error


def test_service_client_finds_nothing_without_services(caller: nats.Client) -> None:
    assert micro.ServiceClient(caller).ping("nobody_runs_this") == []
