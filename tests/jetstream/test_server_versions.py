"""The first release of each supported minor, and the last 2.12 of API level 2,
each a real server (tests/server_bins.py fetches and caches them): every feature
the client lets through on a version works there, at the JetStream API level
that server has (ADR-44), and the rest fail at once with FeatureNotSupportedError.

The rest of the suite runs against one server (the test extra's newest, or
``NATS_SERVER_BIN``); these run whatever it is."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import FeatureNotSupportedError
from natsjs_sync.jetstream import JetStream, _features
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer

from ..server_bins import MATRIX, nats_server_binary

#: The JetStream API level each release reports (nats-server's JSApiLevel): 2.12.5 raised it to 3.
LEVELS = {"2.11.0": 1, "2.12.0": 2, "2.12.4": 2}


@pytest.fixture(scope="module", params=MATRIX)
def versioned(request: pytest.FixtureRequest) -> Iterator[tuple[str, JetStream]]:
    version: str = request.param
    with NatsServer(binary=nats_server_binary(version)) as server, nats.connect(server.url, name=version) as nc:
        assert nc.server_info["version"] == version
        yield version, nc.jetstream(timeout=10)


def _name() -> str:
    return "V" + next_nuid()


def test_the_server_reports_the_level_of_its_release(versioned: tuple[str, JetStream]) -> None:
    version, js = versioned
    assert js.account_info().api.level == LEVELS[version]


def test_no_feature_asks_for_more_than_the_servers_that_have_it(versioned: tuple[str, JetStream]) -> None:
    """A feature's level is at most that of the first release with it: a server
    that has the feature never refuses it for want of a level (2.12.0 to 2.12.4
    refused counters, atomic batches, schedules and 'prioritized' when the client
    asked for level 3)."""
    version, js = versioned
    have = [key for key in _features.FEATURES if js.supports(key)]
    assert have, f"{version} should have some of the newer features"
    too_high = {key: _features.FEATURES[key].api_level for key in have
                if _features.FEATURES[key].api_level > LEVELS[version]}
    assert not too_high, f"features {version} has, asking for a higher API level: {too_high}"


@pytest.mark.parametrize("feature, options", [
    ("counters", {"allow_msg_counter": True}),
    ("atomic_batch", {"allow_atomic": True}),
    ("msg_schedules", {"allow_msg_schedules": True}),
    ("persist_mode", {"persist_mode": "async", "storage": "file"}),
    ("msg_ttl", {"allow_msg_ttl": True}),
])
def test_streams_with_newer_options(versioned: tuple[str, JetStream], feature: str, options: dict[str, object]) -> None:
    version, js = versioned
    name = _name()
    if not js.supports(feature):
        with pytest.raises(FeatureNotSupportedError):
            js.create_stream(name=name, subjects=[f"{name}.>"], **options)
        return
    st = js.create_stream(name=name, subjects=[f"{name}.>"], **options)
    try:
        cfg = st.cached_info.config
        assert cfg.metadata is not None and cfg.metadata.get("_nats.req.level") == str(
            _features.FEATURES[feature].api_level), f"{feature} on {version}: the server's own level for it"
        if feature == "counters":
            assert js.counter(name).add(f"{name}.hits", 3) == 3
        elif feature == "atomic_batch":
            batch = js.atomic_batch()
            batch.add(f"{name}.a", b"1")
            assert batch.commit(f"{name}.b", b"2").batch_size == 2
        elif feature == "msg_schedules":
            ack = js.publish(f"{name}.sched", b"later", schedule_target=f"{name}.out",
                             schedule_at=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
            assert ack.seq == 1
        elif feature == "msg_ttl":
            assert js.publish(f"{name}.t", b"x", ttl=60).seq == 1
    finally:
        js.delete_stream(name)


@pytest.mark.parametrize("policy", ["prioritized", "pinned_client", "overflow"])
def test_consumers_with_a_priority_policy(versioned: tuple[str, JetStream], policy: str) -> None:
    version, js = versioned
    name = _name()
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        feature = "priority_prioritized" if policy == "prioritized" else "priority_groups"
        if not js.supports(feature):
            with pytest.raises(FeatureNotSupportedError):
                js.create_consumer(name, durable_name="c", priority_policy=policy, priority_groups=["g"])
            return
        cons = js.create_consumer(name, durable_name="c", priority_policy=policy, priority_groups=["g"])
        assert cons.cached_info.config.priority_policy == policy, f"{policy} on {version}"
        js.publish(f"{name}.x", b"m")
        msg = cons.next(timeout=10, group="g")
        assert msg.data == b"m"
    finally:
        js.delete_stream(name)
