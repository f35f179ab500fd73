"""``consumer report``, ``consumer deadletter`` and ``events`` run as an operator runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.cli import main
from natsjs_sync.jetstream import ConsumerConfig, JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--server", url])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def dlq_name(js: JetStream) -> Iterator[str]:
    name = "DLQ" + next_nuid()
    yield name
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass


@pytest.mark.server("2.11")  # partitioned groups (priority groups)
def test_consumer_report_shows_lag_of_consumers_and_group_members(
        capsys: pytest.CaptureFixture[str], shared_server: NatsServer, js: JetStream, stream: Stream) -> None:
    stream.create_consumer(durable_name="fast", ack_policy="explicit")
    slow = stream.create_consumer(durable_name="slow", ack_policy="explicit")
    for i in range(4):
        js.publish(f"{stream.name}.{i}", b"x")
    slow.next(timeout=5.0)  # delivered, not acked
    pcgroups.create_static(js, stream.name, "billing", 2, members=["a", "b"])
    ctx = pcgroups.static_consume(js, stream.name, "billing", "a", lambda m: None, ConsumerConfig(ack_wait=30.0))
    try:
        # Member a's consumer exists (its partition 0's messages) once its instance runs.
        assert wait_until(lambda: [s.consumer_exists for s in
                                   pcgroups.list_static_members(js, stream.name, "billing")] == [True, False], 10)
        code, out, err = run(capsys, shared_server.url, "consumer", "report", stream.name)
    finally:
        ctx.stop()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"consumers of stream {stream.name}: 3"
    rows = {line.split()[0]: line.split()[1:5] for line in lines[2:5]}
    assert rows["fast"] == ["4", "0", "0", "0"]
    assert rows["slow"] == ["3", "1", "0", "0"]
    assert "billing-a" in rows
    group = out[out.index("static group billing"):].splitlines()
    assert group[0] == f"static group billing (consumers on stream {stream.name}): 2 member(s)"
    assert group[2].split()[0] == "a"
    assert group[3].split() == ["b", "-", "-", "-", "-", "no", "consumer"]


def test_consumer_report_of_a_missing_stream_fails_in_one_line(capsys: pytest.CaptureFixture[str],
                                                               shared_server: NatsServer) -> None:
    code, _, err = run(capsys, shared_server.url, "consumer", "report", "NOSUCH" + next_nuid())
    assert code == 1 and err.startswith("error:") and "Traceback" not in err


def test_deadletter_by_sequence_once(capsys: pytest.CaptureFixture[str], shared_server: NatsServer,
                                     js: JetStream, stream: Stream, dlq_name: str) -> None:
    js.publish(f"{stream.name}.a", b"poison")
    argv = ("consumer", "deadletter", stream.name, "--to", dlq_name, "--create", "--seq", "1")
    code, out, err = run(capsys, shared_server.url, *argv)
    assert code == 0, err
    assert out == f"{stream.name} #1: moved {dlq_name} as deadletter.{stream.name}.1 (#1)\n"
    code, out, _ = run(capsys, shared_server.url, *argv)
    assert out == f"{stream.name} #1: already in {dlq_name} as deadletter.{stream.name}.1 (#1)\n"
    copy = js.stream(dlq_name).get_msg(1)
    assert copy.data == b"poison" and copy.header("Dead-Letter-Reason") == "manual"


def test_deadletter_by_sequence_of_a_missing_stream_fails_and_records_nothing(
        capsys: pytest.CaptureFixture[str], shared_server: NatsServer, js: JetStream, dlq_name: str) -> None:
    argv = ("consumer", "deadletter", "NOSUCH" + next_nuid(), "--to", dlq_name, "--create", "--seq", "1")
    code, out, err = run(capsys, shared_server.url, *argv)
    assert code == 1 and err.startswith("error: stream ") and "not found" in err and out == ""
    assert js.stream(dlq_name).info().state.messages == 0


def test_deadletter_from_stored_advisories_resumes(capsys: pytest.CaptureFixture[str], shared_server: NatsServer,
                                                   js: JetStream, stream: Stream, dlq_name: str) -> None:
    adv = js.create_stream(name="ADV" + next_nuid(), storage="memory",
                           subjects=[f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{stream.name}.*"])
    try:
        cons = stream.create_consumer(durable_name="W", ack_policy="explicit")
        for i in range(3):
            js.publish(f"{stream.name}.{i}", b"x")
        for _ in range(3):
            cons.next(timeout=5.0).term()
        assert wait_until(lambda: adv.info().state.messages == 3, 10)
        base = ("consumer", "deadletter", stream.name, "--to", dlq_name, "--create", "--from-stream", adv.name,
                "--durable", "dl")
        code, out, err = run(capsys, shared_server.url, *base, "--count", "2")
        assert code == 0, err
        assert [line.split()[1] for line in out.splitlines()] == ["#1:", "#2:"]
        code, out, err = run(capsys, shared_server.url, *base)  # a later run: the rest only
        assert code == 0 and [line.split()[1] for line in out.splitlines()] == ["#3:"]
        assert "none left" in err
        assert js.stream(dlq_name).info().state.messages == 3
    finally:
        js.delete_stream(adv.name)


def _spawn(*argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NATS_CONTEXT": "", "NATS_URL": ""}
    return subprocess.Popen([sys.executable, "-m", "natsjs_sync", *argv, "--no-context"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def test_deadletter_follows_live_advisories(shared_server: NatsServer, nc: nats.Client, js: JetStream,
                                            stream: Stream, dlq_name: str) -> None:
    cons = stream.create_consumer(durable_name="W", ack_policy="explicit", max_deliver=1)
    js.publish(f"{stream.name}.a", b"1")
    js.publish(f"{stream.name}.b", b"2")
    with _spawn("consumer", "deadletter", stream.name, "W", "--to", dlq_name, "--create", "--count", "2",
                "--server", shared_server.url) as proc:
        assert proc.stderr is not None
        assert "as they arrive" in proc.stderr.readline()  # subscribed
        first = cons.next(timeout=5.0)
        assert first.reply
        nc.request(first.reply, b"-NAK", timeout=5.0)
        cons.next(timeout=5.0).term(reason="bad")  # this pull also finds message 1 over max_deliver
        out, err = proc.communicate(timeout=60.0)
    assert proc.returncode == 0, err
    assert sorted(line.split()[1] for line in out.splitlines()) == ["#1:", "#2:"]
    assert js.stream(dlq_name).info().state.messages == 2


def test_events_prints_advisories(shared_server: NatsServer, js: JetStream) -> None:
    name = "S" + next_nuid()
    with _spawn("events", "--kind", "stream_action", "--kind", "consumer_action", "--stream", name, "--count", "2",
                "--server", shared_server.url) as proc:
        assert proc.stderr is not None
        assert "listening" in proc.stderr.readline()
        st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        st.create_consumer(durable_name="D", ack_policy="explicit")
        out, err = proc.communicate(timeout=60.0)
    js.delete_stream(name)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].endswith(f"stream_action stream={name} action=create")
    assert lines[1].endswith(f"consumer_action stream={name} consumer=D action=create")



def test_events_of_one_stream_without_a_kind(shared_server: NatsServer, js: JetStream) -> None:
    name, other = "S" + next_nuid(), "O" + next_nuid()
    with _spawn("events", "--stream", name, "--count", "1", "--server", shared_server.url) as proc:
        assert proc.stderr is not None
        assert "listening" in proc.stderr.readline()
        js.create_stream(name=other, subjects=[f"{other}.>"], storage="memory")
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        out, err = proc.communicate(timeout=60.0)
    js.delete_stream(name)
    js.delete_stream(other)
    assert proc.returncode == 0, err
    assert out.splitlines()[0].endswith(f"stream_action stream={name} action=create")
