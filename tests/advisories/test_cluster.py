"""Leader-election advisories, which only a cluster sends: typed, with their replicas."""

from __future__ import annotations

import natsjs_sync as nats
from natsjs_sync.advisories import (
    AdvisoryFeed,
    ConsumerLeaderElectedAdvisory,
    StreamLeaderElectedAdvisory,
    advisory_subjects,
)
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsCluster


def test_leader_elections_arrive_typed(nats_cluster: NatsCluster) -> None:
    name = "R" + next_nuid()
    with nats.connect(nats_cluster.urls, name="advisories") as nc:
        js = nc.jetstream(timeout=20.0)
        subjects = advisory_subjects(("stream_leader_elected", "consumer_leader_elected"), name)
        with AdvisoryFeed(nc, subjects) as feed:
            st = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
            st.create_consumer(durable_name="C", ack_policy="explicit")  # replicated as its stream
            got = [feed.next(timeout=30.0) for _ in range(2)]
    stream_led = next(a for a in got if isinstance(a, StreamLeaderElectedAdvisory))
    assert stream_led.stream == name and stream_led.leader
    assert stream_led.type == "io.nats.jetstream.advisory.v1.stream_leader_elected"
    assert stream_led.replicas is not None
    assert stream_led.leader in {r.name for r in stream_led.replicas} and all(r.peer for r in stream_led.replicas)
    cons_led = next(a for a in got if isinstance(a, ConsumerLeaderElectedAdvisory))
    assert (cons_led.stream, cons_led.consumer) == (name, "C") and cons_led.leader
