"""Spark on a standalone cluster (a master, two workers, executors in their own JVMs), checked
against the stream as the server holds it. The drivers are separate ``spark-submit`` programs
(tests/spark_cluster/jobs) that see natsjs-sync only through its install (the executors of the first
test only through a packed environment), and none registers the data source: Spark finds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.spark import NatsConfig, read_range
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.spark import SparkStandaloneCluster
from tests.conftest import wait_until

# Each test starts Spark drivers (about 15 s each on an idle 2-core machine, several times that on a
# loaded one) and bounds its own waits; the suite's 120 s per test is too short for them.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

JOBS = Path(__file__).resolve().parent / "jobs"


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    s = NatsServer()
    s.start()
    yield s
    s.close()


@pytest.fixture
def js(server: NatsServer) -> Iterator[Any]:
    nc = nats.connect(server.url)
    yield nc.jetstream()
    nc.close()


def _stream(js: Any, name: str, subjects: str) -> None:
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass
    js.create_stream(name=name, subjects=[subjects], duplicate_window=600.0)


def _count(js: Any, name: str) -> int:
    return int(js.stream(name).info().state.messages)


def _per_subject(js: Any, name: str) -> dict[str, int]:
    """How many messages the server holds per subject."""
    return dict(js.stream(name).info(subjects_filter=">").state.subjects or {})


def _datas(server: NatsServer, name: str) -> list[int]:
    return sorted(int(m.data) for m in read_range(NatsConfig(servers=server.url), name, 1))


def _packed_environment(tmp_path: Path) -> tuple[Path, Path]:
    """A virtual environment holding natsjs-sync and msgspec (copied in, as an install would put them),
    packed with venv-pack; and the "cluster image", a directory outside the archive that gives the
    executors PyArrow, as PySpark and PyArrow often come preinstalled on cluster nodes."""
    import shutil
    import subprocess
    import sys
    import sysconfig

    import msgspec
    import pyarrow
    import venv_pack

    import natsjs_sync

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    # The executors' interpreter is this venv's: before the copy below it must not see natsjs-sync
    # (wherever the tests' own Python has it installed, editable or not).
    lacks = subprocess.run([str(env / "bin" / "python"), "-I", "-c", "import natsjs_sync"],
                           capture_output=True, timeout=60)
    assert lacks.returncode != 0, "a fresh venv must not see natsjs-sync for this test"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c", where], check=True, capture_output=True,
                               text=True, timeout=60).stdout.strip())
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(natsjs_sync.__file__).parent, site / "natsjs_sync", ignore=ignore)
    shutil.copytree(Path(msgspec.__file__).parent, site / "msgspec", ignore=ignore)
    image = tmp_path / "cluster-image"
    image.mkdir()
    (image / "pyarrow").symlink_to(Path(pyarrow.__file__).parent)
    assert sysconfig.get_path("purelib") != str(site)
    archive = tmp_path / "environment.tar.gz"
    venv_pack.pack(prefix=str(env), output=str(archive), compress_level=1)
    return archive, image


def test_batch_write_read_and_partition_helpers_with_a_packed_environment_and_shipped_creds(
        spark_cluster: SparkStandaloneCluster, tmp_path: Path) -> None:
    """What a job ships to executors on other hosts: the executors' Python lacks natsjs-sync, which comes in a
    venv-packed archive (``--archives``); the server admits only users of its operator's account, and the job
    names ``app.creds`` relative to the executors' working directory, where ``--files`` puts it."""
    import sys

    from natsjs_sync.testing.jwt import Operator

    pytest.importorskip("venv_pack", reason="venv-pack is in the test extra")
    archive, image = _packed_environment(tmp_path)
    op = Operator()
    op.add_account("APP")
    creds = tmp_path / "secure" / "app.creds"
    creds.parent.mkdir()
    creds.write_text(op.user_creds("APP"))
    with NatsServer(config=op.server_config()) as secured:
        with pytest.raises(nats.AuthorizationError):
            nats.connect(secured.url, connect_timeout=10, max_reconnect_attempts=0)
        with nats.connect(secured.url, user_credentials=str(creds)) as nc:
            js: Any = nc.jetstream()
            _stream(js, "CBATCH", "cbatch.>")
            _stream(js, "CHELP", "chelp.>")
            driver = spark_cluster.submit(
                JOBS / "batch.py", secured.url, "2000", "app.creds", timeout=300,
                options=["--archives", f"{archive}#environment", "--files", str(creds)],
                conf={"spark.pyspark.python": "./environment/bin/python", "spark.pyspark.driver.python": sys.executable,
                      "spark.executorEnv.PYTHONPATH": str(image)})
            assert driver.returncode == 0, driver.output() + driver.log.read_text()
            got = driver.result()
            assert got["executors"] == 2
            assert got["driver"][1] is False  # not in the driver's directory: the executors found their own
            assert len({cwd for _, _, cwd, _ in got["executors_imported"]}) == 2
            for module_file, python, cwd, has_creds in got["executors_imported"]:
                assert "/environment/" in module_file and python.endswith("environment/bin/python")
                assert has_creds and cwd != got["driver"][0]
            assert _count(js, "CBATCH") == 2_000 and _count(js, "CHELP") == 2_000
            assert got["partitions"] == 4
            assert got["read"] == {"n": 2_000, "seqs": 2_000, "datas": 2_000, "lo": 1, "hi": 2_000}
            assert got["helpers"] == {"n": 2_000, "distinct": 2_000, "lo": 0, "hi": 1_999}


def test_executor_killed_in_the_middle_of_a_write_stores_every_row_once(
        spark_cluster: SparkStandaloneCluster, server: NatsServer, js: Any, tmp_path: Path) -> None:
    """The killed executor's task had stored part of its partition (the server says so at the kill); its
    retry writes the whole partition again, and the stream still holds every row exactly once."""
    rows, stop = 4000, 300  # 4 partitions of 1000; each first attempt stops after 300 rows
    _stream(js, "CWRITE", "cwrite.>")
    gate = tmp_path / "gate"
    driver = spark_cluster.submit(JOBS / "write_gated.py", server.url, str(rows), str(stop), str(gate), wait=False)
    try:
        # The first two tasks (one per executor) hand 300 rows to the writer and wait at the gate.
        at = [tmp_path / "gate-at-0", tmp_path / "gate-at-1"]
        assert wait_until(lambda: all(p.exists() for p in at) or driver.returncode is not None, 240,
                          interval=0.2), driver.log.read_text()
        assert driver.returncode is None, driver.output() + driver.log.read_text()
        # Those rows are published before the writer asks for more: wait until the server has them.
        assert wait_until(lambda: _per_subject(js, "CWRITE") == {"cwrite.0": stop, "cwrite.1": stop}, 60,
                          interval=0.2), _per_subject(js, "CWRITE")
        executor = spark_cluster.executor_of(int(at[0].read_text()))
        killed = spark_cluster.kill_executor(executor)  # partition 0's executor, its task mid-write
        stored_at_kill = _per_subject(js, "CWRITE")
        gate.touch()
        assert driver.wait(300) == 0, driver.output() + driver.log.read_text()
    finally:
        driver.kill()
    assert killed not in spark_cluster.executor_pids()
    # Some but not all of the killed task's rows were stored when it died (nothing more came meanwhile) ...
    assert stored_at_kill == {"cwrite.0": stop, "cwrite.1": stop}
    # ... its retry published all 1000 again, and the stream kept each row once.
    assert _per_subject(js, "CWRITE") == {f"cwrite.{p}": rows // 4 for p in range(4)}
    assert _datas(server, "CWRITE") == list(range(rows))


def test_streaming_query_rides_out_an_executor_loss_and_a_driver_restart(
        spark_cluster: SparkStandaloneCluster, server: NatsServer, js: Any, tmp_path: Path) -> None:
    """Two micro-batches of 1,000: an executor dies in the first, the driver in the second; started again
    from its checkpoint, the query finishes and the sink holds every row once."""
    _stream(js, "SRC", "src.>")
    _stream(js, "SINK", "sink.>")
    for i in range(2000):
        js.publish_async(f"src.{i % 5}", str(i).encode())
    js.publish_async_complete(timeout=60)
    checkpoint, gates = tmp_path / "checkpoint", tmp_path / "gates"
    gates.mkdir()
    args = (server.url, str(checkpoint), str(gates), "500", "1500", "1000")

    first = spark_cluster.submit(JOBS / "stream_gated.py", *args, wait=False)
    try:
        assert wait_until(lambda: (gates / "at-500").exists() or first.returncode is not None, 240, interval=0.2)
        assert first.returncode is None, first.output() + first.log.read_text()
        # The executor running the held task: it dies in the middle of the first micro-batch.
        spark_cluster.kill_executor(spark_cluster.executor_of(int((gates / "at-500").read_text())))
        (gates / "gate-500").touch()
        assert wait_until(lambda: (gates / "at-1500").exists() or first.returncode is not None, 240,
                          interval=0.2)
        assert first.returncode is None, first.output() + first.log.read_text()
        stored_before = _count(js, "SINK")
        first.kill()  # the driver dies in the middle of the second micro-batch
    finally:
        first.kill()
    assert 1_000 <= stored_before < 2_000  # the first micro-batch done, the second not
    (gates / "gate-1500").touch()
    spark_cluster.wait_idle()  # the killed driver's executors gone: the new one gets both
    second = spark_cluster.submit(JOBS / "stream_gated.py", *args, timeout=300)  # from the checkpoint
    assert second.returncode == 0, second.output() + second.log.read_text()
    assert _count(js, "SINK") == 2_000
    assert _datas(server, "SINK") == list(range(2_000))

