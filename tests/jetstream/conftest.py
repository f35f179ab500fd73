"""Fixtures for JetStream tests: a JetStream context and a fresh stream per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def stream(js: JetStream) -> Iterator[Stream]:
    """A stream ``S<nuid>`` on subjects ``<name>.>``, deleted afterwards."""
    name = "S" + next_nuid()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    yield st
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass
