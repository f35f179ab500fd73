"""natsjs_sync.testing: the servers and fixtures our users test with."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import (
    NatsCluster,
    NatsServer,
    docker_available,
    find_nats_server,
    free_port,
    render_config,
)
from natsjs_sync.testing.server import _ephemeral_range


def js_request(nc: nats.Client, api: str, body: dict[str, object] | None = None) -> dict[str, object]:
    reply = nc.request(f"$JS.API.{api}", json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)  # type: ignore[no-any-return]


def test_fixtures_from_the_plugin(nats_server: NatsServer, nats_url: str) -> None:
    assert nats_url == nats_server.url and nats_url.startswith("nats://127.0.0.1:")
    with nats.connect(nats_url) as nc:
        assert js_request(nc, "INFO")["type"] == "io.nats.jetstream.api.v1.account_info_response"


def test_find_nats_server_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    real = find_nats_server()
    monkeypatch.setenv("NATS_SERVER_BIN", real)
    assert find_nats_server() == real
    monkeypatch.setenv("NATS_SERVER_BIN", "/nonexistent/nats-server")
    with pytest.raises(FileNotFoundError):
        find_nats_server()


def test_restart_keeps_port_and_jetstream_store() -> None:
    with NatsServer() as server:
        port = server.port
        with nats.connect(server.url) as nc:
            created = js_request(nc, "STREAM.CREATE.KEEP", {"name": "KEEP", "subjects": ["keep.>"], "storage": "file"})
            assert "error" not in created, created
            nc.request("keep.one", b"persisted", timeout=5)
        server.restart(kill=True)
        assert server.port == port
        with nats.connect(server.url) as nc:
            info = js_request(nc, "STREAM.INFO.KEEP")
            assert info["state"]["messages"] == 1  # type: ignore[index]


def test_stop_and_kill() -> None:
    server = NatsServer(jetstream=False).start()
    try:
        server.stop()
        assert not server.is_running
        with pytest.raises(nats.NoServersError):
            nats.connect(server.url, connect_timeout=0.5)
        server.start()
        pid = server.pid
        server.kill()
        assert not server.is_running and pid is not None
    finally:
        server.close()


def test_lame_duck_mode_is_announced_to_clients() -> None:
    with NatsServer(jetstream=False, lame_duck_duration="30s", lame_duck_grace_period="1s") as server:
        announced = threading.Event()
        with nats.connect(server.url, lame_duck_mode_cb=announced.set) as nc:
            server.lame_duck()
            assert announced.wait(10)
            assert nc.server_info.get("ldm") is True


def test_config_file_and_extra_config(tmp_path: os.PathLike[str]) -> None:
    conf = os.path.join(tmp_path, "custom.conf")
    with open(conf, "w") as f:
        f.write(render_config({"max_payload": 2048, "server_name": "from-file"}))
    with NatsServer(config_file=conf, jetstream=False) as server, nats.connect(server.url) as nc:
        assert nc.max_payload == 2048
        assert nc.server_info["server_name"] == "from-file"
    with NatsServer(config={"max_connections": 5}, jetstream=False) as server:
        assert "max_connections: 5" in server.config_path.read_text()


def test_render_config() -> None:
    text = render_config({"a": 1, "b": "x", "c": True, "d": ["p", "q"], "e": {"f": 2}})
    assert text == 'a: 1\nb: "x"\nc: true\nd: ["p", "q"]\ne: {\n  f: 2\n}\n'


@pytest.mark.cluster
def test_cluster_routes_messages_and_survives_a_node_restart(nats_cluster: NatsCluster) -> None:
    a, b, c = nats_cluster.urls
    with nats.connect(a) as pub, nats.connect(c) as sub_nc:
        sub = sub_nc.subscribe("across.nodes")
        sub_nc.flush()
        # Interest travels over the routes: probe from node a until a probe
        # reaches the subscriber on node c (bounded in tries and time).
        reached = False
        for _ in range(120):
            pub.publish("across.nodes", b"probe")
            try:
                reached = sub.next_msg(timeout=0.25).data == b"probe"
            except nats.TimeoutError:
                continue
            break
        assert reached, "interest did not reach node a over the routes in 30 s"
        pub.publish("across.nodes", b"hello")
        pub.flush()
        data = b"probe"
        for _ in range(200):  # probes still on their way come first
            data = sub.next_msg(timeout=10).data
            if data != b"probe":
                break
        assert data == b"hello"
    nats_cluster.restart_node(1)
    with nats.connect(b) as nc:
        info = js_request(nc, "INFO")
        assert "error" not in info, info


def test_free_ports_are_distinct_and_outside_the_ephemeral_range() -> None:
    # An ephemeral port can become the local port of any outgoing connection
    # before the server binds it; CI once lost a cluster start that way.
    low, _ = _ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    if low > 11000:
        assert all(p < low for p in ports)


def _hold_port(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_server_start_moves_off_a_port_taken_after_the_probe() -> None:
    server = NatsServer()
    taken = server.port
    holder = _hold_port(taken)
    try:
        with server, nats.connect(server.url) as nc:
            assert server.port != taken
            nc.flush(timeout=5)
    finally:
        holder.close()


@pytest.mark.cluster
def test_cluster_start_moves_off_a_port_taken_after_the_probe() -> None:
    cluster = NatsCluster(size=3)
    taken = cluster.nodes[0].port
    holder = _hold_port(taken)
    try:
        with cluster, nats.connect(cluster.url) as nc:
            assert taken not in [n.port for n in cluster.nodes]
            info = js_request(nc, "INFO")
            assert "error" not in info, info
    finally:
        holder.close()


@pytest.mark.skipif(not docker_available(), reason="needs testcontainers and a running Docker engine")
def test_docker_backend() -> None:  # pragma: no cover - no Docker engine on our CI machines
    with NatsServer(backend="docker") as server, nats.connect(server.url) as nc:
        nc.flush()
