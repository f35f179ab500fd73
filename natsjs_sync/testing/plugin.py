"""pytest plugin: ``nats_server``, ``nats_url`` and ``nats_cluster`` fixtures.

Each fixture starts real nats-server processes on 127.0.0.1 with JetStream in a
temporary directory and removes them after the test. Set
``NATSJS_TEST_BACKEND=docker`` to run the official image through testcontainers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .server import NatsCluster, NatsServer


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
