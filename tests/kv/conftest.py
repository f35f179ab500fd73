from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, KeyValue
from natsjs_sync.protocol.nuid import next_nuid


@pytest.fixture
def kv(js: JetStream) -> Iterator[KeyValue]:
    bucket = "b" + next_nuid()
    store = js.create_key_value(bucket=bucket, history=5, storage="memory")
    yield store
    try:
        js.delete_key_value(bucket)
    except nats.NatsError:
        pass
