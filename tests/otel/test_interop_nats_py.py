"""A trace crosses clients: nats-py instrumented with otel-instrumentation-nats, and natsjs_sync.

The proof is the wire: each client reads the W3C ``traceparent`` the other
wrote, so a span made by one is the parent of the span made by the other.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from .conftest import Telemetry

nats_py = pytest.importorskip("nats", reason="nats-py is part of the test extra")
otel_nats = pytest.importorskip("otel_instrumentation_nats", reason="otel-instrumentation-nats is in the test extra")


@pytest.fixture
def nats_py_traced(otel: Telemetry) -> Iterator[None]:
    inst = otel_nats.NatsInstrumentor()
    inst.instrument(tracer_provider=otel.tracer_provider)
    try:
        yield
    finally:
        inst.uninstrument()


def test_nats_py_to_us_and_back_is_one_trace(otel: Telemetry, nats_py_traced: None, nc: nats.Client,
                                             shared_server: NatsServer) -> None:
    def relay(msg: nats.Msg) -> None:  # natsjs_sync: continue the trace to the next hop
        nc.publish("interop.back", msg.data + b"!")

    nc.subscribe("interop.there", cb=relay)
    nc.flush()
    tracer = otel.tracer_provider.get_tracer("app")

    async def main() -> bytes:
        py = await nats_py.connect(shared_server.url)
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        async def back(msg: object) -> None:
            if not got.done():
                got.set_result(msg.data)  # type: ignore[attr-defined]

        await py.subscribe("interop.back", cb=back)
        await py.flush()
        with tracer.start_as_current_span("app-root"):
            await py.publish("interop.there", b"ping")
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            await py.close()

    assert asyncio.run(main()) == b"ping!"
    spans = otel.wait_for(lambda ss: {"process interop.there", "publish interop.back"} <= {s.name for s in ss}
                          and sum(s.name == "interop.back receive" for s in ss) >= 1)
    by_name = {s.name: s for s in spans}
    root = by_name["app-root"]
    py_send = by_name["interop.there send"]  # nats-py's producer span
    ours = by_name["process interop.there"]
    our_send = by_name["publish interop.back"]
    py_recv = by_name["interop.back receive"]  # nats-py's consumer span
    assert {s.context.trace_id for s in (root, py_send, ours, our_send, py_recv)} == {root.context.trace_id}
    assert ours.parent is not None and ours.parent.span_id == py_send.context.span_id
    assert our_send.parent is not None and our_send.parent.span_id == ours.context.span_id
    assert py_recv.parent is not None and py_recv.parent.span_id == our_send.context.span_id


def test_our_request_served_by_nats_py_joins_our_trace(otel: Telemetry, nats_py_traced: None, nc: nats.Client,
                                                       shared_server: NatsServer) -> None:
    ready = threading.Event()
    stop = threading.Event()

    async def serve() -> None:
        py = await nats_py.connect(shared_server.url)

        async def handler(msg: object) -> None:
            await msg.respond(b"pong")  # type: ignore[attr-defined]

        await py.subscribe("interop.svc", cb=handler)
        await py.flush()
        ready.set()
        await asyncio.get_running_loop().run_in_executor(None, stop.wait, 60)  # serve until told
        await py.close()

    t = threading.Thread(target=asyncio.run, args=(serve(),))
    t.start()
    try:
        assert ready.wait(10)
        assert nc.request("interop.svc", b"ping", timeout=10).data == b"pong"
    finally:
        stop.set()
        t.join(10)
    spans = otel.wait_for(lambda ss: any(s.name == "interop.svc receive" for s in ss))
    by_name = {s.name: s for s in spans}
    req = by_name["request interop.svc"]
    py_recv = by_name["interop.svc receive"]
    assert py_recv.parent is not None and py_recv.parent.span_id == req.context.span_id
