"""The discovery documents without a server: what we write, and reading what the
other implementations write (nats.js leaves fields out, nats-py writes nulls,
nats.go writes nanosecond times); plus the service's worker pool."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync.micro import EndpointStats, ServiceInfo, ServicePing, ServiceStats
from natsjs_sync.micro._pool import WorkerPool

from ..conftest import wait_until


def test_stats_document_is_written_with_every_field() -> None:
    started = datetime(2025, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    stats = ServiceStats(name="s", id="i", version="1.0.0", started=started,
                         endpoints=[EndpointStats(name="e", subject="e")])
    assert stats.to_dict() == {
        "type": "io.nats.micro.v1.stats_response", "name": "s", "id": "i", "version": "1.0.0", "metadata": {},
        "started": "2025-05-01T12:00:00.000000Z",
        "endpoints": [{"name": "e", "subject": "e", "queue_group": "", "num_requests": 0, "num_errors": 0,
                       "last_error": "", "processing_time": 0, "average_processing_time": 0, "data": None}],
    }
    assert ServiceStats.from_json(msgspec.json.encode(stats.to_dict())) == stats


def test_reads_what_nats_js_writes() -> None:
    raw = (b'{"type":"io.nats.micro.v1.stats_response","name":"js","id":"x","version":"1.0.0",'
           b'"started":"2025-05-01T12:00:00.123Z","endpoints":[{"name":"e","subject":"e","queue_group":"q",'
           b'"num_requests":3,"num_errors":0,"processing_time":3000000,"average_processing_time":1000000.5}]}')
    stats = ServiceStats.from_json(raw)
    assert stats.metadata == {} and stats.started.microsecond == 123000
    (ep,) = stats.endpoints
    assert (ep.last_error, ep.data, ep.average_processing_time) == ("", None, 1000000)
    info = ServiceInfo.from_json(b'{"name":"js","id":"x","version":"1.0.0","endpoints":[{"name":"e","subject":"e"}]}')
    assert (info.description, info.endpoints[0].metadata, info.endpoints[0].queue_group) == ("", {}, "")


def test_reads_what_nats_py_and_nats_go_write() -> None:
    info = ServiceInfo.from_json(b'{"type":"io.nats.micro.v1.info_response","name":"py","id":"x","version":"1.0.0",'
                                 b'"description":null,"metadata":null,"endpoints":[{"name":"e","subject":"e",'
                                 b'"queue_group":"q","metadata":null}]}')
    assert (info.description, info.metadata, info.endpoints[0].metadata) == ("", {}, {})
    go = ServiceStats.from_json(b'{"name":"go","id":"x","version":"1.0.0","metadata":{},'
                                b'"started":"2025-05-01T12:00:00.123456789Z","endpoints":null}')
    assert go.started == datetime(2025, 5, 1, 12, 0, 0, 123457, tzinfo=timezone.utc) and go.endpoints == []


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"name": "no id"}', b'{"name":"n","id":1,"version":"1"}'])
def test_garbage_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(nats.ProtocolError):
        ServicePing.from_json(raw)


def test_pool_threads_start_on_demand_and_end_when_idle() -> None:
    pool = WorkerPool(3, "natsjs-test-pool", idle_timeout=0.1)
    done = threading.Semaphore(0)
    for _ in range(6):
        pool.submit(done.release)
    assert all(done.acquire(timeout=10) for _ in range(6))
    assert pool.wait_idle(10) and pool.in_flight == 0
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name == "natsjs-test-pool"])
    pool.submit(done.release)  # a new burst starts a thread again
    assert done.acquire(timeout=10)
    pool.shutdown(10)
    with pytest.raises(RuntimeError):
        pool.submit(done.release)
