"""Fixtures of the consumer group tests: a stream whose subjects carry a partition number."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, SubjectTransform
from natsjs_sync.protocol.nuid import next_nuid

PARTITIONS = 4


@pytest.fixture
def pstream(js: JetStream) -> Iterator[str]:
    """A stream on ``<name>.*`` storing ``<partition>.<name>.<key>`` (4 partitions by key)."""
    name = "P" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.*"], storage="memory",
                     subject_transform=SubjectTransform(
                         src=f"{name}.*", dest=f"{{{{Partition({PARTITIONS},1)}}}}.{name}.{{{{Wildcard(1)}}}}"))
    yield name
    for n in (name,):
        try:
            js.delete_stream(n)
        except nats.NatsError:
            pass


@pytest.fixture
def estream(js: JetStream) -> Iterator[str]:
    """A plain stream on ``<name>.*`` (an elastic group adds the partitions); its groups' streams go with it."""
    name = "E" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.*"], storage="memory")
    yield name
    for n in list(js.stream_names()):
        if n == name or n.startswith(f"{name}-"):
            try:
                js.delete_stream(n)
            except nats.NatsError:
                pass
