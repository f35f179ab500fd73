"""natsjs_sync.contrib.asgi: the synchronous client from async views (run_sync) and the ASGI lifespan
(NatsLifespan), in process and under uvicorn serving a Django project."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.contrib import asgi
from natsjs_sync.contrib.asgi import NatsLifespan, run_sync
from natsjs_sync.contrib.process import ProcessClient, SettingsError
from natsjs_sync.testing import FaultProxy, NatsServer, free_port

from ..conftest import wait_until
from ..fork_kit import run_in_child
from ._kit import call, django_project, gunicorn_start, stop, uvicorn_start

pytest.importorskip("uvicorn")

#: More blocking calls than the event loop's default executor has threads (min(32, cpu_count + 4)).
MORE_THAN_THE_DEFAULT_EXECUTOR = 40

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.fixture(autouse=True)
def pool_threads_ended() -> Iterator[None]:
    """run_sync's pool lives as long as the process; end its threads so none is counted as leaked."""
    yield
    asgi.shutdown_executor()


# ---------------------------------------------------------------------- run_sync


def test_run_sync_runs_the_call_off_the_loop_with_the_callers_context() -> None:
    async def main() -> tuple[str, str, int]:
        request_id.set("r-42")
        return await run_sync(lambda x, *, y: (threading.current_thread().name, request_id.get(), x + y), 1, y=2)

    name, seen, total = asyncio.run(main())
    assert name.startswith("natsjs-asgi-call"), name
    assert (seen, total) == ("r-42", 3)

    async def fails() -> None:
        await run_sync(int, "x")

    with pytest.raises(ValueError):
        asyncio.run(fails())


def test_run_sync_answers_while_more_calls_wait_than_the_default_executor_has_threads() -> None:
    release = threading.Event()

    async def main() -> str:
        waiting = [asyncio.ensure_future(run_sync(release.wait, 60)) for _ in range(MORE_THAN_THE_DEFAULT_EXECUTOR)]
        try:
            # Every thread of a default-sized pool would be taken: this call would queue behind them.
            return await asyncio.wait_for(run_sync(lambda: "answered"), 30)
        finally:
            release.set()
            await asyncio.gather(*waiting)

    assert asyncio.run(main()) == "answered"


def test_run_sync_works_in_a_forked_child_of_a_process_that_used_it() -> None:
    async def used() -> int:
        return await run_sync(os.getpid)

    assert asyncio.run(used()) == os.getpid()  # the parent's pool now has a thread

    def child() -> dict[str, object]:
        async def main() -> int:
            return await asyncio.wait_for(run_sync(os.getpid), 10)

        try:
            return {"pid": asyncio.run(main()), "me": os.getpid()}
        except asyncio.TimeoutError:
            return {"error": "the call never ran: the child kept the parent's pool"}

    result = run_in_child(child)
    assert "error" not in result and result["pid"] == result["me"], result


def test_set_max_workers_checks_and_resizes() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        asgi.set_max_workers(0)
    try:
        asgi.set_max_workers(3)
        assert asgi.get_executor()._max_workers == 3
    finally:
        asgi.set_max_workers(asgi.DEFAULT_MAX_WORKERS)


# ---------------------------------------------------------------------- NatsLifespan in process


async def _drive(app: Any, *, shutdown: bool = True) -> list[dict[str, Any]]:
    """Play an ASGI server's side of the lifespan protocol; the messages the app sent."""
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []
    events.put_nowait({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete" and shutdown:
            events.put_nowait({"type": "lifespan.shutdown"})

    await asyncio.wait_for(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, events.get, send), 60)
    return sent


class _StarletteLike:
    """An app that speaks the lifespan protocol itself and uses the client in it."""

    def __init__(self, holder: ProcessClient, fail: bool = False):
        self.holder, self.fail = holder, fail
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                nc = self.holder.current
                self.seen.append(f"startup connected={nc is not None and nc.is_connected}")
                if self.fail:
                    await send({"type": "lifespan.startup.failed", "message": "the app's own startup failed"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                nc = self.holder.current
                self.seen.append(f"shutdown connected={nc is not None and nc.is_connected}")
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _django_like(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # as Django's ASGIHandler
        raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")


def test_the_lifespan_connects_before_the_apps_startup_and_drains_after_its_shutdown(
        nats_server: NatsServer) -> None:
    holder = ProcessClient(nats_server.url)
    inner = _StarletteLike(holder)
    sent = asyncio.run(_drive(NatsLifespan(inner, holder)))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert inner.seen == ["startup connected=True", "shutdown connected=True"]
    assert holder.current is None  # drained and let go


def test_the_lifespan_is_handled_for_an_app_without_lifespan_support(nats_server: NatsServer) -> None:
    holder = ProcessClient(nats_server.url)
    seen: list[nats.Client] = []
    holder.add_on_connect(seen.append)
    sent = asyncio.run(_drive(NatsLifespan(_django_like, lambda: holder)))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert len(seen) == 1 and seen[0].is_closed


def test_the_startup_fails_with_the_reason(nats_server: NatsServer) -> None:
    nowhere = ProcessClient(f"nats://127.0.0.1:{free_port()}", options={"connect_timeout": 2})
    sent = asyncio.run(_drive(NatsLifespan(_django_like, nowhere)))
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "could not connect to any server" in sent[0]["message"], sent

    def bad_settings() -> ProcessClient:
        raise SettingsError(["NATS['options']['connect_timeout']: must be a number"])

    sent = asyncio.run(_drive(NatsLifespan(_django_like, bad_settings)))
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "NATS['options']['connect_timeout']" in sent[0]["message"]

    holder = ProcessClient(nats_server.url)
    sent = asyncio.run(_drive(NatsLifespan(_StarletteLike(holder, fail=True), holder)))
    assert sent == [{"type": "lifespan.startup.failed", "message": "the app's own startup failed"}]
    assert holder.current is None  # the startup failed: the client made for it is closed

    with pytest.raises(ValueError, match="drain_timeout"):
        NatsLifespan(_django_like, holder, drain_timeout=0)


def test_other_scopes_go_to_the_app() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    asyncio.run(NatsLifespan(app, ProcessClient("nats://127.0.0.1:4222"))({"type": "http"}, None, None))  # type: ignore[arg-type]
    assert seen == ["http"]


def test_the_django_middleware_stays_async_under_an_async_handler() -> None:
    pytest.importorskip("django")
    from asgiref.sync import iscoroutinefunction

    from natsjs_sync.contrib.django.middleware import NatsErrorMiddleware

    async def view(request: Any) -> Any:
        return "response"

    middleware = NatsErrorMiddleware(view)
    assert iscoroutinefunction(middleware)
    assert asyncio.run(middleware(None)) == "response"  # type: ignore[arg-type]
    assert not iscoroutinefunction(NatsErrorMiddleware(lambda request: "response"))


# ---------------------------------------------------------------------- uvicorn serving the Django project


@pytest.fixture
def proxy(nats_server: NatsServer) -> Iterator[FaultProxy]:
    with FaultProxy(nats_server.url) as proxy:
        yield proxy


def _shop(tmp_path: Path, servers: str, **env: str) -> dict[str, str]:
    return {**django_project(tmp_path, {"servers": [servers], "on_connect": ["shop.nats.declare_shop"],
                                        "options": {"name": "asgi-shop", "reconnect_time_wait": 0.2},
                                        "drain_timeout": 20}), **env}


def _stored(nats_server: NatsServer, subject: str) -> int:
    with nats.connect(nats_server.url) as nc:
        info = nc.jetstream().stream_info("SHOP", subjects_filter=subject)
        return sum((info.state.subjects or {}).values())


def test_uvicorn_serves_concurrent_async_publishes(nats_server: NatsServer, tmp_path: Path) -> None:
    env = _shop(tmp_path, nats_server.url)
    log = tmp_path / "uvicorn.log"
    with uvicorn_start("shop.asgi:application", env, log, cwd=tmp_path) as (_, base):
        assert base is not None, log.read_text()
        assert call("GET", f"{base}/healthz/nats")[0] == 200
        with ThreadPoolExecutor(max_workers=50) as pool:
            answers = list(pool.map(lambda i: call("POST", f"{base}/async/orders", {"id": i}), range(200)))
        assert {status for status, _ in answers} == {201}, answers
        assert len({body["seq"] for _, body in answers}) == 200
        status, state = call("GET", f"{base}/async/state")
        assert status == 200 and state["connected"] and state["on_loop_thread"], state
    assert _stored(nats_server, "orders.new") == 200


def test_the_loop_answers_while_publishes_wait_out_an_outage(nats_server: NatsServer, proxy: FaultProxy,
                                                             tmp_path: Path) -> None:
    env = _shop(tmp_path, proxy.url, SHOP_CALL_TIMEOUT="120")  # the publishes wait for the server's return
    log = tmp_path / "uvicorn.log"
    with uvicorn_start("shop.asgi:application", env, log, cwd=tmp_path) as (_, base):
        assert base is not None, log.read_text()
        assert call("GET", f"{base}/healthz/nats")[0] == 200
        proxy.refuse_new()
        proxy.cut()
        assert wait_until(lambda: call("GET", f"{base}/healthz/nats")[0] == 503, timeout=30, interval=0.1)

        with ThreadPoolExecutor(max_workers=MORE_THAN_THE_DEFAULT_EXECUTOR) as pool:
            pending = [pool.submit(call, "POST", f"{base}/async/orders", {"id": i}, timeout=180)
                       for i in range(MORE_THAN_THE_DEFAULT_EXECUTOR)]
            # None of them can finish while the server is away: every answer below came from a
            # loop (and a pool) that these waiting publishes do not hold.
            states: list[dict[str, Any]] = []

            def all_waiting() -> bool:
                status, state = call("GET", f"{base}/async/state")
                states.append(state)
                return status == 200 and state["publishing"] == MORE_THAN_THE_DEFAULT_EXECUTOR

            assert wait_until(all_waiting, timeout=60, interval=0.1), states[-3:]
            assert not states[-1]["connected"]
            assert not any(job.done() for job in pending)
            assert call("GET", f"{base}/healthz/nats")[0] == 503

            proxy.heal()
            answers = [job.result(timeout=180) for job in pending]
        assert {status for status, _ in answers} == {201}, answers
        assert wait_until(lambda: call("GET", f"{base}/healthz/nats")[0] == 200, timeout=30, interval=0.1)
    assert _stored(nats_server, "orders.new") == MORE_THAN_THE_DEFAULT_EXECUTOR


def test_sigterm_drains_the_client_and_exits_0(nats_server: NatsServer, tmp_path: Path) -> None:
    env = _shop(tmp_path, nats_server.url)
    log = tmp_path / "uvicorn.log"
    with uvicorn_start("shop.asgi:application", env, log, cwd=tmp_path,
                       args=("--timeout-graceful-shutdown", "20")) as (proc, base):
        assert base is not None, log.read_text()
        with ThreadPoolExecutor(max_workers=20) as pool:
            statuses = list(pool.map(lambda i: call("POST", f"{base}/async/notes", {"n": i})[0], range(300)))
        assert set(statuses) == {202}
        # Core publishes: answered once buffered, sent by the drain at shutdown.
        code = stop(proc, signal.SIGTERM, timeout=30)
    text = log.read_text()
    # uvicorn 0.29+ ends a clean shutdown by raising the signal it caught again (-SIGTERM), older ones exit 0.
    assert code in (0, -signal.SIGTERM), text
    assert "Application shutdown complete" in text and "Finished server process" in text, text
    assert wait_until(lambda: _stored(nats_server, "notes.new") == 300, timeout=10), _stored(nats_server, "notes.new")


def test_bad_settings_or_no_server_stop_the_startup(tmp_path: Path) -> None:
    log = tmp_path / "uvicorn.log"
    env = django_project(tmp_path, {"options": {"connect_timeout": "2s"}})
    with uvicorn_start("shop.asgi:application", env, log, cwd=tmp_path) as (proc, base):
        assert base is None and proc.wait(30) != 0, log.read_text()
    assert "NATS['options']['connect_timeout']" in log.read_text()

    env = _shop(tmp_path, f"nats://127.0.0.1:{free_port()}")
    with uvicorn_start("shop.asgi:application", env, log, cwd=tmp_path) as (proc, base):
        assert base is None and proc.wait(30) != 0, log.read_text()
    text = log.read_text()
    assert "Application startup failed" in text and "could not connect to any server" in text, text


def test_the_asgi_module_imports_no_asyncio_client() -> None:
    code = ("import sys, natsjs_sync.contrib.asgi; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('nats', 'asgiref', 'django'))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert json.loads(out) == []


def test_gunicorn_asgi_workers_each_connect_and_drain(nats_server: NatsServer, tmp_path: Path) -> None:
    """gunicorn's ASGI worker, pre-forked from a master that imported the app (--preload)."""
    log = tmp_path / "gunicorn.log"
    env = _shop(tmp_path, nats_server.url)
    args = ("-k", "asgi", "-w", "2", "--preload", "--graceful-timeout", "20", "--timeout", "60")
    with gunicorn_start("shop.asgi:application", env, log, chdir=tmp_path, args=args) as (proc, base):
        assert base is not None, log.read_text()
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(lambda i: call("POST", f"{base}/async/orders", {"id": i}), range(100)))
            notes = list(pool.map(lambda i: call("POST", f"{base}/async/notes", {"n": i})[0], range(100)))
        assert {status for status, _ in answers} == {201} and set(notes) == {202}, (answers, notes)
        assert call("GET", f"{base}/healthz/nats")[0] == 200
        assert stop(proc, signal.SIGTERM, timeout=60) == 0, log.read_text()
    assert _stored(nats_server, "orders.new") == 100
    assert wait_until(lambda: _stored(nats_server, "notes.new") == 100, timeout=10)
