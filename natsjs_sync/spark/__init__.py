"""Spark integration: a picklable config, one client per worker process,
partition helpers, and the PySpark data source ``jetstream``.

Importing this package does not import pyspark; :mod:`natsjs_sync.spark.datasource` does.
"""

from .config import NatsConfig, close_clients
from .publishing import PublishResult, publish_partition, row_payload
from .ranges import read_range

__all__ = ["JetStreamDataSource", "NatsConfig", "PublishResult", "close_clients", "publish_partition",
           "read_range", "row_payload"]


def __getattr__(name: str) -> object:
    if name == "JetStreamDataSource":  # needs pyspark: import it only when asked for
        from .datasource import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(name)
