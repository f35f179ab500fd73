"""``natsjs-sync server ls|info|check`` on a 3-node cluster with a system account, run as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync.cli import main
from natsjs_sync.testing import NatsCluster, free_port

from ._kit import ACCOUNTS, eventually, replicated_stream, system_cluster

REPO = Path(__file__).resolve().parents[2]

#: Connection-check thresholds a loaded machine stays far below.
GENEROUS = ("--connect-warn", "10s", "--connect-critical", "20s", "--rtt-warn", "10s", "--rtt-critical", "20s",
            "--req-warn", "10s", "--req-critical", "20s")
SYS = ("--user", "sys", "--password", "sys")
APP = ("--user", "app", "--password", "app")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err




@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with system_cluster("chk") as c:
        yield c


def test_ls_lists_every_server(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    code, out, err = run(capsys, "server", "ls", "--server", cluster.url, *SYS, "--expect", "3", "--timeout", "20")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "CLUSTER", "VERSION"]
    assert sorted(line.split()[0] for line in lines[1:4]) == ["chk-n1", "chk-n2", "chk-n3"]
    assert all(line.split()[1] == "chk" for line in lines[1:4])
    assert lines[4].startswith("3 server(s) in 1 cluster(s): chk")


def test_info_shows_one_server_by_name(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    code, out, err = run(capsys, "server", "info", "chk-n2", "--server", cluster.nodes[0].url, *SYS)
    assert code == 0, err
    fields = dict(line.strip().split(": ", 1) for line in out.splitlines())
    assert fields["Name"] == "chk-n2" and fields["Cluster"] == "chk"
    assert fields["Listening"] == f"127.0.0.1:{cluster.nodes[1].port}"
    assert fields["ID"].startswith("N") and fields["JetStream"].startswith("on, meta leader chk-n")
    # Without a name: the server this connection landed on.
    code, out, err = run(capsys, "server", "info", "--server", cluster.nodes[2].url, *SYS)
    assert code == 0 and "Name: chk-n3" in out, err


def test_ls_outside_the_system_account_is_a_one_line_error(capsys: pytest.CaptureFixture[str],
                                                            cluster: NatsCluster) -> None:
    code, out, err = run(capsys, "server", "ls", "--server", cluster.url, *APP)
    assert code == 1 and out == "" and "system account" in err and "Traceback" not in err


def test_check_connection_ok_warning_critical(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    s = ("--server", cluster.nodes[0].url, *APP)
    generous = GENEROUS
    code, out, _ = run(capsys, "server", "check", "connection", *s, *generous)
    assert code == 0 and out.startswith("OK Connection ") and out.count("\n") == 1
    assert "| connect_time=" in out and " rtt=" in out and " request_time=" in out
    # A round trip always takes at least 0 s: the thresholds decide the level.
    code, out, _ = run(capsys, "server", "check", "connection", *s, *generous, "--rtt-warn", "0")
    assert code == 1 and out.startswith("WARNING Connection ")
    code, out, _ = run(capsys, "server", "check", "connection", *s, "--req-critical", "0s")
    assert code == 2 and out.startswith("CRITICAL Connection ")


def test_check_on_a_server_that_does_not_answer_is_critical() -> None:
    # Nothing listens on this port: the probe says CRITICAL, in a line, with exit code 2.
    url = f"nats://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NATS_URL", None)
    for argv in (["connection"], ["jetstream"], ["stream", "--stream", "ORDERS"],
                 ["consumer", "--stream", "ORDERS", "--consumer", "c"]):
        proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "server", "check", *argv, "--server", url,
                               "--timeout", "2"], capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        name = {"connection": "Connection", "jetstream": "JetStream", "stream": "ORDERS", "consumer": "ORDERS_c"}
        assert proc.stdout.startswith(f"CRITICAL {name[argv[0]]} Crit:"), proc.stdout
        assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr


def test_check_lines_do_not_show_passwords(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    node = cluster.nodes[0]
    code, out, _ = run(capsys, "server", "check", "connection", "--server", f"nats://app:app@127.0.0.1:{node.port}",
                       *GENEROUS)
    assert code == 0 and "app@" not in out and f"nats://127.0.0.1:{node.port}" in out, out
    refused = f"nats://app:hunter2@127.0.0.1:{node.port}"
    dead = f"nats://app:hunter2@127.0.0.1:{free_port()}"
    for url in (refused, dead):
        for argv in (["connection"], ["stream", "--stream", "S"]):
            code, out, _ = run(capsys, "server", "check", *argv, "--server", url, "--timeout", "2")
            assert code == 2 and out.startswith("CRITICAL ") and "hunter2" not in out, out


def test_check_arguments_it_cannot_use_are_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["server", "check", "consumer", "--stream", "S"])  # no --consumer
    out, _ = capsys.readouterr()
    assert info.value.code == 3 and out.startswith("UNKNOWN ")
    # No server named anywhere (no --server, $NATS_URL or NATS context).
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "NATS_CONTEXT")}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    proc = subprocess.run([sys.executable, "-m", "natsjs_sync", "server", "check", "jetstream"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert proc.returncode == 3 and proc.stdout.startswith("UNKNOWN JetStream Unknown:no server given"), proc.stdout
    code, out, _ = run(capsys, "--context", "nosuchcontext", "server", "check", "jetstream")
    assert code == 3 and out.startswith("UNKNOWN JetStream Unknown:") and "nosuchcontext" in out


@pytest.mark.parametrize(("kind", "needed"), [
    ("connection", ()), ("jetstream", ()), ("server", ("--name", "n")), ("meta", ()),
    ("stream", ("--stream", "S")), ("consumer", ("--stream", "S", "--consumer", "C")),
    ("message", ("--stream", "S")), ("kv", ("--bucket", "B")), ("credential", ("--credential", "f.creds")),
    ("request", ("--subject", "svc.ping")),
])
def test_every_check_parameter_has_an_option(kind: str, needed: tuple[str, ...]) -> None:
    # The dispatch hands each check its keyword-only parameters by name from the parsed
    # arguments: an option missing (or named otherwise) would make the check UNKNOWN.
    import inspect

    from natsjs_sync.cli import build_parser
    from natsjs_sync.cli.server import _thresholds
    from natsjs_sync.monitor import check as checks

    args = build_parser().parse_args(["server", "check", kind, *needed, "--conn-warn", "7"]
                                     if kind == "server" else ["server", "check", kind, *needed])
    check = getattr(checks, f"check_{kind}")
    given = _thresholds(check, args)
    wanted = [p.name for p in inspect.signature(check).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert sorted(given) == sorted(wanted) and ("timeout" in given or kind == "credential")  # offline
    if kind == "server":
        assert given["connections_warn"] == 7


def test_ls_and_check_use_the_nats_context(capsys: pytest.CaptureFixture[str], cluster: NatsCluster,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from natsjs_sync import natscontext

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.delenv("NATS_CONTEXT", raising=False)
    natscontext.save("system", url=cluster.url, user="sys", password="sys")
    code, out, err = run(capsys, "--context", "system", "server", "ls", "--expect", "3", "--timeout", "20")
    assert code == 0 and out.splitlines()[-1].startswith("3 server(s)"), err
    code, out, _ = run(capsys, "--context", "system", "server", "check", "server", "--name", "chk-n1",
                       "--timeout", "20")
    assert code == 0 and out.startswith("OK chk-n1 OK:"), out
    # The selected context is used when nothing else names a server, as by the nats CLI.
    natscontext.select("system")
    code, out, _ = run(capsys, "server", "check", "meta", "--timeout", "20")
    assert out.startswith(("OK JetStream Meta Cluster ", "WARNING JetStream Meta Cluster ")) and code in (0, 1), out


def test_check_stream_and_consumer_thresholds(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    s = ("--server", cluster.url, *APP, "--timeout", "20")
    with nats.connect(cluster.url, user="app", password="app") as nc:
        js = nc.jetstream(timeout=20.0)
        js.create_stream(name="THRESH", subjects=["thresh.>"], num_replicas=3, storage="memory")
        for i in range(3):
            js.publish(f"thresh.{i}", b"x")
        js.create_consumer("THRESH", durable_name="slow", num_replicas=3)
        try:
            # Replicas of a group just made may take a moment to be current.
            assert eventually(lambda: run(capsys, "server", "check", "stream", "--stream", "THRESH", *s)[0] == 0, 30)
            assert eventually(lambda: run(capsys, "server", "check", "consumer", "--stream", "THRESH",
                                          "--consumer", "slow", *s)[0] == 0, 30)
            code, out, _ = run(capsys, "server", "check", "stream", "--stream", "THRESH", "--peer-expect", "3", *s)
            assert code == 0 and out.startswith("OK THRESH OK:3 messages"), out
            assert " messages=3 " in out  # no thresholds: none written, as by the nats CLI
            code, out, _ = run(capsys, "server", "check", "stream", "--stream", "THRESH", "--msgs-warn", "5", *s)
            assert code == 1 and out.startswith("WARNING THRESH Warn:messages 3 <= 5"), out
            code, out, _ = run(capsys, "server", "check", "stream", "--stream", "THRESH", "--peer-expect", "5", *s)
            assert code == 2 and "3 replicas, 5 expected" in out
            code, out, _ = run(capsys, "server", "check", "stream", "--stream", "MISSING", *s)
            assert code == 2 and out.startswith("CRITICAL MISSING Crit:stream not found")
            code, out, _ = run(capsys, "server", "check", "consumer", "--stream", "THRESH", "--consumer", "slow", *s)
            # No thresholds, no findings: the nats CLI's line is the name and the perfdata.
            assert code == 0 and out.startswith("OK THRESH_slow | ") and " pending=3 " in out, out
            code, out, _ = run(capsys, "server", "check", "consumer", "--stream", "THRESH", "--consumer", "slow",
                               "--unprocessed-critical", "2", "--last-delivery-critical", "1h", *s)
            assert code == 2 and "Crit:Unprocessed Messages: 3" in out and "Crit:No deliveries" in out, out
            code, out, _ = run(capsys, "server", "check", "consumer", "--stream", "THRESH", "--consumer", "gone", *s)
            assert code == 2 and out.startswith("CRITICAL THRESH_gone Crit:could not load info: "), out
            assert "not found" in out
            code, out, _ = run(capsys, "server", "check", "jetstream", *s)
            assert code == 0 and out.startswith("OK JetStream ")
        finally:
            js.delete_stream("THRESH")


def test_check_server_and_meta(capsys: pytest.CaptureFixture[str], cluster: NatsCluster) -> None:
    s = ("--server", cluster.url, *SYS, "--timeout", "20")
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--js-required", "--auth-required", *s)
    assert code == 0 and out.startswith("OK chk-n2 OK:healthy, version "), out
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--tls-required",
                       "--uptime-warn", "1h", *s)
    assert code == 2 and "TLS is not required" in out and "uptime " in out, out
    # As the nats CLI's: critical below warning turns connections and subscriptions around (too
    # few), and is a mistake for CPU and memory.
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--conn-warn", "1000000",
                       "--conn-critical", "999999", *s)
    assert code == 2 and "Crit:connections " in out and " <= 999999" in out, out
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--subs-warn", "1000000",
                       "--subs-critical", "0", *s)
    assert code == 1 and "Warn:subscriptions " in out, out
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--cpu-warn", "1000",
                       "--cpu-critical", "999", *s)
    assert code == 2 and "Crit:cpu: invalid thresholds" in out, out
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n9", "--server", cluster.url, *SYS,
                       "--timeout", "2")
    assert code == 2 and out.startswith("CRITICAL chk-n9 Crit:server chk-n9 did not answer"), out
    assert eventually(lambda: run(capsys, "server", "check", "meta", "--expect", "3", *s)[0] == 0, 30.0)
    code, out, _ = run(capsys, "server", "check", "meta", "--expect", "5", *s)
    assert code == 2 and "3 peers, 5 expected" in out
    perf = out.partition(" | ")[2].split()
    assert [p.partition("=")[0] for p in perf] == ["peers", "peers_current", "peer_offline", "peer_not_current",
                                                   "peer_inactive", "peer_lagged"], out
    assert perf[0] == "peers=3;5;5"
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n2", "--mem-critical", "1", *s)
    assert code == 2 and "Crit:memory " in out and " mem=" in out and ";;1 " in out, out
    # Outside the system account these checks cannot run at all: UNKNOWN.
    code, out, _ = run(capsys, "server", "check", "server", "--name", "chk-n1", "--server", cluster.url, *APP)
    assert code == 3 and out.startswith("UNKNOWN chk-n1 Unknown:") and "system account" in out


def test_check_exit_codes_for_healthy_degraded_and_down(capsys: pytest.CaptureFixture[str]) -> None:
    with NatsCluster(3, name="hdd", config=ACCOUNTS) as cluster:
        s = ("--server", cluster.url, *APP, "--timeout", "5")
        victims = replicated_stream(cluster, "HDD")

        def status(*argv: str) -> tuple[int, str]:
            code, out, _ = run(capsys, "server", "check", *argv, *s)
            return code, out

        def system(*argv: str) -> tuple[int, str]:
            code, out, _ = run(capsys, "server", "check", *argv, "--server", cluster.url, *SYS, "--timeout", "5")
            return code, out

        # Healthy (once the new stream's replicas are current).
        assert eventually(lambda: status("stream", "--stream", "HDD")[0] == 0, 30.0)
        assert status("stream", "--stream", "HDD")[1].startswith("OK HDD ")
        assert eventually(lambda: status("jetstream")[0] == 0, 30.0)
        assert eventually(lambda: system("meta", "--expect", "3")[0] == 0, 30.0)
        gone = str(cluster.nodes[victims[0]].server_name)
        assert system("server", "--name", gone)[0] == 0

        # Degraded: one replica down (a crash), the stream still has its leader and a quorum.
        cluster.kill_node(victims[0])
        # The killed server's silence is at once a fact (these wait out their timeouts); its
        # peers call it not current only after nats-server's 10 s without a heartbeat.
        assert system("server", "--name", gone) == (2, f"CRITICAL {gone} Crit:server {gone} did not answer "
                                                       "within 5.0 s\n")
        code, out, err = run(capsys, "server", "ls", "--server", cluster.url, *SYS, "--expect", "3", "--timeout", "3")
        assert code == 1 and "2 of the 3 expected servers answered" in err
        assert sorted(line.split()[0] for line in out.splitlines()[1:3]) == sorted(
            str(n.server_name) for i, n in enumerate(cluster.nodes) if i != victims[0])
        assert eventually(lambda: status("stream", "--stream", "HDD")[0] == 1, 30.0)
        code, out = status("stream", "--stream", "HDD")
        assert out.startswith("WARNING HDD ") and "replica" in out, out
        assert eventually(lambda: status("jetstream")[0] == 1, 30.0)
        assert eventually(lambda: system("meta", "--expect", "3")[0] == 1, 30.0)

        # Down: quorum lost, then no server at all.
        cluster.kill_node(victims[1])
        assert eventually(lambda: status("stream", "--stream", "HDD")[0] == 2, 60.0)
        assert status("stream", "--stream", "HDD")[1].startswith("CRITICAL HDD ")
        assert eventually(lambda: system("meta", "--expect", "3")[0] == 2, 60.0)
        cluster.kill_node(next(i for i in range(3) if i not in victims))
        code, out = status("connection")
        assert code == 2 and out.startswith("CRITICAL Connection ") and "cannot connect" in out
        assert status("stream", "--stream", "HDD")[0] == 2
