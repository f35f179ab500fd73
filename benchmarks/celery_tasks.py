"""Tasks per second through Celery: the natsjs:// broker and result backend beside Celery's
Redis transport and Redis result backend, on the same machine, in one run.

Starts a local nats-server (or uses ``--url``) and a local ``redis-server`` on 127.0.0.1
(Debian's package: ``apt-get install redis-server``; the Python ``redis`` package for
Kombu's Redis transport), then for each of ``--rounds`` rounds runs the same workload through
each broker in turn (round-robin, so the machine's drift lands on both): one ``celery worker``
process with ``--concurrency`` threads, ``--tasks`` trivial tasks sent at once, timed until
every result is back. Prints each round, the medians and natsjs/redis::

    python benchmarks/celery_tasks.py --tasks 1000 --rounds 5

Where redis-server or the ``redis`` package is missing, only natsjs:// runs, with a note.
``--broker URL`` (and ``--backend``) compares with another broker instead of the local Redis.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import natsjs_sync.contrib.celery  # noqa: F401  # registers natsjs://

HERE = os.path.dirname(os.path.abspath(__file__))

app = Celery("celery_tasks", broker=os.environ.get("BENCH_BROKER"), backend=os.environ.get("BENCH_BACKEND"))
app.conf.worker_prefetch_multiplier = 16


@app.task(name="bench.add")
def add(x: int, y: int) -> int:
    return x + y


def run(client: Celery, tasks: int, concurrency: int) -> float:
    """Tasks per second of one fresh worker process on the broker and backend of ``client``."""
    broker, backend = client.conf.broker_url, client.conf.result_backend
    env = dict(os.environ, BENCH_BROKER=broker, BENCH_BACKEND=backend,
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH", "")]))
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "--pool=threads", "-c", str(concurrency),
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        cwd=HERE, env=env)
    try:
        assert client.send_task("bench.add", (0, 0)).get(timeout=60) == 0  # worker up and warm
        start = time.perf_counter()
        results = [client.send_task("bench.add", (i, 1)) for i in range(tasks)]
        for r in results:
            r.get(timeout=120)
        return tasks / (time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait(60)


def make_client(broker: str, backend: str) -> Celery:
    # One client per broker for the whole run: Kombu's connection pools are global per URL,
    # so closing a client's pool between rounds would close it for the next client too.
    client = Celery("celery_tasks", broker=broker, backend=backend)
    client.conf.broker_connection_retry_on_startup = True
    return client


def close_client(client: Celery) -> None:
    client.pool.force_close_all()
    getattr(client.backend, "close", lambda: None)()  # Redis's backend has none


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_redis() -> Iterator[str | None]:
    """A throw-away redis-server on 127.0.0.1 (no persistence), or None with a note."""
    binary = shutil.which("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        binary = None
    if binary is None:
        print("redis-server or the redis package is missing: natsjs:// only "
              "(apt-get install redis-server; pip install redis)")
        yield None
        return
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                 "--appendonly", "no", "--dir", tmp, "--loglevel", "warning"])
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running nats-server (default: start one)")
    parser.add_argument("--broker", help="another broker URL to compare with (default: a local redis-server)")
    parser.add_argument("--backend", help="its result backend (default: the same URL)")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from natsjs_sync.testing import NatsServer

    server = None
    url = args.url
    if not url:
        server = NatsServer()
        server.start()
        url = server.url
    try:
        with local_redis() if not args.broker else _given(args.broker) as other_url:
            natsjs = "natsjs://" + url.split("://", 1)[1]
            brokers = [("natsjs", make_client(natsjs, natsjs))]
            if other_url:
                brokers.append((other_url.split(":", 1)[0], make_client(other_url, args.backend or other_url)))
            rates: dict[str, list[float]] = {name: [] for name, _c in brokers}
            try:
                for round_no in range(1, args.rounds + 1):
                    for name, client in brokers:
                        rate = run(client, args.tasks, args.concurrency)
                        rates[name].append(rate)
                        print(f"round {round_no}  {name:<7} {args.tasks} tasks, {args.concurrency} threads: "
                              f"{rate:8.0f} tasks/s", flush=True)
            finally:
                for _name, client in brokers:
                    close_client(client)
            medians = {name: statistics.median(values) for name, values in rates.items()}
            for name, value in medians.items():
                print(f"median   {name:<7} {value:8.0f} tasks/s")
            if len(brokers) == 2:
                other = brokers[1][0]
                print(f"natsjs/{other} = {medians['natsjs'] / medians[other]:.2f}")
    finally:
        if server is not None:
            server.close()


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    main()
