"""Lets Spark find the ``jetstream`` data source by itself.

PySpark 4 registers a Python data source from any installed top-level module
named ``pyspark_*`` that has a ``DefaultSource``; installing natsjs-sync with
its ``spark`` extra is then enough for ``spark.read.format("jetstream")``.
"""

from natsjs_sync.spark.datasource import JetStreamDataSource

DefaultSource = JetStreamDataSource

__all__ = ["DefaultSource"]
