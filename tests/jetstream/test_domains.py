"""JetStream domains: a hub and a leaf server, each with its own JetStream
domain, joined by a leafnode connection. A context bound to a domain reaches
the other server's JetStream, and mirrors, sources and buckets on the leaf read
from the hub (the source's ``domain`` is sent as the ``external`` API prefix the
server knows, as nats.go does)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import ExternalStream, StreamConfig, StreamSource
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.server import free_port

from ..conftest import wait_until


@pytest.fixture(scope="module")
def hub_and_leaf() -> Iterator[tuple[NatsServer, NatsServer]]:
    port = free_port()
    with tempfile.TemporaryDirectory() as hub_store, tempfile.TemporaryDirectory() as leaf_store, \
            NatsServer(config={"jetstream": {"store_dir": hub_store, "domain": "hub"},
                               "leafnodes": {"listen": f"127.0.0.1:{port}"}}) as hub, \
            NatsServer(config={"jetstream": {"store_dir": leaf_store, "domain": "leaf"},
                               "leafnodes": {"remotes": [{"url": f"nats-leaf://127.0.0.1:{port}"}]}}) as leaf:
        yield hub, leaf


def test_mirrors_sources_and_buckets_read_from_another_domain(hub_and_leaf: tuple[NatsServer, NatsServer]) -> None:
    hub, leaf = hub_and_leaf
    with nats.connect(hub.url) as on_hub, nats.connect(leaf.url) as on_leaf:
        jh = on_hub.jetstream()
        jh.create_stream(name="ORIGIN", subjects=["origin.>"], storage="memory")
        for i in range(3):
            jh.publish(f"origin.{i}", b"%d" % i)
        kv = jh.create_key_value(bucket="settings")
        kv.put("color", b"blue")

        remote = on_leaf.jetstream(domain="hub")
        # The leafnode connection comes up on its own time: wait until the hub answers through it.
        assert wait_until(lambda: _answers(remote), timeout=20)
        assert remote.account_info().domain == "hub"
        assert remote.stream("ORIGIN").info().state.messages == 3

        jl = on_leaf.jetstream()
        mirror = jl.create_stream(StreamConfig(name="COPY", storage="memory",
                                               mirror=StreamSource(name="ORIGIN", domain="hub")))
        agg = jl.create_stream(StreamConfig(name="AGG", storage="memory",
                                            sources=[StreamSource(name="ORIGIN", domain="hub")]))
        src = agg.info().config.sources
        assert src is not None and src[0].external is not None and src[0].external.api == "$JS.hub.API"
        assert wait_until(lambda: mirror.info().state.messages == 3, timeout=20)
        assert wait_until(lambda: agg.info().state.messages == 3, timeout=20)
        assert agg.get_msg(3).data == b"2"

        copy = jl.create_key_value(bucket="settings_copy", mirror=StreamSource(name="settings", domain="hub"))
        assert wait_until(lambda: copy.status().values == 1, timeout=20)
        assert copy.get("color").value == b"blue"


def _answers(js: nats.jetstream.JetStream) -> bool:
    try:
        js.account_info(timeout=1)
    except (nats.TimeoutError, nats.NoRespondersError, nats.JetStreamError):
        return False
    return True


def test_a_source_with_both_domain_and_external_is_refused_before_sending(
        hub_and_leaf: tuple[NatsServer, NatsServer]) -> None:
    _, leaf = hub_and_leaf
    with nats.connect(leaf.url) as nc:
        js = nc.jetstream()
        both = StreamSource(name="ORIGIN", domain="hub", external=ExternalStream(api="$JS.other.API"))
        with pytest.raises(ValueError, match="both domain and external"):
            js.create_stream(StreamConfig(name="BOTH", storage="memory", sources=[both]))
        with pytest.raises(nats.StreamNotFoundError):
            js.stream("BOTH")
