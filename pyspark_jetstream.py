"""Lets Spark find the ``jetstream`` data source by itself.

PySpark 4 registers a Python data source from any top-level module named
``pyspark_*`` that ``pkgutil.iter_modules()`` lists in the Python of the
driver (of the Spark Connect server under Spark Connect), if it has a
``DefaultSource``. Installing natsjs-sync (``pip install``, or ``pip install
-e`` from a checkout: setup.py then puts a copy of this module in
site-packages) is then enough for ``spark.read.format("jetstream")``.
"""

try:
    from natsjs_sync.spark.datasource import JetStreamDataSource
except ModuleNotFoundError as exc:
    if exc.name is None or exc.name.split(".")[0] not in ("pyspark", "pyarrow", "py4j"):
        raise
    raise ModuleNotFoundError(
        f"the 'jetstream' Spark data source needs PySpark ({exc.name} is missing): "
        'install natsjs-sync with its spark extra, python -m pip install "natsjs-sync[spark]"',
        name=exc.name,
    ) from exc

DefaultSource = JetStreamDataSource

__all__ = ["DefaultSource"]
