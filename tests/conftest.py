"""Shared fixtures. The ``nats_server``/``nats_url``/``nats_cluster`` fixtures come
from natsjs_sync's own pytest plugin (natsjs_sync.testing.plugin)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import FaultProxy, NatsServer


@pytest.fixture(scope="session")
def shared_server() -> Iterator[NatsServer]:
    """One server for tests that do not stop, restart or reconfigure it."""
    server = NatsServer()
    server.start()
    yield server
    server.close()


#: Limits that cut direct-get pages and pulls at test scale: a reader asks for ``max_payload`` bytes a page.
SMALL_PENDING = {"max_pending": 1024 * 1024, "max_payload": 64 * 1024}


@pytest.fixture(scope="session")
def small_pending_server() -> Iterator[NatsServer]:
    """A server whose ``max_pending`` (1 MiB, 64 MiB by default) and ``max_payload`` (64 KiB) are small:
    a batched direct get or a pull of a few hundred KiB is cut short, or would disconnect its reader as
    a slow consumer, at test scale."""
    with NatsServer(config=SMALL_PENDING) as server:
        yield server


@pytest.fixture
def nc(shared_server: NatsServer) -> Iterator[nats.Client]:
    client = nats.connect(shared_server.url, name="test")
    yield client
    client.close()


@pytest.fixture
def js(nc: nats.Client) -> JetStream:
    """A JetStream context of :func:`nc` (the shared server's client)."""
    return nc.jetstream()


@pytest.fixture
def stream(js: JetStream) -> Iterator[Stream]:
    """A stream ``S<nuid>`` on subjects ``<name>.>`` in memory, deleted afterwards."""
    name = "S" + next_nuid()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    yield st
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass  # the test deleted it already


@pytest.fixture
def proxy(server: NatsServer) -> Iterator[FaultProxy]:
    """A fault proxy in front of the module's own ``server`` fixture (fault tests define one)."""
    with FaultProxy(server.url) as p:
        yield p


@pytest.fixture
def witness(server: NatsServer) -> Iterator[nats.Client]:
    """A client straight to the module's ``server``, past the proxy: sees what the server does."""
    with nats.connect(server.url, name="witness") as nc:
        yield nc


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    """Every test must leave no natsjs thread running once its clients are closed."""
    before = {t for t in threading.enumerate() if t.name.startswith("natsjs-")}
    yield
    leaked = []
    for t in threading.enumerate():
        if t.name.startswith("natsjs-") and t not in before:
            t.join(3.0)
            if t.is_alive():
                leaked.append(t.name)
    assert not leaked, f"threads left running: {leaked}"


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (for server-side state
    that changes asynchronously and offers nothing to wait on)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        pause.wait(interval)


@pytest.fixture(params=["plain", "instrumented"])
def instrumentation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test of argument and callback checks both ways: as the library is, and under
    OpenTelemetry instrumentation (as ``opentelemetry-instrument`` runs an application in
    production), where every check must hold exactly the same."""
    if request.param == "plain":
        yield "plain"
        return
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (and the SDK) is part of the test extra")
    from opentelemetry.sdk.trace import TracerProvider

    from natsjs_sync.otel import NatsjsSyncInstrumentor

    provider = TracerProvider()  # recording spans: every wrapper runs its whole path
    instrumentor = NatsjsSyncInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield "instrumented"
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
