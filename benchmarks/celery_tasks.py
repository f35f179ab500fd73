"""Tasks per second through Celery with the natsjs:// broker and result backend.

Starts a local nats-server (or uses ``--url``) and one ``celery worker`` process, sends
``--tasks`` trivial tasks and times until every result is back::

    python benchmarks/celery_tasks.py --tasks 2000 --concurrency 4

``--broker redis://127.0.0.1:6379/0`` (and ``--backend``) runs the same against another
broker for a ratio; Redis is not installed on the project's machines, so the comparison with
Celery's Redis transport is left to a machine that has ``redis-server``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from celery import Celery

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import natsjs_sync.contrib.celery  # noqa: F401  # registers natsjs://

HERE = os.path.dirname(os.path.abspath(__file__))

app = Celery("celery_tasks", broker=os.environ.get("BENCH_BROKER"), backend=os.environ.get("BENCH_BACKEND"))
app.conf.worker_prefetch_multiplier = 16


@app.task(name="bench.add")
def add(x: int, y: int) -> int:
    return x + y


def run(broker: str, backend: str, tasks: int, concurrency: int) -> float:
    env = dict(os.environ, BENCH_BROKER=broker, BENCH_BACKEND=backend,
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH", "")]))
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "--pool=threads", "-c", str(concurrency),
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        cwd=HERE, env=env)
    client = Celery("celery_tasks", broker=broker, backend=backend)
    try:
        assert client.send_task("bench.add", (0, 0)).get(timeout=60) == 0  # worker up and warm
        start = time.perf_counter()
        results = [client.send_task("bench.add", (i, 1)) for i in range(tasks)]
        for r in results:
            r.get(timeout=120)
        return tasks / (time.perf_counter() - start)
    finally:
        client.pool.force_close_all()
        client.backend.close()
        worker.terminate()
        worker.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running nats-server (default: start one)")
    parser.add_argument("--broker", help="another broker URL to compare with (e.g. redis://...)")
    parser.add_argument("--backend", help="its result backend (default: the same URL)")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    from natsjs_sync.testing import NatsServer

    server = None
    url = args.url
    if not url:
        server = NatsServer()
        server.start()
        url = server.url
    try:
        natsjs = "natsjs://" + url.split("://", 1)[1]
        rate = run(natsjs, natsjs, args.tasks, args.concurrency)
        print(f"natsjs://  {args.tasks} tasks, {args.concurrency} threads: {rate:8.0f} tasks/s")
        if args.broker:
            other = run(args.broker, args.backend or args.broker, args.tasks, args.concurrency)
            print(f"{args.broker.split(':')[0]}://  {other:8.0f} tasks/s; natsjs/other = {rate / other:.2f}")
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
