"""A real PySpark session in local mode for the Spark tests.

``local[2,3]``: two cores, and a failed task is tried up to 3 times (the retry
test needs it). The driver JVM's options must be in spark-defaults.conf: the
builder's config arrives after the JVM has started.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from natsjs_sync.testing import NatsServer

REPO = Path(__file__).resolve().parents[2]


def _skip_reason() -> str | None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java is not installed: the Spark tests need a JVM (Java 17+)"
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark/pyarrow missing ({exc}); install the 'spark' extra"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Without pyspark and pyarrow (the lighter ``test-core`` extra) every test here skips, saying why."""
    missing = [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (the 'spark' extra; the 'test' extra has it)")


@pytest.fixture(scope="session")
def spark_server() -> Iterator[NatsServer]:
    """The server of the Spark tests. The Spark session depends on it, so it is
    stopped after the session: Python workers (reused between tasks) never keep
    clients reconnecting to a stopped server while later tests run."""
    server = NatsServer()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def spark(spark_server: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = _skip_reason()
    if reason:
        print(f"\nSKIPPING SPARK TESTS: {reason}", file=sys.stderr)
        pytest.skip(reason)
    conf_dir = tmp_path_factory.mktemp("spark-conf")
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n"
        "spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1\n"
    )
    (conf_dir / "log4j2.properties").write_text(
        "rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %m%n\n"
    )
    env = {
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # Workers import this checkout (and find pyspark_jetstream in it).
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("natsjs-sync-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.schemaInference", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_active(spark: Any) -> None:
    """Make ``spark`` the active session of the JVM thread that serves this Python thread.

    A write (``DataFrameWriter.save``) looks a Python data source up in that thread's active
    session (``DataSource.lookupDataSource``: ``SparkSession.getActiveSession``), not in the
    DataFrame's session; a read resolves it inside the session's ``withActive``. PySpark sets
    the active session only in the JVM thread where the session was created (and as a side
    effect of ``createDataFrame``). When this process's Py4J connection for the thread is
    replaced, its new JVM thread has none, and every write fails with DATA_SOURCE_NOT_FOUND
    while reads go on working.
    """
    spark._jvm.org.apache.spark.sql.classic.SparkSession.setActiveSession(spark._jsparkSession)  # as PySpark does


@pytest.fixture(autouse=True)
def spark_active(request: pytest.FixtureRequest) -> None:
    """Each test that uses the session starts with it active in its thread's JVM thread (see
    :func:`make_active`), whatever an earlier test did to this process's Py4J connections."""
    if "spark" in request.fixturenames:
        make_active(request.getfixturevalue("spark"))


@pytest.fixture(autouse=True)
def close_shared_clients() -> Iterator[None]:
    """The driver side of the data source uses this process's shared clients: close them per test."""
    yield
    from natsjs_sync.spark import close_clients

    close_clients()
