"""nats-py ``nats.micro`` programs with ``nats`` replaced by ``natsjs_sync`` in the
imports and the ``async``/``await`` deleted, retold from nats-py's micro example
and test-suite: the same calls, names and module paths."""

from __future__ import annotations

import contextlib
import json
import random
import threading

import pytest

import natsjs_sync as nats
import natsjs_sync.micro
from natsjs_sync.micro import add_service
from natsjs_sync.micro.request import ERROR_CODE_HEADER, Request, ServiceError
from natsjs_sync.micro.service import (
    EndpointConfig,
    EndpointInfo,
    GroupConfig,
    ServiceConfig,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    ServiceVerb,
    control_subject,
)
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until


@pytest.fixture
def url(shared_server: NatsServer) -> str:
    return shared_server.url


# -------------------------------------------------------------------- the echo example


def echo(req: Request) -> None:
    """Echo the request data back to the client."""
    req.respond(req.data)


def main(url: str, quit_event: threading.Event) -> None:
    # nats-py's example sets quit_event from SIGINT/SIGTERM handlers; here the test does.
    with contextlib.ExitStack() as stack:
        nc = stack.enter_context(nats.connect(url))
        service = stack.enter_context(nats.micro.add_service(nc, name="demo_service", version="0.0.1"))
        group = service.add_group(name="demo")
        group.add_endpoint(name="echo", handler=echo)
        quit_event.wait()


def test_echo_example(url: str, caller: nats.Client) -> None:
    quit_event = threading.Event()
    program = threading.Thread(target=main, args=(url, quit_event))
    program.start()
    try:
        services = natsjs_sync.micro.ServiceClient(caller)
        assert wait_until(lambda: len(services.ping("demo_service", timeout=1)) == 1, timeout=10)
        assert caller.request("demo.echo", b"hello", timeout=5).data == b"hello"
    finally:
        quit_event.set()
        program.join(30)
    assert not program.is_alive()
    assert services.ping("demo_service", timeout=0.5) == []  # the with-block stopped it


# -------------------------------------------------------------------- nats-py's test-suite, retold


def test_five_instances_share_the_work(url: str) -> None:
    nc = nats.connect(url)
    svcs = []

    def add_handler(request: Request) -> None:
        if random.random() < 0.1:
            request.respond_error("500", "Unexpected error!")
            return
        request.respond(b"42")

    service_config = ServiceConfig(
        name="CoolAddService",
        version="0.1.0",
        description="Add things together",
        metadata={"basic": "metadata"},
    )
    endpoint_config = EndpointConfig(name="default", subject="svc.add", handler=add_handler)

    for _ in range(5):
        svc = add_service(nc, service_config)
        svc.add_endpoint(endpoint_config)
        svcs.append(svc)

    for _ in range(50):
        nc.request("svc.add", json.dumps({"x": 22, "y": 11}).encode("utf-8"), timeout=5)

    for svc in svcs:
        info = svc.info()
        assert info.name == "CoolAddService"
        assert info.description == "Add things together"
        assert info.version == "0.1.0"
        assert info.metadata == {"basic": "metadata"}

    info_subject = control_subject(ServiceVerb.INFO, "CoolAddService")
    info_response = nc.request(info_subject, timeout=5)
    info = ServiceInfo.from_dict(json.loads(info_response.data.decode()))
    assert info.id in {svc.id for svc in svcs}

    ping_reply = nc.new_inbox()
    ping_subscription = nc.subscribe(ping_reply)
    nc.publish(control_subject(ServiceVerb.PING, "CoolAddService"), reply=ping_reply)
    ping_responses = [ping_subscription.next_msg(timeout=5) for _ in range(5)]
    with pytest.raises(nats.TimeoutError):  # and no sixth
        ping_subscription.next_msg(timeout=0.25)
    assert {ServicePing.from_dict(json.loads(m.data)).id for m in ping_responses} == {svc.id for svc in svcs}

    stats_reply = nc.new_inbox()
    stats_subscription = nc.subscribe(stats_reply)
    nc.publish(control_subject(ServiceVerb.STATS, "CoolAddService"), reply=stats_reply)
    stats_responses = [stats_subscription.next_msg(timeout=5) for _ in range(5)]
    with pytest.raises(nats.TimeoutError):
        stats_subscription.next_msg(timeout=0.25)
    stats = [ServiceStats.from_dict(json.loads(response.data.decode())) for response in stats_responses]
    assert sum(stat.endpoints[0].num_requests for stat in stats) == 50

    for svc in svcs:
        svc.stop()
    nc.close()


def test_monitoring_handlers(url: str) -> None:
    def noop_handler(request: Request) -> None:
        pass

    nc = nats.connect(url)
    svc = add_service(nc, ServiceConfig(name="test_service", version="0.1.0"))
    svc.add_endpoint(EndpointConfig(name="default", subject="test.func", handler=noop_handler,
                                    metadata={"basic": "schema"}))
    ping = {"type": "io.nats.micro.v1.ping_response", "name": "test_service", "version": "0.1.0",
            "id": svc.id, "metadata": {}}
    info = {"type": "io.nats.micro.v1.info_response", "name": "test_service", "description": "",
            "version": "0.1.0", "id": svc.id, "metadata": {},
            "endpoints": [{"name": "default", "subject": "test.func", "queue_group": "q",
                           "metadata": {"basic": "schema"}}]}
    for subject, expected in [
        ("$SRV.PING", ping), ("$SRV.PING.test_service", ping), (f"$SRV.PING.test_service.{svc.id}", ping),
        ("$SRV.INFO", info), ("$SRV.INFO.test_service", info), (f"$SRV.INFO.test_service.{svc.id}", info),
    ]:
        response = nc.request(subject, timeout=5)
        assert json.loads(response.data) == expected
    svc.stop()
    nc.close()


@pytest.mark.parametrize("stats_handler", [None, lambda endpoint: {"key": "val"}])
def test_service_stats(url: str, stats_handler: object) -> None:
    def handler(request: Request) -> None:
        request.respond(b"ok")

    nc = nats.connect(url)
    svc = add_service(nc, ServiceConfig(name="test_service", version="0.1.0", stats_handler=stats_handler))  # type: ignore[arg-type]
    svc.add_endpoint(EndpointConfig(name="default", subject="test.func", handler=handler,
                                    metadata={"test": "value"}))
    for _ in range(10):
        response = nc.request("test.func", b"msg", timeout=5)
        assert response.data == b"ok"
    nc.publish("test.func", b"err")  # no reply subject: respond() raises, an error
    assert wait_until(lambda: svc.stats().endpoints[0].num_requests == 11)

    info = svc.info()
    stats_response = nc.request(control_subject(ServiceVerb.STATS, "test_service"), b"", timeout=5)
    stats = ServiceStats.from_dict(json.loads(stats_response.data))
    assert len(stats.endpoints) == len(info.endpoints) == 1
    assert stats.endpoints[0].subject == "test.func"
    assert stats.endpoints[0].num_requests == 11
    assert stats.endpoints[0].num_errors == 1
    assert stats.endpoints[0].processing_time > 0
    assert stats.endpoints[0].average_processing_time > 0
    assert stats.endpoints[0].data == ({"key": "val"} if stats_handler else None)
    svc.stop()
    nc.close()


@pytest.mark.parametrize(
    ("respond_data", "respond_headers"),
    [(b"", None), (b"OK", None), (b"OK", {"key": "value"})],
)
def test_request_respond(url: str, respond_data: bytes, respond_headers: dict[str, str] | None) -> None:
    nc = nats.connect(url)

    def handler(request: Request) -> None:
        request.respond(respond_data, headers=respond_headers)

    svc = add_service(nc, ServiceConfig(name="CoolService", version="0.1.0", description="test service"))
    svc.add_endpoint(EndpointConfig(name="default", subject="test.func", handler=handler))
    response = nc.request("test.func", respond_data, headers=respond_headers, timeout=5)
    assert response.data == respond_data
    assert response.headers == respond_headers
    svc.stop()
    nc.close()


@pytest.mark.parametrize(
    ("group_names", "expected_subject"),
    [([], "foo"), (["g1"], "g1.foo"), ([""], "foo"), (["", "g1", ""], "g1.foo"), (["g1", "g2", "g3"], "g1.g2.g3.foo")],
)
def test_groups(url: str, group_names: list[str], expected_subject: str) -> None:
    def noop_handler(_: Request) -> None:
        pass

    nc = nats.connect(url)
    svc = add_service(nc, ServiceConfig(name="test_service", version="0.0.1"))
    group = svc
    for group_name in group_names:
        group = group.add_group(name=group_name)  # type: ignore[assignment]
    group.add_endpoint(name="foo", handler=noop_handler)
    info = svc.info()
    assert info.endpoints == [EndpointInfo(name="foo", subject=expected_subject, queue_group="q")]
    svc.stop()
    nc.close()


def test_custom_queue_groups(url: str) -> None:
    def noop_handler(request: Request) -> None:
        pass

    nc = nats.connect(url)
    cases = [
        (ServiceConfig(name="test_service", version="0.0.1"),
         [EndpointConfig(name="foo", handler=noop_handler)], {"foo": "q"}),
        (ServiceConfig(name="test_service", version="0.0.1", queue_group="custom"),
         [EndpointConfig(name="foo", subject="foo", handler=noop_handler)], {"foo": "custom"}),
        (ServiceConfig(name="test_service", version="0.0.1", queue_group="q-config"),
         [EndpointConfig(name="foo", queue_group="q-foo", handler=noop_handler)], {"foo": "q-foo"}),
        (ServiceConfig(name="test_service", version="0.0.1", queue_group="q-service"),
         [EndpointConfig(name="foo", queue_group=None, handler=noop_handler),
          EndpointConfig(name="bar", queue_group="", handler=noop_handler)], {"foo": "q-service", "bar": "q-service"}),
    ]
    for service_config, endpoint_configs, expected in cases:
        svc = add_service(nc, service_config)
        for endpoint_config in endpoint_configs:
            svc.add_endpoint(endpoint_config)
        assert {e.name: e.queue_group for e in svc.info().endpoints} == expected
        svc.stop()
    nc.close()


def test_one_request_many_queue_groups(url: str) -> None:
    nc = nats.connect(url)
    svcs = []
    for i in range(5):

        def handler(request: Request, i: int = i) -> None:
            request.respond(str(i).encode())

        svc = add_service(nc, ServiceConfig(name="test_service", version="0.0.1", queue_group=f"q-{i}"))
        svc.add_endpoint(EndpointConfig(name="foo", handler=handler))
        svcs.append(svc)

    reply = nc.new_inbox()
    sub = nc.subscribe(reply)
    nc.publish("foo", b"req", reply=reply)
    responses = [sub.next_msg(timeout=2) for _ in range(5)]
    assert sorted(m.data for m in responses) == [b"0", b"1", b"2", b"3", b"4"]
    sub.unsubscribe()
    for svc in svcs:
        svc.stop()
    nc.close()


def test_service_error_and_config_names() -> None:
    err = ServiceError("503", "busy")
    assert repr(err) == "503:busy" and err.to_dict() == {"code": "503", "description": "busy"}
    assert ServiceError.from_dict({"code": "503", "description": "busy"}) == err
    assert ERROR_CODE_HEADER == "Nats-Service-Error-Code"
    assert GroupConfig(name="g").queue_group is None
    with pytest.raises(ValueError):
        ServiceConfig(name="", version="0.1.0")
    with pytest.raises(ValueError):
        ServiceConfig(name="test.service@!", version="0.1.0")
    with pytest.raises(ValueError):
        ServiceConfig(name="test_service", version="abc")
    with pytest.raises(ValueError):
        EndpointConfig(name="test_service", subject="endpoint subject", handler=lambda r: None)



@pytest.mark.parametrize("module", ["nats.micro", "nats.micro.service", "nats.micro.request"])
def test_every_name_nats_py_defines_there_exists_here(module: str) -> None:
    import importlib
    import inspect

    theirs = pytest.importorskip(module)
    ours = importlib.import_module(module.replace("nats", "natsjs_sync", 1))
    # Names nats-py defines in those modules (not what they import: json, Client, Optional...).
    defined = [name for name, value in vars(theirs).items()
               if not name.startswith("_") and not inspect.ismodule(value)
               and (name.isupper() or getattr(value, "__module__", "").startswith("nats.micro"))]
    assert "add_service" in defined or "Request" in defined
    assert [name for name in defined if not hasattr(ours, name)] == []
