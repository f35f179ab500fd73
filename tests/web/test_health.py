"""check_health: connection, round trip, JetStream and lag against limits, within its own timeout."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.health import Health, check_health, check_options
from natsjs_sync.testing import FaultProxy, NatsServer


@pytest.fixture
def js_client(nats_server: NatsServer) -> Iterator[nats.Client]:
    nc = nats.connect(nats_server.url, name="health")
    yield nc
    nc.close()


def test_a_healthy_client_passes_with_its_round_trip(js_client: nats.Client) -> None:
    js = js_client.jetstream()
    js.create_stream(name="ORDERS", subjects=["orders.>"])
    js.create_consumer("ORDERS", durable_name="ship", ack_policy="explicit")
    health = check_health(js_client, streams=["ORDERS"], consumers=["ORDERS/ship"])
    assert (health.status, health.ok, health.http_status) == ("pass", True, 200), health
    assert set(health.checks) == {"connection", "jetstream", "stream:ORDERS", "consumer:ORDERS/ship"}
    conn = health.checks["connection"]
    assert conn["connected"] is True and conn["url"] == js_client.connected_url and conn["rtt_ms"] >= 0
    assert health.checks["jetstream"]["streams"] == 1
    body = json.loads(json.dumps(health.as_dict()))  # a plain, JSON-ready dict
    assert body["status"] == "pass" and body["checks"]["consumer:ORDERS/ship"]["num_pending"] == 0


def test_streams_and_consumers_near_their_limits_warn(js_client: nats.Client) -> None:
    js = js_client.jetstream()
    js.create_stream(name="SMALL", subjects=["small.>"], max_msgs=10)
    js.create_consumer("SMALL", durable_name="slow", ack_policy="explicit", max_ack_pending=4)
    for i in range(9):
        js.publish("small.x", str(i).encode())
    health = check_health(js_client, streams=["SMALL"], consumers=[("SMALL", "slow")], max_pending=5)
    assert health.status == "warn" and health.http_status == 200  # still serving
    stream = health.checks["stream:SMALL"]
    assert (stream["status"], stream["messages"], stream["max_msgs"], stream["usage"]) == ("warn", 9, 10, 0.9)
    lag = health.checks["consumer:SMALL/slow"]
    assert (lag["status"], lag["num_pending"]) == ("warn", 9)

    # Delivered and not acknowledged up to max_ack_pending: stuck, even with the lag allowed.
    batch = js.consumer("SMALL", "slow").fetch(4, max_wait=5.0)
    assert len(list(batch)) == 4
    health = check_health(js_client, consumers=["SMALL/slow"], max_usage=0.95)
    lag = health.checks["consumer:SMALL/slow"]
    assert (lag["status"], lag["num_ack_pending"], lag["max_ack_pending"]) == ("warn", 4, 4)
    assert health.checks["jetstream"]["status"] == "pass"


def test_a_missing_stream_or_consumer_fails(js_client: nats.Client) -> None:
    health = check_health(js_client, streams=["NOPE"], consumers=["NOPE/none"])
    assert (health.status, health.http_status) == ("fail", 503)
    assert health.checks["connection"]["status"] == "pass"
    assert health.checks["stream:NOPE"]["status"] == "fail" and "NotFound" in health.checks["stream:NOPE"]["error"]
    assert health.checks["consumer:NOPE/none"]["status"] == "fail"
    with pytest.raises(ValueError, match="STREAM/CONSUMER"):
        check_health(js_client, consumers=["no-slash"])


def test_arguments_it_cannot_use_are_refused_before_anything_is_sent(js_client: nats.Client) -> None:
    sent = js_client.stats.out_msgs
    for kwargs, error in (({"streams": "ORDERS"}, TypeError),  # once checked as streams 'O', 'R', 'D' ...
                          ({"streams": ["A.B"]}, ValueError), ({"consumers": ["ORDERS"]}, ValueError),
                          ({"consumers": [("ORDERS", "a", "b")]}, TypeError), ({"max_usage": 90}, ValueError),
                          ({"max_usage": "0.9"}, TypeError), ({"max_pending": -1}, ValueError),
                          ({"jetstream": "no"}, TypeError), ({"timeout": "2s"}, TypeError),
                          ({"api_prefix": ""}, TypeError),
                          # values every check would fail with: no budget, unsendable JetStream requests
                          ({"timeout": 0}, ValueError), ({"domain": "hub east"}, ValueError),
                          ({"api_prefix": "$JS.>"}, ValueError), ({"streams": ["S" * 5000]}, ValueError)):
        with pytest.raises(error):
            check_health(js_client, **kwargs)
        with pytest.raises(error):
            check_options(**kwargs)  # the same rules, for settings checked at start-up
    assert js_client.stats.out_msgs == sent
    with pytest.raises(TypeError, match="no keyword 'stream'"):
        check_options(stream=["ORDERS"])
    assert check_options(timeout=2, consumers=["S/c", ["S", "d"]], streams=("S",)) == {
        "timeout": 2.0, "consumers": [("S", "c"), ("S", "d")], "streams": ["S"]}


def test_jetstream_not_enabled_fails_the_jetstream_check_only() -> None:
    with NatsServer(jetstream=False) as server, nats.connect(server.url) as nc:
        health = check_health(nc)
        assert health.checks["connection"]["status"] == "pass"
        assert health.checks["jetstream"]["status"] == "fail" and health.status == "fail"
        assert check_health(nc, jetstream=False).status == "pass"


def test_a_client_that_is_not_connected_fails_at_once(nats_server: NatsServer) -> None:
    nc = nats.connect(nats_server.url)
    nc.close()
    health = check_health(nc, timeout=None)  # no budget at all: nothing may be waited for
    assert health.status == "fail"
    assert health.checks == {"connection": {"status": "fail", "connected": False, "state": "closed"}}
    assert Health.failed(nats.NoServersError("nobody home")).as_dict()["checks"]["connection"]["error"] == \
        "NoServersError: nobody home"
    assert check_health(None).status == "fail"


def test_a_server_that_stops_answering_fails_within_the_timeout(nats_server: NatsServer) -> None:
    with FaultProxy(nats_server.url) as proxy:
        nc = nats.connect(proxy.url, ping_interval=600)
        try:
            assert check_health(nc).status == "pass"
            proxy.blackhole()  # the connection stays open; nothing comes back
            start = time.monotonic()
            health = check_health(nc, timeout=0.5, streams=["ANY"])
            elapsed = time.monotonic() - start
            assert health.status == "fail" and "timed out" in health.checks["connection"]["error"], health
            assert "stream:ANY" not in health.checks  # nothing more is asked of a server that does not answer
            assert elapsed < 10, elapsed  # bounded by its own timeout, not by the client's defaults
        finally:
            proxy.heal()
            nc.close()


def test_importing_natsjs_sync_or_the_health_check_imports_no_web_framework() -> None:
    code = ("import sys, natsjs_sync, natsjs_sync.health, natsjs_sync.contrib.process; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('flask', 'django', 'werkzeug')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
