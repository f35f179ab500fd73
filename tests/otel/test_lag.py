"""Consumer lag gauges read through the SDK's in-memory metric reader, against a real server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.otel import ConsumerLag, ConsumerLagGauges
from natsjs_sync.otel.lag import CONSUMER_ACK_PENDING, CONSUMER_PENDING, CONSUMER_REDELIVERED, CONSUMER_WAITING

Points = dict[str, dict[tuple[str, str], int]]


@pytest.fixture
def sdk() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def collect(reader: InMemoryMetricReader) -> Points:
    """gauge name -> (stream, consumer) -> value, of the lag gauges only."""
    out: Points = {}
    data = reader.get_metrics_data()
    for rm in (data.resource_metrics if data else ()):
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if not m.name.startswith("nats.jetstream.consumer."):
                    continue
                for p in m.data.data_points:
                    attrs = dict(p.attributes or {})
                    assert attrs["messaging.system"] == "nats"
                    key = (str(attrs["messaging.nats.stream"]), str(attrs["messaging.nats.consumer"]))
                    out.setdefault(m.name, {})[key] = p.value  # type: ignore[union-attr]
    return out


def test_lag_of_registered_consumers(js: JetStream, stream: Stream,
                                     sdk: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    provider, reader = sdk
    a = stream.create_consumer(durable_name="A", ack_policy="explicit")
    stream.create_consumer(durable_name="B", ack_policy="explicit")
    stream.create_consumer(durable_name="NOT_REGISTERED", ack_policy="explicit")
    for i in range(5):
        js.publish(f"{stream.name}.{i}", b"x")
    first = a.next(timeout=5.0)
    assert first.reply
    js.nc.request(first.reply, b"-NAK", timeout=5.0)  # confirmed: the next delivery is a redelivery
    a.next(timeout=5.0)  # message 1 again, unacked
    a.next(timeout=5.0)  # message 2, unacked
    with ConsumerLagGauges(js, interval=None, meter_provider=provider) as gauges:
        gauges.register(stream.name, "A")
        gauges.register(stream.name, "B")
        assert collect(reader) == {}  # nothing polled yet: nothing reported
        polled = gauges.poll()
        assert polled == [ConsumerLag(stream.name, "A", 3, 2, 1, 0), ConsumerLag(stream.name, "B", 5, 0, 0, 0)]
        points = collect(reader)
        a_key, b_key = (stream.name, "A"), (stream.name, "B")
        assert points[CONSUMER_PENDING] == {a_key: 3, b_key: 5}
        assert points[CONSUMER_ACK_PENDING] == {a_key: 2, b_key: 0}
        assert points[CONSUMER_REDELIVERED] == {a_key: 1, b_key: 0}
        assert points[CONSUMER_WAITING] == {a_key: 0, b_key: 0}
        # Deleted consumers stop being reported; unregistered ones too.
        stream.delete_consumer("B")
        gauges.poll()
        assert collect(reader)[CONSUMER_PENDING] == {a_key: 3}
        gauges.unregister(stream.name, "A")
        assert gauges.poll() == [] and collect(reader) == {}
    assert collect(reader) == {}  # closed: nothing more


def test_no_request_while_nothing_is_registered(nc: nats.Client, js: JetStream,
                                                sdk: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    provider, reader = sdk
    with ConsumerLagGauges(js, interval=None, meter_provider=provider) as gauges:
        before = nc.stats.out_msgs
        assert gauges.poll() == []
        collect(reader)
        assert nc.stats.out_msgs == before


def test_cardinality_is_bounded(js: JetStream, sdk: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    provider, _ = sdk
    with ConsumerLagGauges(js, interval=None, meter_provider=provider, max_consumers=2) as gauges:
        gauges.register("S", "a")
        gauges.register("S", "b")
        gauges.register("S", "a")  # again: no new series
        with pytest.raises(ValueError, match="max_consumers"):
            gauges.register("S", "c")
        assert gauges.registered == [("S", "a"), ("S", "b")]
    with pytest.raises(ValueError):
        ConsumerLagGauges(js, interval=0, meter_provider=provider)


def test_the_poller_thread_reads_at_its_interval(js: JetStream, stream: Stream,
                                                 sdk: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    from tests.conftest import wait_until

    provider, reader = sdk
    stream.create_consumer(durable_name="A", ack_policy="explicit")
    js.publish(f"{stream.name}.x", b"x")
    with ConsumerLagGauges(js, interval=0.05, meter_provider=provider) as gauges:
        gauges.register(stream.name, "A")
        assert wait_until(lambda: collect(reader).get(CONSUMER_PENDING) == {(stream.name, "A"): 1}, timeout=10.0)
        js.publish(f"{stream.name}.y", b"y")
        assert wait_until(lambda: collect(reader).get(CONSUMER_PENDING) == {(stream.name, "A"): 2}, timeout=10.0)
        thread = gauges._thread
        assert thread is not None and thread.name.startswith("natsjs-lag-")
    assert not thread.is_alive()


def test_two_instances_on_one_meter_both_report(js: JetStream, stream: Stream,
                                                sdk: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    provider, reader = sdk
    stream.create_consumer(durable_name="A", ack_policy="explicit")
    stream.create_consumer(durable_name="B", ack_policy="explicit")
    with ConsumerLagGauges(js, interval=None, meter_provider=provider) as one, \
            ConsumerLagGauges(js, interval=None, meter_provider=provider) as two:
        one.register(stream.name, "A")
        two.register(stream.name, "B")
        one.poll()
        two.poll()
        assert set(collect(reader)[CONSUMER_PENDING]) == {(stream.name, "A"), (stream.name, "B")}


class CountingRequests:
    """The JetStream context the gauges read through, counting their consumer-info requests."""

    def __init__(self, js: JetStream) -> None:
        self.js = js
        self.nc = js.nc
        self.timeout = js.timeout
        self.requests = 0

    def consumer_info(self, stream: str, consumer: str, timeout: float | None = None) -> object:
        self.requests += 1
        return self.js.consumer_info(stream, consumer, timeout=timeout)


def test_a_poll_while_disconnected_makes_no_request() -> None:
    """A disconnected client would hold each consumer's request for its whole timeout, one after the
    other: the poll ends instead, and the consumers keep their last values."""
    from typing import cast

    from natsjs_sync.testing import NatsServer
    from tests.conftest import wait_until

    with NatsServer() as server:
        nc = nats.connect(server.url, max_reconnect_attempts=-1)
        try:
            js = nc.jetstream(timeout=2.0)
            js.create_stream(name="LAG", subjects=["lag.>"], storage="memory")
            counting = CountingRequests(js)
            gauges = ConsumerLagGauges(cast(JetStream, counting), interval=None)
            for i in range(5):
                js.stream("LAG").create_consumer(durable_name=f"c{i}")
                gauges.register("LAG", f"c{i}")
            assert len(gauges.poll()) == 5 and counting.requests == 5
            server.stop()
            assert wait_until(lambda: not nc.is_connected, timeout=10.0)
            assert len(gauges.poll()) == 5  # the last values
            assert counting.requests == 5
            gauges.close()
        finally:
            nc.close()


def test_a_consumer_whose_stream_was_deleted_is_no_longer_reported(js: JetStream) -> None:
    """Its last values would otherwise be reported for ever (an alert on them would never clear)."""
    from natsjs_sync.protocol.nuid import next_nuid

    name = "GONE" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    js.publish(f"{name}.a", b"x")
    js.stream(name).create_consumer(durable_name="c")
    with ConsumerLagGauges(js, interval=None) as gauges:
        gauges.register(name, "c")
        assert [lag.num_pending for lag in gauges.poll()] == [1]
        js.delete_stream(name)
        assert gauges.poll() == []



@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_poll_polls_on_its_own(js: JetStream, stream: Stream) -> None:
    """The parent's poller holds its poll lock for a whole poll (requests included): a child forked then
    must neither wait for it for ever nor be left without a poller."""
    stream.create_consumer(durable_name="c")
    with ConsumerLagGauges(js, interval=3600.0) as gauges:
        gauges.register(stream.name, "c")
        with gauges._poll_lock:  # as the parent's poller does during a poll
            pid = os.fork()
            if pid == 0:  # the child: reports by its exit status only
                code = 3
                try:
                    done = threading.Event()
                    threading.Thread(target=lambda: (gauges.poll(), done.set()), daemon=True).start()
                    thread = gauges._thread
                    code = 0 if done.wait(30.0) and thread is not None and thread.is_alive() else 1
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
