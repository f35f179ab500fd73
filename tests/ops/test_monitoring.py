"""The typed client of the servers' monitoring requests, on a 3-node cluster with a system account."""

from __future__ import annotations

import datetime
import re
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import PermissionsError
from natsjs_sync.monitor import (
    KINDS,
    AccountJetStream,
    MonitorError,
    MonitorResponseError,
    ServerFilter,
    Statsz,
    Status,
    SystemAccountRequiredError,
    SystemClient,
    Varz,
)
from natsjs_sync.monitor.models import decode_as
from natsjs_sync.testing import NatsCluster, NatsServer

from ._kit import ACCOUNTS, eventually, system_cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with system_cluster("mon") as c:
        yield c


@pytest.fixture
def sys_nc(cluster: NatsCluster) -> Iterator[nats.Client]:
    with nats.connect(cluster.url, user="sys", password="sys", name="monitor") as nc:
        yield nc




def names(cluster: NatsCluster) -> set[str]:
    return {str(n.server_name) for n in cluster.nodes}


def test_every_kind_is_answered_by_every_node(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    client = SystemClient(sys_nc, timeout=20.0)
    for kind, model in KINDS.items():
        replies = getattr(client, kind.lower())(expected=3)
        assert {r.server.name for r in replies} == names(cluster), kind
        assert all(isinstance(r.data, model) for r in replies), kind
        assert all(r.server.id.startswith("N") and r.server.cluster == "mon" for r in replies), kind
    pings = client.ping(expected=3)
    assert {r.server.name for r in pings} == names(cluster)
    assert all(isinstance(r.data, Statsz) for r in pings)
    # What each server knows of the others settles shortly after the cluster forms.
    assert eventually(lambda: all(r.data.active_servers == 3 for r in client.ping(expected=3)), 20.0)
    assert eventually(lambda: len({r.data.meta_cluster.leader if r.data.meta_cluster else ""
                                   for r in client.jsz(expected=3)} - {""}) == 1, 20.0)
    assert eventually(lambda: all({route.remote_name for route in r.data.routes} == names(cluster) - {r.server.name}
                                  for r in client.routez(expected=3)), 20.0)


def test_one_server_by_id_and_by_filter(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    client = SystemClient(sys_nc, timeout=20.0)
    everyone = {r.server.name: r.server.id for r in client.varz(expected=3)}
    name, server_id = sorted(everyone.items())[1]
    (one,) = client.varz(server=server_id)
    assert one.server.name == name and one.data.server_id == server_id and one.data.server_name == name
    assert isinstance(one.data, Varz) and one.data.port in {n.port for n in cluster.nodes}
    (pong,) = client.ping(server=server_id)
    assert pong.server.id == server_id and isinstance(pong.data, Statsz)
    filtered = client.healthz(servers=ServerFilter(name=name), timeout=20.0)
    assert [r.server.name for r in filtered] == [name]
    assert filtered[0].data.ok and filtered[0].data.status_code == 200
    with pytest.raises(MonitorError) as info:
        client.varz(server="NOSUCHSERVER")
    assert info.value.code == 404 and "NOSUCHSERVER" in str(info.value)


def test_unknown_fields_are_kept(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    (reply,) = SystemClient(sys_nc).varz(server=SystemClient(sys_nc).ping(expected=1)[0].server.id)
    # Fields the model does not name survive, as the server sent them.
    assert reply.data.unknown_fields and "auth_timeout" in reply.data.unknown_fields
    doc = {"server_id": "N1", "connections": 2, "future_field": {"a": [1]},
           "cluster": {"name": "c"}}
    varz = decode_as(doc, Varz)
    assert varz.connections == 2 and varz.unknown_fields == {"future_field": {"a": [1]}}
    nested = decode_as({"connections": [{"cid": 7, "new_thing": True}]}, KINDS["CONNZ"])
    assert nested.connections[0].cid == 7 and nested.connections[0].unknown_fields == {"new_thing": True}
    # A document that does not fit is our error, never msgspec's.
    with pytest.raises(MonitorResponseError):
        decode_as({"connections": "many"}, Varz)


def test_connz_filters_and_paging(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    node = cluster.nodes[0]
    apps = [nats.connect(node.url, user="app", password="app", name=f"app-{i}") for i in range(3)]
    try:
        apps[0].subscribe("orders.>")
        apps[0].flush()
        client = SystemClient(sys_nc, timeout=20.0)
        server_id = client.varz(servers=ServerFilter(name=node.server_name))[0].server.id
        (page,) = client.connz(server=server_id, account="APP", auth=True, subscriptions=True, sort="cid")
        mine = [c for c in page.data.connections if c.name.startswith("app-")]
        assert sorted(c.name for c in mine) == ["app-0", "app-1", "app-2"]
        assert all(c.account == "APP" and c.authorized_user == "app" for c in mine)
        assert [c.subscriptions_list for c in mine if c.name == "app-0"] == [["orders.>"]]
        (second,) = client.connz(server=server_id, account="APP", sort="cid", offset=1, limit=1)
        assert second.data.offset == 1 and second.data.limit == 1 and second.data.num_connections == 1
        assert second.data.total == 3 and second.data.connections[0].cid == mine[1].cid
        with pytest.raises(ValueError):
            client.connz(state="sleeping")
    finally:
        for nc in apps:
            nc.close()


def test_account_jetstream(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    with nats.connect(cluster.url, user="app", password="app") as app:
        js = app.jetstream(timeout=20.0)
        js.create_stream(name="MONITORED", subjects=["monitored.>"], num_replicas=3, storage="memory")
        js.publish("monitored.one", b"x")
        client = SystemClient(sys_nc, timeout=20.0)

        def hosting() -> set[str]:
            """The servers whose answer lists the stream (each replica's server, once it has it)."""
            replies = client.account_jetstream("APP", streams=True, expected=3)
            assert all(isinstance(r.data, AccountJetStream) and r.data.name == "APP" for r in replies)
            return {r.server.name for r in replies
                    if [s["name"] for s in r.data.stream_detail or []] == ["MONITORED"]}

        assert eventually(lambda: hosting() == names(cluster), 20.0)
        js.delete_stream("MONITORED")


def test_a_user_outside_the_system_account_gets_a_permissions_error(cluster: NatsCluster) -> None:
    with nats.connect(cluster.url, user="app", password="app") as app:
        client = SystemClient(app, timeout=5.0)
        with pytest.raises(SystemAccountRequiredError) as info:
            client.varz()
        assert isinstance(info.value, PermissionsError) and "system account" in str(info.value)
        with pytest.raises(SystemAccountRequiredError):
            client.statsz(server="NSOMESERVER")


def test_a_bad_option_is_the_servers_error(cluster: NatsCluster, sys_nc: nats.Client) -> None:
    with pytest.raises(MonitorError) as info:
        SystemClient(sys_nc, timeout=20.0).request("CONNZ", {"sort": 7}, expected=3)
    assert info.value.code == 400 and info.value.server in names(cluster)


def test_a_killed_node_is_missing_from_the_ping_answers() -> None:
    with NatsCluster(3, name="gone", config=ACCOUNTS) as cluster:
        with nats.connect(cluster.nodes[0].url, user="sys", password="sys") as nc:
            client = SystemClient(nc, timeout=20.0)
            assert {r.server.name for r in client.ping(expected=3)} == names(cluster)
            cluster.kill_node(2)
            # Asking for three answers waits the whole timeout for the one that never comes.
            answered = client.ping(expected=3, timeout=3.0)
            assert {r.server.name for r in answered} == names(cluster) - {"gone-n3"}
            # Without ``expected`` the answers end once no other comes within the stall (5 s
            # here, for a loaded machine; 0.5 s by default).
            patient = SystemClient(nc, timeout=20.0, stall=5.0)
            assert {r.server.name for r in patient.varz()} == names(cluster) - {"gone-n3"}


def test_a_system_user_denied_the_requests_gets_a_permissions_error_at_once() -> None:
    config = {
        "accounts": {"SYS": {"users": [{"user": "ro", "password": "ro",
                                        "permissions": {"publish": {"deny": ["$SYS.REQ.SERVER.>"]}}}]}},
        "system_account": "SYS",
    }
    with NatsServer(jetstream=False, config=config) as server, \
            nats.connect(server.url, user="ro", password="ro", error_cb=lambda e: None) as nc:
        client = SystemClient(nc, timeout=30.0)
        started = time.monotonic()
        with pytest.raises(PermissionsError) as info:
            client.varz()
        # Without the check, the request waits its whole 30 s for answers that never come.
        assert time.monotonic() - started < 10.0
        assert "$SYS.REQ.SERVER.PING.VARZ" in str(info.value)
        assert not isinstance(info.value, SystemAccountRequiredError)


def test_the_docs_pages_examples_run(cluster: NatsCluster, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.rst").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"^\.\. code-block:: py\n\n((?:(?:    .*)?\n)+)", page, re.M)]
    assert len(blocks) == 2
    node = cluster.nodes[0]
    monkeypatch.setenv("NATS_SYSTEM_URL", f"nats://sys:sys@127.0.0.1:{node.port}")
    monkeypatch.setenv("NATS_URL", f"nats://app:app@127.0.0.1:{node.port}")
    for i, code in enumerate(blocks):
        namespace: dict[str, Any] = {"__name__": f"docs_monitoring_{i}"}
        exec(compile(code, f"docs/monitoring.rst block {i}", "exec"), namespace)
    # The page's thresholds are a production's; on a loaded test machine only the shape is certain.
    assert isinstance(namespace["healthy"], bool) and namespace["js_result"].status == Status.OK
    out = capsys.readouterr().out
    assert "mon-n" in out and re.match(r"(OK|WARNING|CRITICAL) Connection .*connected to nats://", out.splitlines()[-1])


def test_server_times_are_cut_to_microseconds_not_rounded() -> None:
    # The server writes nanoseconds; rounding 59.9999996 s would move the time to the
    # next second (here the next year). Monitoring documents decode as JetStream's do.
    late = "2024-12-31T23:59:59.9999996Z"
    expected = datetime.datetime(2024, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)
    varz = decode_as({"server_id": "N1", "start": late}, Varz)
    assert varz.start == expected
    connz = decode_as({"connections": [{"cid": 7, "start": late, "last_activity": late}]}, KINDS["CONNZ"])
    assert connz.connections[0].start == expected and connz.connections[0].last_activity == expected


def test_stream_replicas_and_meta_peers_are_judged_by_the_same_rules() -> None:
    # No server: a Raft group's followers as a stream's info lists them. The meta check
    # reads its peers into the same shape and hands them to the same rules.
    from natsjs_sync.jetstream.stream_config import ClusterInfo, PeerInfo
    from natsjs_sync.monitor.check import CheckResult, _check_group, _check_peers

    peers = [PeerInfo(name="n2", current=False, offline=True), PeerInfo(name="n3", current=True, lag=50, active=9.0)]
    stream = CheckResult("stream", "S")
    _check_group(stream, "stream", ClusterInfo(leader="n1", replicas=peers), 10, 5.0)
    assert stream.status is Status.CRITICAL
    assert [t for _, t in stream.messages] == [
        "stream replica n2 is offline", "stream replica n3 is 50 operations behind",
        "stream replica n3 last seen 9.0 s ago"]
    meta = CheckResult("meta")
    _check_peers(meta, "the meta group", "peer", [peers[0], PeerInfo(name="n3", offline=True)], 3, None, None)
    assert [t for _, t in meta.messages] == [
        "the meta group has lost its quorum (1 of 3 peers current)", "peer n2 is offline", "peer n3 is offline"]
    leaderless = CheckResult("stream", "S")
    _check_group(leaderless, "stream", ClusterInfo(leader=None, replicas=peers), None, None)
    assert [t for _, t in leaderless.messages] == ["stream has no leader"]
