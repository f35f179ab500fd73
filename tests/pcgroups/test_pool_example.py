"""examples/pcgroups_pool.py: a pre-forked pool whose processes are the members of an elastic group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Callable

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until
from ._kit import ROOT, wait_until_left

pytestmark = pytest.mark.server("2.11")


class Lines:
    """The example's stdout, line by line, as it comes (thread-safe)."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.items: list[list[str]] = []
        self._cond = threading.Condition()
        self._t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._t.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._cond:
                self.items.append(line.split())
                self._cond.notify_all()

    def join(self, timeout: float) -> None:
        self._t.join(timeout)
        assert not self._t.is_alive(), "a pool process is still running"

    def wait(self, predicate: Callable[[list[list[str]]], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.items), timeout)


def test_pool_members_join_share_keys_in_order_and_a_leaving_one_hands_over(nats_server: NatsServer) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "pcgroups_pool.py"), nats_server.url, "3"],
                            stdout=subprocess.PIPE, text=True, env=env)
    out = Lines(proc)
    nc = nats.connect(nats_server.url)
    try:
        assert out.wait(lambda ls: sum(1 for ln in ls if ln[0] == "JOINED") == 3, 30), out.items
        joined = {ln[1]: int(ln[2]) for ln in out.items if ln[0] == "JOINED"}
        js = nc.jetstream()

        def handled(ls: list[list[str]]) -> set[int]:
            return {int(ln[2]) for ln in ls if ln[0] != "JOINED"}

        for i in range(90):
            js.publish(f"orders.k{i % 9}", str(i).encode())
        assert out.wait(lambda ls: len(handled(ls)) == 90, 30)
        assert len({ln[0] for ln in out.items if ln[0] != "JOINED"}) == 3  # every process had partitions
        leaving = sorted(joined)[0]
        os.kill(joined[leaving], signal.SIGTERM)
        assert wait_until(lambda: leaving not in js.key_value("elastic-consumer-groups").get("ORDERS.billing")
                          .value.decode(), 20)
        # The membership changes before the leaving process stops its consumer:
        # wait until its consumer is gone, after which no message can reach it.
        assert wait_until_left(js, "ORDERS", "billing", leaving, 30), f"{leaving} still has a consumer"
        mark = len(out.items)
        for i in range(90, 180):
            js.publish(f"orders.k{i % 9}", str(i).encode())
        assert out.wait(lambda ls: len(handled(ls)) == 180, 30)
        assert leaving not in {ln[0] for ln in out.items[mark:]}
        assert wait_until(lambda: js.stream("ORDERS-billing").cached_info.state.messages == 0, 10)
        by_key: dict[str, list[int]] = defaultdict(list)
        for ln in out.items:
            if ln[0] != "JOINED" and int(ln[2]) not in by_key[ln[1]]:
                by_key[ln[1]].append(int(ln[2]))
        assert all(v == sorted(v) for v in by_key.values())
    finally:
        nc.close()
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            out.join(10)  # EOF once every pool process has gone
            if proc.stdout is not None:
                proc.stdout.close()
