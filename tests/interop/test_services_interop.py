"""Services across clients, both ways, on a real server: a natsjs_sync service is
discovered, pinged, inspected and called by nats-py (its ``nats.micro`` document
classes parse our replies) and by nats.js (``@nats-io/services``); services
written with nats-py's micro and with nats.js are discovered and called from ours."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import micro
from natsjs_sync.micro import Request, ServiceError, add_service

from ..conftest import wait_until
from .conftest import NodeJS

nats_py = pytest.importorskip("nats", reason="nats-py is part of the test extra")
nats_py_micro = pytest.importorskip("nats.micro")
from nats.micro import service as nats_py_service  # noqa: E402


def start_ours(nc: nats.Client) -> micro.Service:
    svc = add_service(nc, name="ours", version="1.4.2", description="a natsjs_sync service",
                      metadata={"lang": "python-sync"}, stats_handler=lambda ep: {"seen": ep.num_requests})
    svc.add_endpoint("echo", lambda req: req.respond(b"echo:" + req.data), subject="ours.echo",
                     metadata={"kind": "echo"})

    def fail(req: Request) -> None:
        raise ServiceError(422, "cannot process")

    svc.add_group("ours").add_endpoint("fail", fail)
    nc.flush()
    return svc


# ---------------------------------------------------------------------- ours, seen by nats-py


def test_nats_py_discovers_inspects_and_calls_our_service(nats_url: str) -> None:
    with nats.connect(nats_url, name="svc") as nc:
        svc = start_ours(nc)

        async def client_side() -> dict[str, Any]:
            pc = await nats_py.connect(nats_url)
            found: dict[str, Any] = {}
            for verb, cls in [(nats_py_service.ServiceVerb.PING, nats_py_service.ServicePing),
                              (nats_py_service.ServiceVerb.INFO, nats_py_service.ServiceInfo),
                              (nats_py_service.ServiceVerb.STATS, nats_py_service.ServiceStats)]:
                for name, sid in [(None, None), ("ours", None), ("ours", svc.id)]:
                    subject = nats_py_service.control_subject(verb, name, sid)
                    reply = await pc.request(subject, b"", timeout=5)
                    found[subject] = cls.from_dict(json.loads(reply.data))
            found["echo"] = (await pc.request("ours.echo", b"py", timeout=5)).data
            failed = await pc.request("ours.fail", b"py", timeout=5)
            found["fail"] = failed.headers
            stats = await pc.request(f"$SRV.STATS.ours.{svc.id}", b"", timeout=5)
            found["stats_after"] = nats_py_service.ServiceStats.from_dict(json.loads(stats.data))
            await pc.close()
            return found

        found = asyncio.run(client_side())
        svc.stop()

    for key, doc in found.items():
        if key.startswith("$SRV."):
            assert (doc.id, doc.name, doc.version, doc.metadata) == (svc.id, "ours", "1.4.2", {"lang": "python-sync"})
    info = found[f"$SRV.INFO.ours.{svc.id}"]
    assert info.type == "io.nats.micro.v1.info_response" and info.description == "a natsjs_sync service"
    assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
        ("echo", "ours.echo", "q", {"kind": "echo"}), ("fail", "ours.fail", "q", {})]
    assert found["echo"] == b"echo:py"
    assert found["fail"] == {"Nats-Service-Error": "cannot process", "Nats-Service-Error-Code": "422"}
    after = {e.name: e for e in found["stats_after"].endpoints}
    assert (after["echo"].num_requests, after["echo"].num_errors, after["echo"].data) == (1, 0, {"seen": 1})
    assert (after["fail"].num_errors, after["fail"].last_error) == (1, "422:cannot process")
    assert after["echo"].processing_time > 0


# ---------------------------------------------------------------------- nats-py's service, seen by ours


class NatsPyService:
    """A nats-py micro service on an asyncio loop in a thread of its own."""

    def __init__(self, url: str):
        self.url = url
        self.ready = threading.Event()
        self.id = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._quit: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._quit = asyncio.Event()
        nc = await nats_py.connect(self.url)

        async def add(req: Any) -> None:
            numbers = json.loads(req.data)
            await req.respond(str(sum(numbers)).encode())

        async def divide(req: Any) -> None:
            a, b = json.loads(req.data)
            await req.respond(str(a / b).encode())  # b == 0 raises: nats-py answers 500

        svc = await nats_py_micro.add_service(nc, name="pysvc", version="0.9.0", description="written with nats-py",
                                              metadata={"lang": "nats-py"})
        group = svc.add_group(name="math")
        await group.add_endpoint(name="add", handler=add, metadata={"args": "list"})
        await group.add_endpoint(name="divide", handler=divide)
        await nc.flush()
        self.id = svc.id
        self.ready.set()
        await self._quit.wait()
        await svc.stop()
        await nc.close()

    def __enter__(self) -> NatsPyService:
        self._thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._quit is not None
        self._loop.call_soon_threadsafe(self._quit.set)
        self._thread.join(30)


def test_ours_discovers_inspects_and_calls_a_nats_py_service(nats_url: str) -> None:
    with NatsPyService(nats_url) as py, nats.connect(nats_url) as nc:
        services = micro.ServiceClient(nc)
        (ping,) = services.ping("pysvc")
        assert (ping.id, ping.version, ping.metadata) == (py.id, "0.9.0", {"lang": "nats-py"})
        (info,) = services.info("pysvc", py.id)
        assert info.description == "written with nats-py"
        assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
            ("add", "math.add", "q", {"args": "list"}), ("divide", "math.divide", "q", {})]
        assert services.request("math.add", b"[1, 2, 3]").data == b"6"
        with pytest.raises(ServiceError) as err:
            services.request("math.divide", b"[1, 0]")
        assert err.value.code == "500" and "ZeroDivisionError" in err.value.description
        assert [p.id for p in services.ping()] == [py.id]
        (stats,) = services.stats("pysvc")
        by_name = {e.name: e for e in stats.endpoints}
        assert (by_name["add"].num_requests, by_name["divide"].num_errors) == (1, 1)
        assert by_name["divide"].last_error.startswith("ZeroDivisionError")
        assert stats.started.year >= 2024


# ---------------------------------------------------------------------- ours, seen by nats.js


def test_nats_js_discovers_inspects_and_calls_our_service(nodejs: NodeJS, nats_url: str) -> None:
    with nats.connect(nats_url, name="svc") as nc:
        svc = start_ours(nc)
        got = nodejs.run(
            """
            import { connect } from "@nats-io/transport-node";
            import { Svcm, ServiceError } from "@nats-io/services";
            const nc = await connect({ servers: process.env.NATS_URL });
            const client = new Svcm(nc).client();
            const all = async (p) => { const out = []; for await (const x of await p) out.push(x); return out; };
            const id = process.env.SVC_ID;
            const result = {
              pings: [await all(client.ping()), await all(client.ping("ours")), await all(client.ping("ours", id))],
              infos: await all(client.info("ours")),
            };
            result.echo = (await nc.request("ours.echo", "js", { timeout: 5000 })).string();
            const failed = await nc.request("ours.fail", "js", { timeout: 5000 });
            const err = ServiceError.toServiceError(failed);
            result.error = { is: ServiceError.isServiceError(failed), code: err?.code, message: err?.message };
            result.stats = await all(client.stats("ours", id));
            result.startedParses = !Number.isNaN(Date.parse(result.stats[0].started));
            await nc.close();
            console.log(JSON.stringify(result));
            """,
            nats_url,
            SVC_ID=svc.id,
        )
        svc.stop()
    for pings in got["pings"]:
        assert pings == [{"type": "io.nats.micro.v1.ping_response", "name": "ours", "id": svc.id,
                          "version": "1.4.2", "metadata": {"lang": "python-sync"}}]
    (info,) = got["infos"]
    assert info["endpoints"][0] == {"name": "echo", "subject": "ours.echo", "queue_group": "q",
                                    "metadata": {"kind": "echo"}}
    assert got["echo"] == "echo:js"
    assert got["error"] == {"is": True, "code": 422, "message": "cannot process"}
    (stats,) = got["stats"]
    echo = next(e for e in stats["endpoints"] if e["name"] == "echo")
    assert (echo["num_requests"], echo["data"]) == (1, {"seen": 1})
    assert got["startedParses"] is True


# ---------------------------------------------------------------------- nats.js's service, seen by ours


def test_ours_discovers_inspects_and_calls_a_nats_js_service(nodejs: NodeJS, nats_url: str) -> None:
    result: dict[str, Any] = {}

    def run_js_service() -> None:
        result.update(nodejs.run(
            """
            import { connect } from "@nats-io/transport-node";
            import { Svcm } from "@nats-io/services";
            const nc = await connect({ servers: process.env.NATS_URL });
            let quit;
            const quitting = new Promise((resolve) => { quit = resolve; });
            const srv = await new Svcm(nc).add({
              name: "jssvc", version: "3.0.1", description: "written with nats.js", metadata: { lang: "js" },
            });
            srv.addEndpoint("upper", {
              subject: "jssvc.upper", metadata: { case: "upper" },
              handler: (err, msg) => { msg.respond(msg.string().toUpperCase()); },
            });
            srv.addEndpoint("teapot", {
              subject: "jssvc.teapot", handler: (err, msg) => { msg.respondError(418, "short and stout"); },
            });
            srv.addEndpoint("quit", { subject: "jssvc.quit", handler: (err, msg) => { msg.respond("bye"); quit(); } });
            await quitting;
            await srv.stop();
            await nc.close();
            console.log(JSON.stringify({ id: srv.id }));
            """,
            nats_url,
        ))

    node = threading.Thread(target=run_js_service)
    node.start()
    try:
        with nats.connect(nats_url) as nc:
            services = micro.ServiceClient(nc)
            assert wait_until(lambda: len(services.ping("jssvc", timeout=1)) == 1, timeout=60)
            (info,) = services.info("jssvc")
            assert (info.version, info.description, info.metadata) == ("3.0.1", "written with nats.js", {"lang": "js"})
            endpoints = {e.name: e for e in info.endpoints}
            assert endpoints["upper"].metadata == {"case": "upper"} and endpoints["quit"].metadata == {}
            assert services.request("jssvc.upper", b"shout").data == b"SHOUT"
            with pytest.raises(ServiceError) as err:
                services.request("jssvc.teapot")
            assert (err.value.code, err.value.description) == ("418", "short and stout")
            (stats,) = services.stats("jssvc", info.id)
            upper = next(e for e in stats.endpoints if e.name == "upper")
            assert (upper.num_requests, upper.last_error, upper.data) == (1, "", None)
            assert nc.request("jssvc.quit", timeout=5).data == b"bye"
    finally:
        node.join(60)
    assert result["id"] == info.id
