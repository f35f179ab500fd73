"""Celery on JetStream: real ``celery worker`` processes, a real nats-server, natsjs:// broker
and result backend."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("celery")

from celery import Celery, chord

import natsjs_sync
from natsjs_sync.contrib.celery import transport as nt
from natsjs_sync.jetstream.message import MsgMetadata, parse_metadata
from natsjs_sync.testing import NatsServer, nats_server_version

from .celery_app import make_app

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Workers:
    """Starts ``celery worker`` processes and ends them all at the end of the test."""

    def __init__(self, url: str, tmp: Path, visibility: float = 30.0):
        self.url = url
        self.tmp = tmp
        self.visibility = visibility
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A ``celery worker`` named ``name@<host>``, its output in ``<name>.log``."""
        return self.command(name, "worker", "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
                            "--without-heartbeat", "-l", "info", *args, env=env)

    def command(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """``celery -A celery_app <args>`` on the test broker, its output in ``<name>.log``."""
        log = self.tmp / f"{name}.log"
        environ = dict(os.environ, CELERY_TEST_BROKER=self.url, CELERY_TEST_VISIBILITY=str(self.visibility),
                       PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]))
        environ.update(env or {})
        cmd = [sys.executable, "-m", "celery", "-A", "celery_app", *args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=HERE, env=environ, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((proc, log))
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for _p, log in self.procs)

    def close(self) -> None:
        for proc, _log in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _log in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def server() -> Iterator[NatsServer]:
    srv = NatsServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def url(server: NatsServer) -> str:
    return f"natsjs://127.0.0.1:{server.port}"


@pytest.fixture
def workers(url: str, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(url, tmp_path)
    try:
        yield w
    finally:
        w.close()
        print(w.logs())  # shown when the test failed


def close_app(app: Celery) -> None:
    """Close what the test process opened: Celery's ``close()`` only drops its pool."""
    app.pool.force_close_all()
    app.backend.close()
    app.close()


def test_layout_names_match_the_nats_py_transport() -> None:
    # The names kombu's nats-py transport proposal uses for a queue whose name is a valid stream
    # name; other names (which that transport cannot use) get a readable stem and a hash.
    assert nt.stream_name("celery") == "STREAM_celery"
    assert nt.consumer_name("celery") == "CONSUMER_celery"
    assert nt.fanout_subject("celery.pidbox") == "celery.fanout.celery.pidbox"
    odd = nt.stream_name("abc.reply.celery.pidbox")
    assert odd.startswith("STREAM_abc_reply_celery_pidbox__") and len(odd.rsplit("__", 1)[1]) == 12


def test_tasks_run_results_return_and_chords_count(url: str, server: NatsServer, workers: Workers,
                                                   tmp_path: Path) -> None:
    app = make_app(url)
    try:
        workers.start("w1", "--pool=threads", "-c", "4")
        results = [app.send_task("t.add", (i, i)) for i in range(20)]
        assert [r.get(timeout=60) for r in results] == [2 * i for i in range(20)]
        # countdown: the worker holds the message until it is due; retries go the same way.
        assert app.send_task("t.add", (1, 1), countdown=1).get(timeout=60) == 2
        assert app.send_task("t.flaky", (str(tmp_path / "flaky.txt"),)).get(timeout=60) == 3
        sig = chord([app.signature("t.add", (i, 1)) for i in range(5)], app.signature("t.tsum"))
        assert sig.apply_async().get(timeout=60) == sum(i + 1 for i in range(5))
        # The queue is a work-queue stream read by one durable consumer; results are KV keys.
        with natsjs_sync.connect(server.url) as nc:
            js = nc.jetstream()
            info = js.stream("STREAM_celery").info()
            assert info.config.retention == "workqueue"
            assert info.config.subjects[0] == "celery"  # then the schedule subjects, where the server has them
            assert info.state.messages == 0  # every task acknowledged
            assert js.consumer("STREAM_celery", "CONSUMER_celery").info().config.ack_wait == 30.0
            kv = js.key_value("celery-results")
            assert kv.get(f"celery-task-meta-{results[0].id}").value
    finally:
        close_app(app)


def test_routing_to_two_queues_and_inspect_ping_over_fanout(url: str, workers: Workers) -> None:
    app = make_app(url)
    try:
        workers.start("alpha", "--pool=solo", "-Q", "alpha")
        workers.start("beta", "--pool=solo", "-Q", "beta")
        a = [app.send_task("t.where_alpha") for _ in range(3)]
        b = [app.send_task("t.where_beta") for _ in range(3)]
        assert {r.get(timeout=60) for r in a} == {f"alpha@{os.uname().nodename}"}
        assert {r.get(timeout=60) for r in b} == {f"beta@{os.uname().nodename}"}
        names = {f"alpha@{os.uname().nodename}", f"beta@{os.uname().nodename}"}

        def both_answer() -> bool:
            replies = app.control.inspect(timeout=2, limit=len(names)).ping() or {}  # not all 2 s when all answered
            return set(replies) == names and all(v == {"ok": "pong"} for v in replies.values())

        wait_for(both_answer, what="both workers answering celery inspect ping")
    finally:
        close_app(app)


def test_sigkilled_worker_task_runs_again_elsewhere_and_acked_ones_do_not(
        url: str, tmp_path: Path, workers: Workers) -> None:
    workers.visibility = 3.0
    app = make_app(url, visibility_timeout=3.0)
    log = tmp_path / "runs.txt"
    held = tmp_path / "held.txt"
    try:
        first = workers.start("first", "--pool=solo")
        done = [app.send_task("t.record", (str(log), f"quick{i}")) for i in range(5)]
        for r in done:
            r.get(timeout=60)
        task = app.send_task("t.hold", (str(held),))
        wait_for(lambda: held.exists() and "start" in held.read_text(), what="the held task to start")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        Path(str(held) + ".go").touch()
        second = workers.start("second", "--pool=solo")
        assert task.get(timeout=90) == second.pid
        starts = [line for line in held.read_text().splitlines() if line.startswith("start")]
        assert [int(s.split()[1]) for s in starts] == [first.pid, second.pid]
        # Acknowledged tasks are not run again by the second worker.
        lines = log.read_text().splitlines()
        assert sorted(line.split()[0] for line in lines) == sorted(f"quick{i}" for i in range(5))
    finally:
        close_app(app)


def test_pool_child_killed_task_is_rejected_and_runs_again(url: str, tmp_path: Path, workers: Workers) -> None:
    # acks_late + task_reject_on_worker_lost: the pool child dies mid-task, the worker rejects
    # the message with requeue, the nak makes the server hand it out again at once.
    app = make_app(url)
    held = tmp_path / "held.txt"
    try:
        workers.start("w1", "--pool=prefork", "-c", "1")
        task = app.send_task("t.hold", (str(held),))

        def starts() -> list[int]:
            text = held.read_text() if held.exists() else ""
            return [int(line.split()[1]) for line in text.splitlines() if line.startswith("start")]

        child = wait_for(starts, what="the held task to start")[0]
        os.kill(child, signal.SIGKILL)
        again = wait_for(lambda: starts()[1:], what="the task to start again")[0]
        assert again != child
        Path(str(held) + ".go").touch()
        assert task.get(timeout=60) == again
    finally:
        close_app(app)


def test_long_task_is_kept_by_in_progress_acks(url: str, tmp_path: Path, workers: Workers) -> None:
    # Ack wait 3 s, the task holds its message through three of them (nine in-progress acks, one
    # a second) with a second worker ready all along: the in-progress acks keep the message from
    # going to it while the first one works on it. Counted in in-progress acks seen on the wire,
    # not in seconds waited, so a slow machine makes the test longer, not wrong.
    workers.visibility = 3.0
    app = make_app(url, visibility_timeout=3.0)
    held = tmp_path / "held.txt"
    try:
        workers.start("one", "--pool=solo")
        task = app.send_task("t.hold", (str(held),))
        wait_for(lambda: held.exists(), what="the held task to start")
        workers.start("two", "--pool=solo")
        two_log = tmp_path / "two.log"
        wait_for(lambda: two_log.exists() and " ready." in two_log.read_text(errors="replace"),
                 what="the second worker to be ready")
        with natsjs_sync.connect(url.replace("natsjs://", "nats://")) as nc:
            acks = nc.subscribe("$JS.ACK.>")  # what the workers send the server about their messages
            nc.flush(timeout=10)
            progress: list[MsgMetadata] = []
            while len(progress) < 9:
                ack = acks.next_msg(timeout=60)
                assert ack.data == b"+WPI", f"{ack.data!r} for the held message"
                progress.append(parse_metadata(ack.subject))
            # Every one for the first delivery of the one message: it was never handed out again.
            assert {(md.stream, md.consumer) for md in progress} == {("STREAM_celery", "CONSUMER_celery")}
            assert {(md.sequence, md.num_delivered) for md in progress} == {(progress[0].sequence, 1)}
            info = nc.jetstream().consumer("STREAM_celery", "CONSUMER_celery").info()
            assert (info.num_redelivered, info.num_ack_pending) == (0, 1)
        Path(str(held) + ".go").touch()
        task.get(timeout=60)
        assert held.read_text().count("start") == 1
    finally:
        close_app(app)


def test_worker_resumes_after_a_server_restart(url: str, server: NatsServer, workers: Workers) -> None:
    app = make_app(url)
    try:
        # The pull request the worker has open when the server stops is gone with it; the worker
        # pulls again once that fetch is over: after 1 s, not the transport's default 5 s.
        workers.start("w1", "--pool=solo", env={"CELERY_TEST_FETCH_WAIT": "1"})
        assert app.send_task("t.add", (1, 2)).get(timeout=60) == 3
        server.restart()
        results = [app.send_task("t.add", (i, 1)) for i in range(5)]
        assert [r.get(timeout=90) for r in results] == [i + 1 for i in range(5)]
    finally:
        close_app(app)


def test_results_expire_with_the_bucket_ttl(url: str, server: NatsServer, workers: Workers) -> None:
    os.environ["CELERY_TEST_RESULT_EXPIRES"] = "2"
    try:
        app = make_app(url)
    finally:
        del os.environ["CELERY_TEST_RESULT_EXPIRES"]
    try:
        workers.start("w1", "--pool=solo", env={"CELERY_TEST_RESULT_EXPIRES": "2"})
        r = app.send_task("t.add", (2, 2))
        assert r.get(timeout=60) == 4
        with natsjs_sync.connect(server.url) as nc:
            kv = nc.jetstream().key_value("celery-results")
            assert kv.status().ttl == 2.0
            key = f"celery-task-meta-{r.id}"

            def gone() -> bool:
                try:
                    kv.get(key)
                except natsjs_sync.KeyNotFoundError:
                    return True
                return False

            wait_for(gone, timeout=30, what="the result to expire")
    finally:
        close_app(app)


def test_celery_events_reach_a_receiver(url: str, workers: Workers) -> None:
    # What `celery events` does: a receiver's queue bound to the celeryev topic exchange, the
    # worker (-E) publishing to it through the bindings it reads from the server.
    app = make_app(url)
    seen: list[str] = []
    conn = app.connection_for_read()
    receiver = app.events.Receiver(conn, handlers={"*": lambda event: seen.append(event["type"])})
    listener = threading.Thread(target=lambda: receiver.capture(limit=None, timeout=None, wakeup=False),
                                daemon=True)
    try:
        listener.start()
        workers.start("w1", "--pool=solo", "-E")
        for i in range(50):  # until the receiver's binding is in place: bounded
            assert app.send_task("t.add", (i, 0)).get(timeout=60) == i
            if "task-succeeded" in seen:
                break
        wait_for(lambda: "task-succeeded" in seen, what="a task-succeeded event")
        assert "task-received" in seen
    finally:
        receiver.should_stop = True
        listener.join(timeout=30)
        conn.close()
        close_app(app)


def test_celery_events_dump_command_sees_task_events(url: str, workers: Workers, tmp_path: Path) -> None:
    # The real `celery -A app events --dump` process: its queue is bound to the celeryev topic
    # exchange through the bindings bucket, the worker (-E) publishes its task events there.
    app = make_app(url)
    dump = tmp_path / "events.log"
    try:
        workers.command("events", "events", "--dump")
        workers.start("w1", "--pool=solo", "-E")

        def received_and_succeeded() -> set[str]:
            text = dump.read_text(errors="replace") if dump.exists() else ""
            received = {line.split("task received: t.add(", 1)[1].split(")", 1)[0]
                        for line in text.splitlines() if "task received: t.add(" in line}
            return {task_id for task_id in received if f"task succeeded: t.add({task_id})" in text}

        # The dump binds its queue some time after it starts: send tasks until one is seen
        # received and succeeded (each iteration waits for its task; the whole is bounded).
        deadline = time.monotonic() + 120
        sent: list[str] = []
        while not received_and_succeeded():
            assert time.monotonic() < deadline, "celery events --dump showed no task events:\n" + workers.logs()
            r = app.send_task("t.add", (len(sent), 1))
            assert r.get(timeout=60) == len(sent) + 1
            sent.append(r.id)
        assert received_and_succeeded() <= set(sent)
    finally:
        close_app(app)


def test_send_task_with_a_priority_is_refused(url: str) -> None:
    app = make_app(url)
    try:
        with pytest.raises(NotImplementedError, match="priorities are not supported"):
            app.send_task("t.add", (1, 1), priority=3)
    finally:
        close_app(app)


def test_a_worker_with_priority_queues_is_refused(url: str, workers: Workers) -> None:
    # task_queue_max_priority gives Celery's queues x-max-priority: the worker stops, saying why.
    proc = workers.start("w1", "--pool=solo", env={"CELERY_TEST_QUEUE_MAX_PRIORITY": "10"})
    assert proc.wait(timeout=120) != 0
    assert "priorities are not supported" in workers.logs()


def test_eta_task_waits_in_the_server_through_a_restart_and_runs_once_not_early(
        url: str, server: NatsServer, workers: Workers, tmp_path: Path) -> None:
    # The task waits as a message schedule in its queue's stream (no worker holds it), survives
    # a server restart, runs once, not before its eta, and leaves nothing to run again.
    if (nats_server_version() or (0, 0, 0)) < nt.SCHEDULES_MIN_SERVER:
        pytest.skip("the suite's nats-server has no usable message schedules")
    app = make_app(url)
    runs = tmp_path / "runs.txt"
    try:
        eta = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=6)
        task = app.send_task("t.stamp", (str(runs), "late"), eta=eta)
        server.restart()
        workers.start("w1", "--pool=solo")
        ran_at = task.get(timeout=90)
        assert ran_at >= eta.timestamp()
        assert [line.split()[0] for line in runs.read_text().splitlines()] == ["late"]
        with natsjs_sync.connect(server.url) as nc:
            js = nc.jetstream()
            state = js.stream("STREAM_celery").info().state
            # Two messages went through the stream: the schedule, then the task it published.
            assert (state.messages, state.last_seq) == (0, 2)
            info = js.consumer("STREAM_celery", "CONSUMER_celery").info()
            assert (info.num_pending, info.num_ack_pending) == (0, 0)  # nothing left to run again
    finally:
        close_app(app)


def test_a_worker_survives_messages_that_are_not_kombu_messages(url: str, server: NatsServer,
                                                                workers: Workers) -> None:
    # Anyone may publish to the remote-control fanout subject or to a queue's subject: what is
    # no Kombu envelope (or one Kombu cannot read) is dropped, and the worker keeps working.
    app = make_app(url)
    try:
        workers.start("w1", "--pool=solo")
        assert app.send_task("t.add", (1, 1)).get(timeout=60) == 2
        wait_for(lambda: app.control.inspect(timeout=1, limit=1).ping(), what="the worker answering ping")
        with natsjs_sync.connect(server.url) as nc:
            for data in (b'{"hello": 1}', b'{"properties": {}}', b"[1]", b"\xff"):
                nc.publish(nt.fanout_subject("celery.pidbox"), data)
            nc.jetstream().publish("celery", b'{"body": "!!!notb64", "properties": {"body_encoding": "base64"}}')
            nc.flush()
        # The worker is still consuming: a task sent after them runs.
        assert app.send_task("t.add", (2, 2)).get(timeout=60) == 4
        assert "Traceback" not in workers.logs().split("--- w1.log", 1)[1]
    finally:
        close_app(app)
