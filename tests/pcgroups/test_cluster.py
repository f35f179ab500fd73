"""The battery on a 3-node cluster: member processes join, leave and are SIGKILLed, a server is killed,
all while publishing; order per partition from the members' records, completeness from the server's view."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import JetStream, SubjectTransform
from natsjs_sync.testing import NatsCluster

from ..conftest import wait_until
from ._kit import Records, check_delivery, key_partitions, members

pytestmark = pytest.mark.server("2.11")

KEYS = [f"k{i}" for i in range(16)]
N = 300
LEAVE = 240  # the message after which member m2 leaves the elastic group
QUICK, PATIENT = 2.0, 10.0  # seconds a call waits for its answer: at first, later (see _timeouts)


@pytest.fixture
def cluster_js(nats_cluster: NatsCluster) -> Iterator[tuple[nats.Client, JetStream]]:
    nc = nats.connect(nats_cluster.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.1, name="pcg-cluster")
    try:
        yield nc, nc.jetstream(timeout=10.0)
    finally:
        nc.close()


def _timeouts(attempts: int | None) -> Iterator[float]:
    """Seconds each of ``attempts`` tries of a call waits for its answer (``None``: no end; the
    caller's wait is bounded).

    A request the cluster drops while it elects a leader is never answered. For
    the first 20 s of tries (an election's time, and more) each waits 2 s and
    the call is made again, so the new leader is heard soon after its election;
    after that 10 s, for a live cluster that a loaded machine slows.
    """
    patient = time.monotonic() + 20.0
    for _ in itertools.repeat(None) if attempts is None else range(attempts):
        yield QUICK if time.monotonic() < patient else PATIENT


def _publish(js: JetStream, subject: str, i: int) -> None:
    """Publish message ``i`` until the stream has it (the msg id keeps a retried one single)."""
    backoff = threading.Event()
    for timeout in _timeouts(30):
        try:
            js.publish(subject, str(i).encode(), msg_id=f"m{i}", timeout=timeout)
            return
        except nats.NatsError:
            backoff.wait(0.25)  # a leader election under way
    raise AssertionError(f"message {i} could not be published")


T = TypeVar("T")


def _retry(nc: nats.Client, call: Callable[[JetStream], T]) -> T:
    """``call(js)``, again while a leader election makes it time out (bounded); its result."""
    backoff = threading.Event()
    for timeout in _timeouts(30):
        try:
            return call(nc.jetstream(timeout=timeout))
        except nats.NatsError:
            backoff.wait(0.5)
    return call(nc.jetstream(timeout=PATIENT))


def _holds(nc: nats.Client, predicate: Callable[[JetStream], bool]) -> Callable[[], bool]:
    """``predicate(js)`` for wait_until, false while the cluster cannot answer (a call
    that found no answer is made with the next of :func:`_timeouts`)."""
    timeouts = _timeouts(None)
    js = nc.jetstream(timeout=next(timeouts))

    def check() -> bool:
        nonlocal js
        try:
            return predicate(js)
        except nats.NatsError:
            js = nc.jetstream(timeout=next(timeouts))
            return False

    return check


def _recorder(nats_cluster: NatsCluster, spare: int, group: str) -> tuple[nats.Client, Records]:
    # The records go through a node that is not killed, so none is lost with it.
    nc = nats.connect(nats_cluster.urls[spare], name="pcg-records")
    return nc, Records(nc, group)


def _kill_a_node(nats_cluster: NatsCluster, js: JetStream, stream: str, spare: int) -> None:
    """Kill the stream's leader (or, when it is the spare node, another one)."""
    leader = js.stream(stream).cached_info.cluster.leader  # type: ignore[union-attr]
    idx = next(i for i, n in enumerate(nats_cluster.nodes) if n.server_name == leader)
    nats_cluster.kill_node(idx if idx != spare else (spare + 1) % 3)


@pytest.mark.timeout(600)
def test_elastic_group_on_three_nodes_join_leave_kill_member_and_server(
        nats_cluster: NatsCluster, cluster_js: tuple[nats.Client, JetStream], tmp_path: Path) -> None:
    nc, js = cluster_js
    name = "EC"
    js.create_stream(name=name, subjects=[f"{name}.*"], num_replicas=3, timeout=30)
    pcgroups.create_elastic(js, name, "g", 4, [pcgroups.PartitioningFilter(filter=f"{name}.*",
                                                                           partitioning_wildcards=(1,))])
    assert js.stream(f"{name}-g").cached_info.config.num_replicas == 3
    pcgroups.add_members(js, name, "g", ["m1", "m2"])
    spare = 2
    rnc, recs = _recorder(nats_cluster, spare, "g")
    try:
        urls = ",".join(nats_cluster.urls)
        with members(urls, "elastic", name, "g", ["m1", "m1", "m2", "m3"], 2.0, tmp_path) as procs:
            m1 = {p.pid: p for p in procs[:2]}
            for i in range(N):
                _publish(js, f"{name}.{KEYS[i % 16]}", i)
                if i == 60:  # SIGKILL the m1 instance that receives
                    assert recs.wait_for(lambda rs: any(r["pid"] in m1 for r in rs), 30)
                    victim = next(r["pid"] for r in recs.snapshot() if r["pid"] in m1)
                    m1[victim].kill()
                    m1[victim].wait(10)
                elif i == 120:  # m3 joins
                    _retry(nc, lambda j: pcgroups.add_members(j, name, "g", ["m3"]))
                elif i == 180:  # a server dies
                    _kill_a_node(nats_cluster, js, f"{name}-g", spare)
                elif i == LEAVE:  # m2 leaves
                    _retry(nc, lambda j: pcgroups.delete_members(j, name, "g", ["m2"]))
                    # It has left once its consumer is gone: deleted by m2 on seeing the change, or gone
                    # otherwise (idle while m2 reconnected after the kill) while m2's watch still lags. A
                    # member consumes only from a consumer that the config in the bucket, read once the
                    # consumer is made, still gives it: from then on nothing can reach m2, however late
                    # its watch brings the change.
                    assert wait_until(_holds(nc, lambda j: "m2" not in j.consumer_names(f"{name}-g")), 90, 0.2)
            # The server's view: every message copied into the work queue and acknowledged.
            cg = f"{name}-g"
            assert wait_until(_holds(nc, lambda j: (lambda s: s.last_seq >= N and s.messages == 0)(
                j.stream(cg).cached_info.state)), 90, 0.2), js.stream(cg).cached_info.state
            records = recs.snapshot()
    finally:
        rnc.close()
    got = {r["id"] for r in records if r["ev"] == "got"}
    # Records are not the message path: the few a killed server swallowed may be missing.
    assert len(set(range(N)) - got) <= 5, sorted(set(range(N)) - got)
    assert {r["member"] for r in records if r["id"] > LEAVE} <= {"m1", "m3"}
    assert any(r["member"] == "m3" for r in records)
    parts = _retry(nc, lambda j: key_partitions(j, KEYS, 4))  # the cluster may still be electing after the kill
    check_delivery(records, {i: parts[KEYS[i % 16]] for i in range(N)}, key="id")


@pytest.mark.timeout(600)
def test_static_group_on_three_nodes_kill_member_and_server(
        nats_cluster: NatsCluster, cluster_js: tuple[nats.Client, JetStream], tmp_path: Path) -> None:
    nc, js = cluster_js
    name = "SC"
    js.create_stream(name=name, subjects=[f"{name}.*"], num_replicas=3, timeout=30, subject_transform=SubjectTransform(
        src=f"{name}.*", dest=f"{{{{Partition(4,1)}}}}.{name}.{{{{Wildcard(1)}}}}"))
    pcgroups.create_static(js, name, "g", 4, members=["m1", "m2"])
    spare = 2
    rnc, recs = _recorder(nats_cluster, spare, "g")
    try:
        urls = ",".join(nats_cluster.urls)
        with members(urls, "static", name, "g", ["m1", "m1", "m2"], 2.0, tmp_path) as procs:
            m1 = {p.pid: p for p in procs[:2]}
            for i in range(N):
                _publish(js, f"{name}.{KEYS[i % 16]}", i)
                if i == 80:
                    assert recs.wait_for(lambda rs: any(r["pid"] in m1 for r in rs), 30)
                    victim = next(r["pid"] for r in recs.snapshot() if r["pid"] in m1)
                    m1[victim].kill()
                    m1[victim].wait(10)
                elif i == 180:
                    _kill_a_node(nats_cluster, js, name, spare)

            def settled(j: JetStream) -> bool:
                infos = [j.consumer(name, f"g-{m}").cached_info for m in ("m1", "m2")]
                return all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos)

            assert wait_until(_holds(nc, settled), 90, 0.2)
            records = recs.snapshot()
    finally:
        rnc.close()
    got = {r["seq"] for r in records if r["ev"] == "got"}
    assert len(set(range(1, N + 1)) - got) <= 5, sorted(set(range(1, N + 1)) - got)
    st = js.stream(name)
    check_delivery(records, {s: int(st.get_msg(s).subject.split(".", 1)[0]) for s in range(1, N + 1)})
