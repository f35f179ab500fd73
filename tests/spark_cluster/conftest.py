"""The Spark cluster and Spark Connect fixtures come from natsjs_sync's pytest plugin
(``spark_cluster``, ``spark_connect``), one of each for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def close_shared_clients() -> Iterator[None]:
    """read_range on the test side uses this process's shared clients: close them per test."""
    yield
    from natsjs_sync.spark import close_clients

    close_clients()


@pytest.fixture(autouse=True)
def idle_cluster(request: pytest.FixtureRequest) -> None:
    """A test on the shared cluster starts once the previous test's applications have released the
    workers' cores, so its drivers get both executors."""
    if "spark_cluster" in request.fixturenames:
        request.getfixturevalue("spark_cluster").wait_idle()
