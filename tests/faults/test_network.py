"""The fault battery, a broken network between the client and a healthy server:
connections reset again and again, the network falling silent, a peer that
stops reading, frames cut in half, latency and bytes trickling in."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.testing import FaultProxy, NatsServer

from ..recovery import FAST, Events
from .workload import Workload

RESUME_BOUND = 15.0  # one heartbeat (15 s) after the network is back: the bug took 24-30 s
SILENCE = 3.0  # how long the network stays broken


@dataclass
class Net:
    server: NatsServer
    proxy: FaultProxy
    nc: nats.Client
    js: JetStream
    ev: Events


@pytest.fixture
def net(nats_server: NatsServer, nats_fault_proxy: FaultProxy) -> Iterator[Net]:
    ev = Events()
    # Keep-alive PINGs every 0.5 s: a silent or stalled connection is given up within ~1.5 s.
    nc = nats.connect(nats_fault_proxy.url, name="battery-net", ping_interval=0.5, max_outstanding_pings=2,
                      connect_timeout=1.0, **FAST, **ev.kwargs())
    try:
        js = nc.jetstream(timeout=5)
        js.create_stream(name="N", subjects=["n.>"], storage="file", duplicate_window=120.0)
        yield Net(nats_server, nats_fault_proxy, nc, js, ev)
    finally:
        nats_fault_proxy.heal()
        nc.close()


def _report(work: Workload, back: float, label: str) -> None:
    times = work.resume_times(back, RESUME_BOUND, label)
    print(f"{label}: consumption resumed after (s) " +
          ", ".join(f"{k}={'-' if v is None else f'{v:.2f}'}" for k, v in times.items()))
    late = sorted(k for k, v in times.items() if v is None)
    assert not late, f"{label}: not resumed {RESUME_BOUND} s after the network was back: {late}"


def test_connections_reset_again_and_again(net: Net) -> None:
    work = Workload(net.js, "N", "n.x")
    try:
        for round_ in range(3):
            assert work.wait_acked(200, timeout=60)
            net.proxy.cut()
            _report(work, time.monotonic(), f"reset {round_ + 1}")
        print("checked:", work.verify(net.server.url))
        assert net.nc.stats.reconnects >= 3
    finally:
        work.stop()


@pytest.mark.parametrize("fault", ["blackhole", "stop_reading"])
def test_the_network_falls_silent_then_heals(net: Net, fault: str) -> None:
    work = Workload(net.js, "N", "n.x")
    try:
        assert work.wait_acked(200, timeout=60)
        net.ev.disconnected.clear()
        if fault == "blackhole":
            net.proxy.blackhole()
        else:
            net.proxy.stop_reading()
        assert net.ev.disconnected.wait(10), "the broken connection was never given up"
        threading.Event().wait(SILENCE)  # the outage lasts this long (a fault's duration, not a wait for an event)
        net.ev.reconnected.clear()
        net.proxy.heal()
        assert net.ev.reconnected.wait(10)
        _report(work, time.monotonic(), f"{fault} healed")
        assert work.wait_acked(200, timeout=60)
        print("checked:", work.verify(net.server.url))
    finally:
        work.stop()


def test_frames_cut_in_half(net: Net) -> None:
    work = Workload(net.js, "N", "n.x")
    try:
        for round_ in range(5):
            assert work.wait_acked(100, timeout=60)
            net.ev.reconnected.clear()
            net.proxy.cut_mid_frame(reset=round_ % 2 == 1)
            assert net.ev.reconnected.wait(15), f"cut {round_ + 1}: the client did not come back"
        _report(work, time.monotonic(), "after five cut frames")
        print("checked:", work.verify(net.server.url))
    finally:
        work.stop()
    # An object read while its chunks are cut in half on the way.
    obs = net.js.create_object_store(bucket="NOBJ", storage="file")
    data = hashlib.sha256(b"net").digest() * (4 * 1024 * 1024 // 32)
    obs.put("big", data, chunk_size=128 * 1024, timeout=30)
    with obs.get("big", timeout=30) as result:
        parts = [result.read(512 * 1024)]
        for _ in range(3):
            net.proxy.cut_mid_frame()
            parts.append(result.read(512 * 1024))
        parts.append(result.read())
    assert hashlib.sha256(b"".join(parts)).digest() == hashlib.sha256(data).digest()


def test_a_slow_network(net: Net) -> None:
    work = Workload(net.js, "N", "n.x", rate=0.01)
    try:
        net.proxy.latency(0.05)
        assert work.wait_acked(100, timeout=60)
        net.proxy.heal()
        net.proxy.trickle(chunk_size=7, pause=0.0)  # every frame split at odd places
        assert work.wait_acked(100, timeout=60)
        net.proxy.heal()
        print("checked:", work.verify(net.server.url))
        assert net.nc.stats.reconnects == 0
    finally:
        work.stop()
