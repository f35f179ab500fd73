"""Every example in examples/ runs against a real server and does what it says.

The examples are translations of the documents users start from (the nats-py
workshop slides, the Go and JavaScript JetStream READMEs, a JetStream skill
note, a Propan page); these tests hold them to their stated outcomes.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_order_processing(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("order_processing", monkeypatch).main(nats_url, n_orders=200)
    assert r["stored"] == 200 and r["duplicate_detected"] is True
    assert r["fulfilled"] == 200 and sum(r["fulfilled_per_worker"].values()) == 200
    assert r["analytics_orders"] == 200
    assert r["analytics_revenue"] == sum(10 + i % 5 for i in range(200))
    assert r["notified"] == 100  # only the orders placed after it started


def test_ack_nak_term_in_progress(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The slow orders call in_progress every ack_wait / 2: at 0.5 s a 0.25 s
    # stall of the loaded machine let the deadline pass and the server
    # redeliver; 2 s leaves a second of slack and still takes 1.5 x ack_wait.
    r = _load("ack_handling", monkeypatch).main(nats_url, n_orders=21, ack_wait=2.0)
    # Orders 0, 5, 10, 15, 20 fail once and are redelivered after the nak; the
    # poison message is terminated; slow orders (0, 7, 14) take longer than
    # ack_wait but in_progress keeps them from being redelivered.
    assert r["ack"] == 21 and r["nak"] == 5 and r["term"] == 1
    assert r["deliveries"] == 21 + 5 + 1


def test_dedup_publish(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("dedup_publish", monkeypatch).main(nats_url, n_orders=50)
    assert r == {"stored": 50, "duplicates_detected": 100, "processed": 50, "distinct_processed": 50}


def test_replay_by_sequence_and_time(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("replay", monkeypatch).main(nats_url)
    assert r["all"] == list(range(1, 21))
    assert r["last"] == [20]
    assert r["from_seq_15"] == list(range(15, 21))
    assert r["from_time"] == list(range(11, 21))
    assert r["last_hour"] == list(range(1, 21))
    assert r["ordered_from_time"] == list(range(11, 21))
    assert r["new"] == [21]


def test_work_queue(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("work_queue", monkeypatch).main(nats_url, n_tasks=300, n_workers=3)
    assert (r["queued"], r["processed"], r["distinct"], r["left_in_stream"]) == (300, 300, 300, 0)
    assert sum(r["per_worker"].values()) == 300
    assert "non-filtered consumers not allowed" in r["second_consumer_refused"]


def test_kv_and_objects(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("kv_and_objects", monkeypatch).main(nats_url, file_size=3 * 1024 * 1024 + 17)
    assert r["kv_value"] == b"propan!"
    assert r["object_size"] == 3 * 1024 * 1024 + 17 and r["chunks"] == 25
    assert r["digest"].startswith("SHA-256=") and r["copy_identical"] is True


def test_go_jetstream_readme(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r: dict[str, Any] = _load("go_jetstream_readme", monkeypatch).main(nats_url)
    assert r["basic_usage"] == 100
    s = r["streams"]
    assert sorted(s["names"]) == sorted(s["configs"]) == ["ORDERS", "ORDERS2"]
    assert s["msg_100"] == b"99" and s["last_new"] == 200 and s["kept"] == 10
    assert s["description"] == "updated stream" and s["after_purge"] == 0
    c = r["consumers"]
    assert set(c["names"]) == {"CONS", "bar", "foo", c["ephemeral_name"]} and c["listed"] == c["names"]
    assert c["description"] == "updated consumer" and c["durable"] == "foo"
    assert c["ordered_first"] == b"hello message 0"
    # consume() keeps pulling until stop(): the handler saw at least the 5 it waited for.
    assert r["receiving"]["fetch"] == 10 and r["receiving"]["consume"] >= 5
    assert r["receiving"]["fetch_bytes"] >= 1 and r["receiving"]["messages_one_by_one"].startswith(b"hello")
    p = r["publishing"]
    assert (p["first_dup"], p["second_dup"], p["same_seq"]) == (False, True, True)
    kv = r["key_value"]
    assert kv["create_error"] == "KeyExistsError" and kv["get_error"] in ("KeyNotFoundError", "KeyDeletedError")
    assert kv["watched"] == [("sue.color", 4, b"blue"), None, ("sue.age", 5, b"43"), ("sue.color", 6, b"red")]
    assert kv["keys"] == ["bucket", "sue.age", "sue.color"] and kv["bucket"] == "profiles"
    o = r["object_store"]
    assert o["data"] == b"first config" and o["get_error"] in ("ObjectNotFoundError", "ObjectDeletedError")
    assert o["updates"][4] is None and o["updates"][5:] == [("config-5", None), ("config-1", "updated config")]
    assert sorted(u[0] for u in o["updates"][:4]) == ["config-1", "config-2", "config-3", "config-4.txt"]
    assert o["names"] == ["config-1", "config-2-renamed", "config-3", "config-4.txt", "config-5"]


def test_js_jetstream_readme(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _load("js_jetstream_readme", monkeypatch).main(nats_url)
    m = r["manager"]
    assert m["found"] == "mystream" and m["first_seq"] == 1 and m["added"] == "me"
    assert m["counts"] == [99, 40, 15]
    c = r["client"]
    assert c["first"] == ("a", 1, False) and c["async_ok"] == 100 and c["wrong_last_seq_refused"]
    p = r["processing"]
    assert p["next"] == "work.red" and p["fetch"] == [4, 4, 4] and len(p["consume_seqs"]) == 5
    assert p["callback_reached_5"] is True
    assert p["frequency"] == {"blue": 20, "green": 20, "red": 20}
    assert p["ordered_all"] == 60 and p["ordered_red"] == ["work.red"] * 20


@pytest.mark.parametrize("name", ["order_processing", "dedup_publish"])
def test_examples_run_as_scripts(name: str, nats_url: str) -> None:
    """What a newcomer types: ``python examples/<name>.py`` (here with a URL)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES.parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), nats_url], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "stored" in done.stdout


def _pool(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """examples/pcgroups_pool.py in a session of its own, as a shell runs it in the foreground: a
    signal to its process group is what Ctrl-C in a terminal sends."""
    return subprocess.Popen([sys.executable, str(EXAMPLES / "pcgroups_pool.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _joined(proc: subprocess.Popen[str], workers: int) -> list[str]:
    """The pool's first lines, up to the last member's JOINED (bounded: the pool prints nothing else first)."""
    assert proc.stdout is not None
    lines: list[str] = []
    for _ in range(workers + 2):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if sum(ln.startswith("JOINED ") for ln in lines) == workers:
            return lines
    raise AssertionError(f"the pool did not start: {lines} {proc.stderr.read() if proc.stderr else ''}")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))
    return {**env, **extra}


@pytest.mark.server("2.11")
def test_pcgroups_pool_leaves_the_group_quietly_on_ctrl_c(nats_server: Any) -> None:
    import natsjs_sync as nats
    from natsjs_sync import pcgroups

    proc = _pool([nats_server.url, "2"], _env())
    try:
        joined = [ln.split()[1] for ln in _joined(proc, 2) if ln.startswith("JOINED ")]
        with nats.connect(nats_server.url) as nc:
            js = nc.jetstream()
            assert sorted(pcgroups.get_elastic_config(js, "ORDERS", "billing").members) == sorted(joined)
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(60) == 130
            assert pcgroups.get_elastic_config(js, "ORDERS", "billing").members == ()
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert "Traceback" not in err and "Error" not in err, err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.communicate()


@pytest.mark.server("2.11")
def test_pcgroups_pool_starts_a_server_when_given_none() -> None:
    proc = _pool([], _env())
    try:
        lines = _joined(proc, 3)
        assert lines[0].startswith("(embedded nats-server at nats://127.0.0.1:"), lines
        # Ctrl-C does not reach the embedded server (a session of its own): the members leave the
        # group, then the pool stops it; nothing on stderr.
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130
        assert proc.stderr is not None
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.communicate()


@pytest.mark.server("2.11")
@pytest.mark.parametrize("after", [1, 2])
def test_pcgroups_pool_stops_quietly_on_ctrl_c_during_its_start(after: int) -> None:
    # Ctrl-C once the embedded server runs (the parent setting up the group, or forking), and once
    # the first member joined (the others still connecting): exit code 130, no traceback, no member
    # stopped without leaving (the server is there until they left).
    proc = _pool([], _env())
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = [proc.stdout.readline() for _ in range(after)]
        assert lines[0].startswith("(embedded nats-server at "), (lines, proc.stderr.read())
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.communicate()


@pytest.mark.parametrize("workers", ["0", "-2", "many"])
def test_pcgroups_pool_refuses_a_bad_number_of_workers(workers: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "pcgroups_pool.py"), "nats://127.0.0.1:1", workers],
                          capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: the number of workers must be a positive whole number, not {workers!r}"], done.stderr


def test_every_example_is_on_the_examples_page() -> None:
    page = (EXAMPLES.parent / "docs" / "examples.rst").read_text()
    missing = [p.name for p in sorted(EXAMPLES.glob("*.py"))
               if not p.name.startswith("_") and f"``{p.name}``" not in page]
    assert not missing, f"examples missing from docs/examples.rst: {missing}"
