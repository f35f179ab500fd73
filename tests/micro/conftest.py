"""Fixtures for the service tests: the service's client and a separate caller."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer


@pytest.fixture
def caller(shared_server: NatsServer) -> Iterator[nats.Client]:
    """Another connection, as the users of a service have."""
    with nats.connect(shared_server.url, name="caller") as client:
        yield client
