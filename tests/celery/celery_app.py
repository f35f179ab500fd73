"""The Celery app the tests run workers of (``celery -A celery_app worker``).

The worker reads its broker from ``CELERY_TEST_BROKER``; the tests build the same app
with :func:`make_app` to send tasks and read results.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery

import natsjs_sync.contrib.celery  # noqa: F401  # registers natsjs:// with Kombu


# Tasks are not shared: a test process that makes a second app (another URL) would otherwise
# give it the first app's callables under the same names (Celery warns, the suite fails).
def make_app(url: str, visibility_timeout: float = 30.0) -> Celery:
    app = Celery("celery_app", broker=url, backend=url)
    transport_options: dict[str, float] = {"visibility_timeout": visibility_timeout}
    if os.environ.get("CELERY_TEST_FETCH_WAIT"):
        transport_options["fetch_wait"] = float(os.environ["CELERY_TEST_FETCH_WAIT"])
    app.conf.update(
        broker_transport_options=transport_options,
        result_expires=float(os.environ.get("CELERY_TEST_RESULT_EXPIRES", "3600")),
        task_routes={"t.where_alpha": {"queue": "alpha"}, "t.where_beta": {"queue": "beta"}},
        broker_connection_retry_on_startup=True,
        worker_prefetch_multiplier=1,
        # How long a prefork worker waits for the result a pool child that died may have sent
        # before it calls the job lost (default 10 s): the tests kill children mid-task only,
        # which never sent one.
        worker_lost_wait=1.0,
    )
    if os.environ.get("CELERY_TEST_QUEUE_MAX_PRIORITY"):
        app.conf.task_queue_max_priority = int(os.environ["CELERY_TEST_QUEUE_MAX_PRIORITY"])

    @app.task(name="t.add", shared=False)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="t.tsum", shared=False)
    def tsum(values: list[int]) -> int:
        return sum(values)

    @app.task(name="t.record", bind=True, shared=False)
    def record(self, path: str, tag: str) -> str:  # type: ignore[no-untyped-def]
        with open(path, "a") as f:
            f.write(f"{tag} {os.getpid()}\n")
        return str(self.request.hostname)

    @app.task(name="t.stamp", shared=False)
    def stamp(path: str, tag: str) -> float:
        # When it ran (wall clock, as an eta is), one line per run.
        now = time.time()
        with open(path, "a") as f:
            f.write(f"{tag} {now}\n")
        return now

    @app.task(name="t.where_alpha", bind=True, shared=False)
    def where_alpha(self) -> str:  # type: ignore[no-untyped-def]
        return str(self.request.hostname)

    @app.task(name="t.where_beta", bind=True, shared=False)
    def where_beta(self) -> str:  # type: ignore[no-untyped-def]
        return str(self.request.hostname)

    @app.task(name="t.hold", shared=False, acks_late=True, reject_on_worker_lost=True)
    def hold(path: str) -> int:
        # Says it started, then waits (bounded) for the test to let it finish.
        with open(path, "a") as f:
            f.write(f"start {os.getpid()}\n")
        go = Path(path + ".go")
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return os.getpid()

    @app.task(name="t.flaky", shared=False, bind=True, max_retries=3)
    def flaky(self, path: str) -> int:  # type: ignore[no-untyped-def]
        # Fails its first two runs, retried one second later each time.
        with open(path, "a") as f:
            f.write("run\n")
        runs = Path(path).read_text().count("run")
        if runs < 3:
            raise self.retry(countdown=1, exc=RuntimeError(f"run {runs} fails"))
        return runs

    return app


if os.environ.get("CELERY_TEST_BROKER"):
    app = make_app(os.environ["CELERY_TEST_BROKER"],
                   float(os.environ.get("CELERY_TEST_VISIBILITY", "30")))
