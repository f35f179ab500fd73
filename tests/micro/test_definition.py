"""The decorator form: a service declared at import time and started per client."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync import micro
from natsjs_sync.micro import Request, ServiceDefinition
from natsjs_sync.testing import NatsServer

# Declared at module level, as in a Flask or Django module.
inventory = ServiceDefinition("inventory", "1.3.0", description="Stock levels", metadata={"team": "store"})
STOCK = {"apple": 3, "pear": 0}


@inventory.endpoint
def count(req: Request) -> None:
    req.respond_json({"item": req.data.decode(), "count": STOCK.get(req.data.decode(), 0)})


@inventory.endpoint("in-stock", subject="inventory.available", metadata={"returns": "bool"})
def available(req: Request) -> None:
    req.respond(b"yes" if STOCK.get(req.data.decode(), 0) else b"no")


admin = inventory.group("inventory.admin", queue_group="admins")


@admin.endpoint(queue_group_disabled=True)
def restock(req: Request) -> None:
    STOCK[req.data.decode()] = 10
    req.respond(b"done")


reports = admin.group("reports")


@reports.endpoint()
def totals(req: Request) -> None:
    req.respond_json(sum(STOCK.values()))


def test_declared_endpoints_and_unchanged_functions() -> None:
    assert [e.name for e in inventory.endpoints] == ["count", "in-stock", "restock", "totals"]
    assert inventory.endpoints[0].handler is count  # the decorators return the function itself


def test_start_on_two_clients_makes_two_instances(shared_server: NatsServer, caller: nats.Client) -> None:
    STOCK.update(apple=3, pear=0)
    with nats.connect(shared_server.url, name="w1") as nc1, nats.connect(shared_server.url, name="w2") as nc2:
        first = inventory.start(nc1)
        second = inventory.start(nc2)
        try:
            assert first.id != second.id
            infos = micro.ServiceClient(caller).info("inventory", max_results=2, timeout=5)
            assert sorted(i.id for i in infos) == sorted([first.id, second.id])
            info = infos[0]
            assert (info.description, info.metadata) == ("Stock levels", {"team": "store"})
            assert [(e.name, e.subject, e.queue_group) for e in info.endpoints] == [
                ("count", "count", "q"),
                ("in-stock", "inventory.available", "q"),
                ("restock", "inventory.admin.restock", ""),
                ("totals", "inventory.admin.reports.totals", "admins"),
            ]
            assert info.endpoints[1].metadata == {"returns": "bool"}
            assert caller.request("inventory.available", b"pear", timeout=5).data == b"no"
            restocked = list(caller.request_many("inventory.admin.restock", b"pear", max_messages=2, timeout=5))
            assert [m.data for m in restocked] == [b"done", b"done"]  # no queue group: both instances
            assert caller.request("inventory.available", b"pear", timeout=5).data == b"yes"
            assert caller.request("count", b"apple", timeout=5).data == b'{"item":"apple","count":3}'
            assert caller.request("inventory.admin.reports.totals", timeout=5).data == b"13"
        finally:
            first.stop()
            second.stop()


def test_bad_declarations_fail_at_import_time() -> None:
    svc = ServiceDefinition("declared", "1.0.0")
    with pytest.raises(ValueError):
        svc.endpoint("bad.name")(lambda req: None)
    with pytest.raises(nats.BadSubjectError):
        svc.group("g").endpoint("ok", subject="a b")(lambda req: None)
    with pytest.raises(TypeError):
        svc.endpoint("ok", unknown_option=1)(lambda req: None)
    with pytest.raises(ValueError):  # a lambda has no usable name
        svc.endpoint(lambda req: None)
    with pytest.raises(ValueError):
        ServiceDefinition("declared", "latest")
    assert svc.endpoints == []


def test_start_on_a_closed_client_leaves_nothing(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url)
    nc.close()
    with pytest.raises(nats.ConnectionClosedError):
        inventory.start(nc)
