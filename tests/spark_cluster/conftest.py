"""The Spark cluster and Spark Connect fixtures come from natsjs_sync's pytest plugin
(``spark_cluster``, ``spark_connect``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def close_shared_clients() -> Iterator[None]:
    """read_range on the test side uses this process's shared clients: close them per test."""
    yield
    from natsjs_sync.spark import close_clients

    close_clients()
