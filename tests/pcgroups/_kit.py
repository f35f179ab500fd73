"""Shared pieces of the consumer group tests: member processes and what they report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream, SubjectTransform
from natsjs_sync.protocol.nuid import next_nuid

from ..conftest import wait_until
from ..natsio_env import natsio_python

ROOT = Path(__file__).resolve().parents[2]
MEMBER = Path(__file__).with_name("member.py")
NATSIO_MEMBER = Path(__file__).with_name("natsio_member.py")


def natsio() -> str:
    """The Python 3.13+ interpreter with natsio and natsio-pcgroups, or skip the test saying why."""
    return natsio_python("natsio.pcgroups")


def run_natsio(url: str, code: str, timeout: float = 60) -> str:
    """Run an asyncio snippet with natsio (``nc``, ``js`` and ``pcgroups`` bound); its stdout."""
    prog = ("import asyncio, json, natsio\nfrom natsio import pcgroups\n"
            "async def main(url):\n    nc = await natsio.connect(url)\n    js = nc.jetstream()\n"
            + "".join(f"    {line}\n" for line in code.strip().splitlines())
            + "    await nc.close()\nimport sys\nasyncio.run(main(sys.argv[1]))\n")
    done = subprocess.run([natsio(), "-c", prog, url], capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


class Records:
    """Everything the member processes of one group reported, as it arrives (thread-safe)."""

    def __init__(self, nc: nats.Client, group: str):
        self._cond = threading.Condition()
        self.items: list[dict[str, Any]] = []
        self._sub = nc.subscribe(f"rec.{group}", cb=self._on)
        nc.flush()

    def _on(self, msg: nats.Msg) -> None:
        with self._cond:
            self.items.append(json.loads(msg.data))
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float) -> bool:
        """Wait (bounded) until ``predicate(records)`` holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.items):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.items)

    def got_seqs(self) -> set[int]:
        return {r["seq"] for r in self.snapshot() if r["ev"] == "got"}


@contextmanager
def members(url: str, kind: str, stream: str, group: str, names: Sequence[str], ack_wait: float,
            tmp: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start one process per name in ``names`` (a name may repeat: instances of one member).

    A name written ``"natsio:NAME"`` runs member NAME with natsio-pcgroups instead.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    try:
        for i, name in enumerate(names):
            logs.append(tmp / f"member-{name}-{i}.log")
            err = open(logs[-1], "wb")
            python, script = sys.executable, MEMBER
            if name.startswith("natsio:"):
                python, script, name = natsio(), NATSIO_MEMBER, name[len("natsio:"):]
            procs.append(subprocess.Popen([python, str(script), url, kind, stream, group, name, str(ack_wait)],
                                          stdout=subprocess.PIPE, stderr=err, env=env))
            err.close()
        for p, log in zip(procs, logs, strict=True):
            assert p.stdout is not None
            line = p.stdout.readline()  # bounded: the process exits (EOF) if it cannot join
            if line.strip() != b"READY":
                try:
                    p.wait(15)  # it closed its stdout: its stderr is complete once it has exited
                except subprocess.TimeoutExpired:
                    pass
                raise AssertionError(f"member {log.stem} did not start: {line!r}, exit code {p.returncode}, "
                                     f"stderr:\n{_tail(log)}")
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            if p.stdout is not None:
                p.stdout.close()


def _tail(log: Path, limit: int = 4000) -> str:
    """The end of a member's stderr log (its traceback, when it died)."""
    try:
        text = log.read_bytes().decode(errors="replace")
    except OSError as exc:
        return f"<unreadable: {exc}>"
    return text[-limit:] or "<empty>"


def start_publisher(js: JetStream, subject_of: Callable[[int], str], n: int, pause_after: Sequence[int] = (),
                    gates: Mapping[int, threading.Event] | None = None) -> threading.Thread:
    """Publish messages ``0..n-1`` (message ``i`` on ``subject_of(i)``, its number as the data)
    on a new thread, pausing 1 s after each index in ``pause_after`` so that what a test does
    meanwhile (a kill) lands mid-stream, and after each index in ``gates`` until the test sets
    that event (at most 60 s), so that what follows comes only after what the test awaited.
    The thread is started; join it."""
    pause = threading.Event()  # never set: only paces the publisher
    gates = gates or {}

    def publish() -> None:
        for i in range(n):
            js.publish(subject_of(i), str(i).encode())
            if i in pause_after:
                pause.wait(1.0)
            if i in gates:
                gates[i].wait(60.0)

    pub = threading.Thread(target=publish, name="publisher")
    pub.start()
    return pub


def wait_until_left(js: JetStream, stream: str, group: str, member: str, timeout: float = 90.0) -> bool:
    """Wait until an elastic ``member`` removed from the group has no consumer left (it deletes its
    consumer on seeing the change, or the server does once it is idle): from then on no message
    can reach it, however late it sees the change, since a member consumes only from a consumer
    that the config in the bucket, read once the consumer is made, still gives it. Whether that
    happened within ``timeout`` seconds."""
    def gone() -> bool:
        try:
            return member not in js.consumer_names(f"{stream}-{group}")
        except nats.NatsError:  # a cluster electing after a kill
            return False
    return wait_until(gone, timeout, 0.2)


def kill_the_active_instance(recs: Records, instances: Sequence[subprocess.Popen[bytes]]) -> int:
    """SIGKILL whichever of ``instances`` (processes of one member name) reported first.

    Returns:
        The pid of another instance: the standby expected to take over.
    """
    by_pid = {p.pid: p for p in instances}
    assert recs.wait_for(lambda rs: any(r["pid"] in by_pid for r in rs), 20)
    victim = next(r["pid"] for r in recs.snapshot() if r["pid"] in by_pid)
    by_pid[victim].send_signal(signal.SIGKILL)
    by_pid[victim].wait(10)
    return next(pid for pid in by_pid if pid != victim)


def partition_of(js: JetStream, stream: str, seqs: Sequence[int]) -> dict[int, int]:
    """The partition of each stored message, read from its subject's first token."""
    st = js.stream(stream)
    return {s: int(st.get_msg(s).subject.split(".", 1)[0]) for s in seqs}


def key_partitions(js: JetStream, keys: Sequence[str], partitions: int) -> dict[str, int]:
    """The partition the server's ``Partition`` transform gives each key (one message each in a scratch stream)."""
    name = "KP" + next_nuid()
    js.create_stream(name=name, subjects=[f"{name}.*"], storage="memory", subject_transform=SubjectTransform(
        src=f"{name}.*", dest=f"{{{{Partition({partitions},1)}}}}.{name}.{{{{Wildcard(1)}}}}"))
    try:
        for k in keys:
            js.publish(f"{name}.{k}", b"")
        st = js.stream(name)
        return {k: int(st.get_msg(i + 1).subject.split(".", 1)[0]) for i, k in enumerate(keys)}
    finally:
        js.delete_stream(name)


def check_delivery(records: list[dict[str, Any]], partitions: dict[int, int], key: str = "seq") -> None:
    """Per partition in order; nothing acknowledged delivered again to another process.

    Order: first deliveries of each partition come in stream order (a
    message seen again after a fail-over is a redelivery, not a reordering).
    """
    seen: set[int] = set()
    last: dict[int, int] = defaultdict(lambda: -1)
    acked_at: dict[int, tuple[int, int]] = {}
    for r in records:
        if r["ev"] == "acked":
            acked_at.setdefault(r[key], (r["pid"], r["n"]))
    for r in records:
        if r["ev"] != "got":
            continue
        seq = r[key]
        if seq in acked_at:
            pid, n = acked_at[seq]
            assert not (r["pid"] != pid and r["n"] > n), f"acknowledged {seq} delivered again: {r}"
        if seq in seen:
            continue
        seen.add(seq)
        p = partitions[seq]
        assert seq > last[p], f"partition {p}: {seq} after {last[p]}"
        last[p] = seq
