"""What operators see of a group's members, from the API and ``natsjs-sync group``; a dead member's removal."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.cli import main
from natsjs_sync.jetstream import ConsumerConfig, JetStream

from ..conftest import wait_until
from ._kit import Records, check_delivery, key_partitions, members

pytestmark = pytest.mark.server("2.11")

KEYS = [f"k{i}" for i in range(16)]


def _cli(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main(["group", *argv, "--server", url])
    out, err = capsys.readouterr()
    return code, out, err


def _state(js: JetStream, stream: str, group: str, member: str) -> pcgroups.MemberState:
    return next(s for s in pcgroups.list_elastic_members(js, stream, group) if s.member == member)


def test_group_commands_list_groups_and_show_each_members_partitions_and_life(
        capsys: pytest.CaptureFixture[str], js: JetStream, pstream: str, shared_server: Any) -> None:
    url = shared_server.url
    pcgroups.create_static(js, pstream, "billing", 4, members=["a", "b"])
    pcgroups.create_elastic(js, pstream, "audit", 4)
    ctx = pcgroups.static_consume(js, pstream, "billing", "a", lambda m: m.ack(), ConsumerConfig(ack_wait=2.0))
    try:
        assert _cli(capsys, url, "ls", pstream)[1].split("\n") == ["static   billing", "elastic  audit", ""]
        assert wait_until(lambda: [s.active for s in pcgroups.list_static_members(js, pstream, "billing")]
                          == [True, False], 10)
        states = pcgroups.list_static_members(js, pstream, "billing")
        assert [(s.member, s.partitions, s.consumer, s.consumer_exists) for s in states] == [
            ("a", (0, 1), "billing-a", True), ("b", (2, 3), "billing-b", False)]
        assert states[0].num_waiting > 0
        code, out, err = _cli(capsys, url, "info", pstream, "billing")
        assert code == 0 and "static group billing" in out and "4 partitions" in out
        rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[2:]}
        assert rows == {"a": ["0,1", "yes"], "b": ["2,3", "NO"]}
        assert "member b has no instance consuming" in err and "drop" not in err  # a static member: start it
    finally:
        ctx.stop()
    try:
        assert _cli(capsys, url, "add", pstream, "audit", "x", "y")[1] == "members of audit: x, y\n"
        code, out, err = _cli(capsys, url, "info", pstream, "audit")
        assert code == 0 and "elastic group audit" in out
        assert f"natsjs-sync group drop {pstream} audit x" in err
        assert _cli(capsys, url, "drop", pstream, "audit", "x")[1] == "members of audit: y\n"
        assert pcgroups.elastic_is_in_membership_and_active(js, pstream, "audit", "y") == (True, False)
        code, _, err = _cli(capsys, url, "info", pstream, "nosuch")
        assert code == 1 and "no static or elastic consumer group 'nosuch'" in err
    finally:
        pcgroups.delete_elastic(js, pstream, "audit")


@pytest.mark.parametrize(("argv", "says"), [
    (["ls", "{missing}"], "stream '{missing}' not found"),
    (["info", "{missing}", "g"], "stream '{missing}' not found"),
    (["add", "{missing}", "g", "m"], "stream '{missing}' not found"),
    (["ls", "bad.stream"], "stream name 'bad.stream' may not contain"),
    (["info", "{stream}", "nosuch"], "no static or elastic consumer group 'nosuch'"),
    (["info", "{stream}", "bad.group"], "invalid consumer group name 'bad.group'"),
    (["add", "{stream}", "nosuch", "m"], "no elastic consumer group 'nosuch'"),
    (["add", "{stream}", "audit", "ok", "bad.name"], "invalid member name 'bad.name'"),
    (["add", "{stream}", "audit", ""], "invalid member name ''"),
    (["add", "{stream}", "audit", "a b"], "invalid member name 'a b'"),
])
def test_group_commands_given_bad_input_say_what_in_one_line_and_fail(
        capsys: pytest.CaptureFixture[str], js: JetStream, estream: str, shared_server: Any,
        argv: list[str], says: str) -> None:
    pcgroups.create_elastic(js, estream, "audit", 2, [pcgroups.PartitioningFilter(filter=f"{estream}.*",
                                                                              partitioning_wildcards=(1,))])
    values = {"stream": estream, "missing": estream + "NO"}
    code, out, err = _cli(capsys, shared_server.url, *(a.format(**values) for a in argv))
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and says.format(**values) in err, err
    assert pcgroups.get_elastic_config(js, estream, "audit").members == ()


def test_a_killed_member_keeps_its_partitions_until_dropped_then_another_takes_them(
        capsys: pytest.CaptureFixture[str], nc: nats.Client, js: JetStream, estream: str, shared_server: Any,
        tmp_path: Path) -> None:
    url = shared_server.url
    pcgroups.create_elastic(js, estream, "g", 4, [pcgroups.PartitioningFilter(filter=f"{estream}.*",
                                                                              partitioning_wildcards=(1,))])
    pcgroups.add_members(js, estream, "g", ["m1", "m2"])
    parts = key_partitions(js, KEYS, 4)
    partition = {i: parts[KEYS[i % 16]] for i in range(64)}
    recs = Records(nc, "g")
    with members(url, "elastic", estream, "g", ["m1", "m2"], 2.0, tmp_path) as procs:
        for i in range(32):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        assert recs.wait_for(lambda rs: {r["id"] for r in rs if r["ev"] == "acked"} == set(range(32)), 30)
        assert wait_until(lambda: [s.active for s in pcgroups.list_elastic_members(js, estream, "g")]
                          == [True, True], 20)
        procs[1].send_signal(signal.SIGKILL)  # m2, mid-life, no goodbye
        procs[1].wait(10)
        # Still a member, with its partitions; the server soon shows no instance of it.
        assert wait_until(lambda: not _state(js, estream, "g", "m2").active, 30)
        assert _state(js, estream, "g", "m2").partitions == (2, 3)
        code, out, err = _cli(capsys, url, "info", estream, "g")
        assert code == 0 and {line.split()[0]: line.split()[2] for line in out.splitlines()[2:]} == {
            "m1": "yes", "m2": "NO"}
        assert f"natsjs-sync group drop {estream} g m2" in err
        # Its partitions wait for it: nobody else consumes them.
        for i in range(32, 64):
            js.publish(f"{estream}.{KEYS[i % 16]}", str(i).encode())
        waiting = [i for i in range(32, 64) if partition[i] in (2, 3)]
        assert waiting and recs.wait_for(lambda rs: {r["id"] for r in rs if r["ev"] == "acked"} >= {
            i for i in range(32, 64) if i not in waiting}, 30)
        assert wait_until(lambda: js.stream(f"{estream}-g").cached_info.state.messages == len(waiting), 20)
        assert not {r["id"] for r in recs.snapshot()} & set(waiting)
        # Dropped by the operator: m1 takes its partitions and what waited in them.
        code, out, _ = _cli(capsys, url, "drop", estream, "g", "m2")
        assert code == 0 and out == "members of g: m1\n"
        assert recs.wait_for(lambda rs: {r["id"] for r in rs if r["ev"] == "acked"} == set(range(64)), 45)
        assert wait_until(lambda: js.stream(f"{estream}-g").cached_info.state.messages == 0, 20)
        assert [(s.member, s.partitions, s.active) for s in pcgroups.list_elastic_members(js, estream, "g")] == [
            ("m1", (0, 1, 2, 3), True)]
    assert {r["member"] for r in recs.snapshot() if r["id"] in waiting} == {"m1"}
    check_delivery(recs.snapshot(), partition, key="id")
