"""Typed service endpoints: decoded requests, encoded responses, schemas in $SRV.INFO."""

from __future__ import annotations

import json
from collections.abc import Iterator

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync.codecs import MSGPACK
from natsjs_sync.errors import ServiceError
from natsjs_sync.micro import Request, Service, ServiceClient, add_service


class Quote(msgspec.Struct):
    sku: str
    qty: int


class Price(msgspec.Struct):
    sku: str
    total: float


def price(q: Quote) -> Price:
    return Price(q.sku, q.qty * 1.5)


@pytest.fixture
def svc(nc: nats.Client) -> Iterator[Service]:
    service = add_service(nc, name="pricing", version="1.0.0")
    service.add_endpoint("price", price, request_type=Quote, response_type=Price)
    group = service.add_group("v2")

    @group.endpoint(request_type=Quote, response_type=Price, codec=MSGPACK, metadata={"owner": "shop"})
    def price_packed(q: Quote) -> Price:
        return price(q)

    @service.endpoint
    def untyped(req: Request) -> None:
        req.respond(MSGPACK.encode(req.decode(Quote)))

    nc.flush()
    yield service
    service.stop()


def test_typed_request_and_response(nc: nats.Client, svc: Service) -> None:
    reply = nc.typed("price", Quote, reply_type=Price).request(Quote("tea", 2), timeout=5)
    assert reply.value == Price("tea", 3.0)
    assert reply.headers == {"content-type": "application/json"}
    # A request written as MessagePack is read by its header and answered in kind.
    reply = nc.typed("price", Quote, codec=MSGPACK, reply_type=Price).request(Quote("jam", 4), timeout=5)
    assert reply.value == Price("jam", 6.0) and reply.headers == {"content-type": "application/msgpack"}
    # The endpoint's codec reads requests without a header.
    raw = nc.request("v2.price_packed", MSGPACK.encode(Quote("x", 1)), timeout=5)
    assert raw.decode(Price) == Price("x", 1.5)


def test_a_request_that_does_not_decode_is_a_400_naming_the_field(nc: nats.Client, svc: Service) -> None:
    with pytest.raises(ServiceError) as info:
        ServiceClient(nc).request("price", b'{"sku": "tea", "qty": "two"}')
    assert info.value.code == "400" and "$.qty" in info.value.description
    with pytest.raises(ServiceError) as info:  # through a typed view, and Request.decode in an untyped handler
        nc.typed("untyped", dict).request({"sku": "tea"}, timeout=5)
    assert info.value.code == "400" and "$.qty" in info.value.description
    assert svc.stats().endpoints[0].num_errors == 1


def test_info_shows_the_schemas(nc: nats.Client, svc: Service) -> None:
    (info,) = ServiceClient(nc).info("pricing")
    by_name = {e.name: e for e in info.endpoints}
    meta = by_name["price"].metadata
    assert meta["content_type"] == "application/json"
    request_schema = json.loads(meta["request_schema"])
    assert request_schema["$ref"] == "#/$defs/Quote"
    assert request_schema["$defs"]["Quote"]["properties"]["qty"] == {"type": "integer"}
    assert "Price" in json.loads(meta["response_schema"])["$defs"]
    packed = by_name["price_packed"].metadata
    assert packed["owner"] == "shop" and packed["content_type"] == "application/msgpack"
    assert "request_schema" not in (by_name["untyped"].metadata or {})


def test_pydantic_endpoint(nc: nats.Client) -> None:
    pydantic = pytest.importorskip("pydantic", reason="the pydantic extra is not installed")

    class Ask(pydantic.BaseModel):
        n: int

    class Answer(pydantic.BaseModel):
        double: int

    service = add_service(nc, name="doubler", version="1.0.0")
    try:
        service.add_endpoint("double", lambda a: Answer(double=a.n * 2), request_type=Ask, response_type=Answer)
        nc.flush()
        assert nc.typed("double", Ask, reply_type=Answer).request(Ask(n=21), timeout=5).value == Answer(double=42)
        (info,) = ServiceClient(nc).info("doubler")
        assert json.loads(info.endpoints[0].metadata["request_schema"])["properties"]["n"]["type"] == "integer"
    finally:
        service.stop()


def test_pydantic_containers_as_endpoint_types(nc: nats.Client) -> None:
    pydantic = pytest.importorskip("pydantic", reason="the pydantic extra is not installed")

    class Ask(pydantic.BaseModel):
        n: int

    class Answer(pydantic.BaseModel):
        double: int

    service = add_service(nc, name="batch_doubler", version="1.0.0")
    try:
        service.add_endpoint("doubles", lambda asks: {str(a.n): Answer(double=a.n * 2) for a in asks},
                             request_type=list[Ask], response_type=dict[str, Answer])
        nc.flush()
        ask = nc.typed("doubles", list[Ask], reply_type=dict[str, Answer])
        reply = ask.request([Ask(n=1), Ask(n=21)], timeout=5)
        assert reply.value == {"1": Answer(double=2), "21": Answer(double=42)}
        assert reply.headers is not None and reply.headers["content-type"] == "application/json"
        with pytest.raises(ServiceError) as info:  # a bad element: answered with 400 naming it
            ServiceClient(nc).request("doubles", b'[{"n": 1}, {"n": "many"}]')
        assert info.value.code == "400" and "$[1].n" in info.value.description
        (svc,) = ServiceClient(nc).info("batch_doubler")
        schema = json.loads(svc.endpoints[0].metadata["request_schema"])
        assert schema["type"] == "array" and "Ask" in schema["$defs"]
    finally:
        service.stop()
