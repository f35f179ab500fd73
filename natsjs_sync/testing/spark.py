"""Spark beyond ``local[n]`` for tests: a standalone cluster and a Spark Connect server on 127.0.0.1.

Both run the JVMs that ship inside the ``pyspark`` wheel (Java 17 or newer on
``PATH`` or ``JAVA_HOME``). Every process gets the environment given to the
object, not this process's ``PYTHONPATH``: a job sees the packages installed in
its Python as a real cluster would, so a test of your own job also tests that
the job finds what it needs.

- :class:`SparkStandaloneCluster`: a master and ``workers`` workers, each its
  own JVM; each application gets one executor JVM per worker, with its own
  Python workers. Run drivers with :meth:`~SparkStandaloneCluster.submit`
  (``spark-submit`` in a process of its own) and break executors with
  :meth:`~SparkStandaloneCluster.kill_executor`.
- :class:`SparkConnectServer`: a Spark Connect server (``local[n]`` inside);
  :meth:`~SparkConnectServer.session` is a remote client session (PySpark's
  ``connect`` extra: grpcio, pandas, ...).

Importing this module does not import pyspark.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .server import LOOPBACK, free_port

__all__ = ["SparkConnectServer", "SparkDriver", "SparkStandaloneCluster", "spark_home", "spark_skip_reason"]

# Cheaper JVMs on small, loaded machines: the C1 compiler only, the serial GC.
_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

_LOG4J = (
    "rootLogger.level = warn\nrootLogger.appenderRef.stdout.ref = console\n"
    "appender.console.type = Console\nappender.console.name = console\n"
    "appender.console.target = SYSTEM_ERR\n"
    "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    # Executors lost on purpose, retried tasks: expected in these tests, noisy in logs.
    "logger.tsm.name = org.apache.spark.scheduler.TaskSetManager\nlogger.tsm.level = error\n"
)


def spark_home() -> Path:
    """The Spark distribution to run: ``$SPARK_HOME``, else the one inside the pyspark package.

    Raises:
        FileNotFoundError: pyspark is not installed and ``SPARK_HOME`` is not set.
    """
    env = os.environ.get("SPARK_HOME")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pyspark is not installed: pip install 'natsjs-sync[spark]' (or set SPARK_HOME)")
    return Path(next(iter(spec.submodule_search_locations)))


def spark_skip_reason(connect: bool = False) -> str | None:
    """Why Spark cannot run here (no Java, no pyspark, no pyarrow, or for ``connect``
    no PySpark Connect client), or ``None`` when it can."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java is not installed: Spark needs a JVM (Java 17+)"
    needed = ["pyspark", "pyarrow"] + (["grpc", "pandas", "google.protobuf", "zstandard"] if connect else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        extra = "pyspark[connect]" if connect else "natsjs-sync[spark]"
        return f"{', '.join(missing)} not installed: pip install '{extra}'"
    return None


def _clean_env(python: str, extra: Mapping[str, str] | None, conf_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR",
                        "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_DIRS")}
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_DAEMON_JAVA_OPTS": _JVM_OPTS,
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    })
    env.update(extra or {})
    return env


def _write_conf(conf_dir: Path, conf: Mapping[str, str]) -> None:
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    (conf_dir / "log4j2.properties").write_text(_LOG4J)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None,
          log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}\n{_tail(log) if log else ''}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f}s\n{_tail(log) if log else ''}")
        pause.wait(0.2)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((LOOPBACK, port)) == 0


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process (``ps``: Linux and macOS)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            rows.append((int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else ""))
    return rows


class SparkDriver:
    """A driver program started by :meth:`SparkStandaloneCluster.submit` with ``wait=False``.

    It runs in a process group of its own, so :meth:`kill` takes down the
    ``spark-submit`` JVM and the Python driver together, as a crashed driver
    machine would. Its standard output and error go to :attr:`log`. Not thread-safe.
    """

    def __init__(self, proc: subprocess.Popen[bytes], log: Path, out: Path):
        self.proc = proc
        #: The file the driver's standard output and error go to.
        self.log = log
        self._out = out

    @property
    def returncode(self) -> int | None:
        """The exit status, or ``None`` while it runs."""
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the driver to end and return its exit status.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        return self.proc.wait(timeout)

    def output(self) -> str:
        """What the driver printed on standard output so far."""
        return self._out.read_text(errors="replace") if self._out.exists() else ""

    def result(self) -> Any:
        """The JSON value on the last line of standard output (for drivers that print one)."""
        lines = [line for line in self.output().splitlines() if line.strip()]
        if not lines:
            raise ValueError(f"the driver printed nothing\n{_tail(self.log)}")
        return json.loads(lines[-1])

    def kill(self) -> None:
        """SIGKILL the driver: the ``spark-submit`` JVM and the Python driver program."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)


class _SparkProcesses:
    def __init__(self, python: str | None, env: Mapping[str, str] | None, conf: Mapping[str, str] | None,
                 base_dir: str | os.PathLike[str] | None, prefix: str):
        self.python = python or sys.executable
        # A temporary directory is removed with the object; a given one is kept (logs to read).
        self.dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix=prefix))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.dir), True)
        if base_dir is not None:
            self._finalizer.detach()
        self.conf_dir = self.dir / "conf"
        self.conf: dict[str, str] = {
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.driver.extraJavaOptions": _JVM_OPTS,
            "spark.executor.extraJavaOptions": _JVM_OPTS,
            "spark.driver.memory": "512m",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.pyspark.python": self.python,
            "spark.pyspark.driver.python": self.python,
            "spark.local.dir": str(self.dir / "local"),
        }
        self.conf.update(conf or {})
        self.env = _clean_env(self.python, env, self.conf_dir)
        self._procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, args: Sequence[str], log: Path, stdout: Path | None = None,
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as err, open(stdout or log, "ab") as out:
            proc = subprocess.Popen(list(args), cwd=self.dir, env={**self.env, **(env or {})},
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        self._procs.append(proc)
        weakref.finalize(proc, _stop, proc, 2.0)
        return proc

    def _bin(self, name: str) -> str:
        return str(spark_home() / "bin" / name)

    def _close_processes(self) -> None:
        for proc in reversed(self._procs):
            _stop(proc)
        self._procs.clear()


class SparkStandaloneCluster(_SparkProcesses):
    """A Spark standalone cluster on 127.0.0.1 for tests: one master, ``workers`` workers.

    Each worker offers ``cores`` cores and ``memory``; an application gets one
    executor JVM per worker (``spark.executor.cores`` = ``cores``), each with
    its own Python workers. No process inherits this process's ``PYTHONPATH``.
    Not thread-safe.

    Args:
        workers: how many worker JVMs.
        cores: cores per worker (and per executor).
        memory: memory per worker, e.g. ``"1g"``.
        python: the Python of drivers and executors (``spark.pyspark.python``);
            this interpreter by default.
        env: extra environment variables for every process of the cluster.
        conf: Spark properties for the applications (``spark-defaults.conf``).
        base_dir: where configs, logs and work directories go; a temporary
            directory (removed with the object) by default.

    Example::

        with SparkStandaloneCluster() as cluster:
            driver = cluster.submit("my_job.py", "nats://127.0.0.1:4222")
            assert driver.wait(300) == 0, driver.output()
    """

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g", python: str | None = None,
                 env: Mapping[str, str] | None = None, conf: Mapping[str, str] | None = None,
                 base_dir: str | os.PathLike[str] | None = None):
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        defaults = {
            "spark.executor.memory": "512m",
            "spark.executor.cores": str(cores),
            # Start tasks only once every executor is there, so all take part (the ratio counts
            # against spark.cores.max: without it a standalone driver does not wait at all).
            "spark.cores.max": str(workers * cores),
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
        }
        super().__init__(python, env, {**defaults, **(conf or {})}, base_dir, "natsjs-spark-cluster-")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.web_port = free_port()
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``, for ``--master``."""
        return f"spark://{LOOPBACK}:{self.port}"

    def status(self) -> dict[str, Any]:
        """The master's own view (its ``/json`` page): workers, applications, executors' cores."""
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.web_port}/json/", timeout=5) as resp:
            data: dict[str, Any] = json.loads(resp.read())
            return data

    def _alive_workers(self) -> int:
        """Workers the master counts alive; -1 while its web page does not answer."""
        try:
            return int(self.status().get("aliveworkers", 0))
        except (OSError, ValueError, urllib.error.URLError):
            return -1

    def start(self, timeout: float = 120.0) -> SparkStandaloneCluster:
        """Start the master and the workers; return once every worker has registered.

        Raises:
            RuntimeError: a JVM exited (its log is in the message).
            TimeoutError: not ready within ``timeout`` seconds.
        """
        reason = spark_skip_reason()
        if reason:
            raise RuntimeError(reason)
        _write_conf(self.conf_dir, self.conf)
        log = self.dir / "logs" / "master.log"
        self._master = self._spawn([self._bin("spark-class"), "org.apache.spark.deploy.master.Master",
                                    "--host", LOOPBACK, "--port", str(self.port),
                                    "--webui-port", str(self.web_port)], log)
        try:
            _wait(lambda: self._alive_workers() >= 0 and _port_open(self.port), timeout, "spark master",
                  self._master, log)
            for i in range(self.workers):
                wlog = self.dir / "logs" / f"worker-{i}.log"
                work = self.dir / f"work-{i}"
                work.mkdir(exist_ok=True)
                self._workers.append(self._spawn(
                    [self._bin("spark-class"), "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                     "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                     "--webui-port", str(free_port()), self.master_url], wlog))
            _wait(lambda: self._alive_workers() == self.workers, timeout, "spark workers", self._master, log)
        except BaseException:
            self.close()
            raise
        return self

    def _idle(self) -> bool:
        try:
            s = self.status()
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return (not s.get("activeapps") and int(s.get("coresused", 0)) == 0
                and int(s.get("aliveworkers", 0)) == self.workers)

    def wait_idle(self, timeout: float = 120.0) -> None:
        """Wait until no application runs and every worker is alive with all its cores free.

        Each worker's cores go to one application at a time: a driver submitted
        while an earlier one still holds them (just ended or killed, its
        executors not yet released) starts with fewer executors.

        Raises:
            TimeoutError: still busy after ``timeout`` seconds.
        """
        _wait(self._idle, timeout, "spark cluster idle", self._master, self.dir / "logs" / "master.log")

    def worker_pids(self) -> list[int]:
        """Process ids of the worker JVMs that are running."""
        return [p.pid for p in self._workers if p.poll() is None]

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs the workers run now (every application's)."""
        workers = set(self.worker_pids())
        return [pid for pid, ppid, args in _processes()
                if ppid in workers and "CoarseGrainedExecutorBackend" in args]

    def executor_of(self, pid: int) -> int:
        """The executor JVM that runs process ``pid`` (a Python worker: ``os.getpid()`` in a task),
        found by walking up its parents; for :meth:`kill_executor` of the one running a given task.

        Raises:
            LookupError: ``pid`` is not running under an executor of this cluster.
        """
        executors = set(self.executor_pids())
        parents = {p: pp for p, pp, _ in _processes()}
        seen: set[int] = set()
        at = pid
        while at in parents and at not in seen:
            if at in executors:
                return at
            seen.add(at)
            at = parents[at]
        raise LookupError(f"process {pid} does not run under an executor of this cluster")

    def kill_executor(self, pid: int | None = None) -> int:
        """SIGKILL one executor JVM (``pid``, or the first found) and return its pid.

        The master notices and asks the worker for a new executor; the driver
        runs the lost tasks again.

        Raises:
            LookupError: no executor is running.
        """
        if pid is None:
            running = self.executor_pids()
            if not running:
                raise LookupError("no executor is running")
            pid = running[0]
        os.kill(pid, signal.SIGKILL)
        return pid

    def submit(self, script: str | os.PathLike[str], *args: str, conf: Mapping[str, str] | None = None,
               options: Sequence[str] = (), env: Mapping[str, str] | None = None, wait: bool = True,
               timeout: float = 600.0) -> SparkDriver:
        """Run ``spark-submit --master <this cluster> [options] script args`` (client deploy mode).

        Args:
            script: the driver program (a ``.py`` file).
            args: its arguments.
            conf: ``--conf`` properties for this application.
            options: other ``spark-submit`` options, e.g. ``["--archives", "env.tar.gz#environment"]``.
            env: extra environment variables for the driver.
            wait: wait until the driver ends (then a non-zero exit is not raised: check ``returncode``).
            timeout: how long ``wait`` waits; the driver is killed after it.

        Raises:
            subprocess.TimeoutExpired: ``wait`` and the driver ran past ``timeout`` (it is killed).
        """
        n = len(list((self.dir / "logs").glob("driver-*.log")))
        log = self.dir / "logs" / f"driver-{n}.log"
        out = self.dir / "logs" / f"driver-{n}.out"
        cmd = [self._bin("spark-submit"), "--master", self.master_url]
        for k, v in (conf or {}).items():
            cmd += ["--conf", f"{k}={v}"]
        cmd += [*options, str(Path(script).resolve()), *args]
        driver = SparkDriver(self._spawn(cmd, log, stdout=out, env=env), log, out)
        if wait:
            try:
                driver.wait(timeout)
            except subprocess.TimeoutExpired:
                driver.kill()
                raise
        return driver

    def close(self) -> None:
        """Stop every process this object started (drivers, workers with their executors, master)."""
        self._close_processes()
        self._workers.clear()
        self._master = None

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._finalizer()


class SparkConnectServer(_SparkProcesses):
    """A Spark Connect server on 127.0.0.1 for tests; its Spark runs ``master``.

    The server's Python (``python``) is the one that must have the packages
    its queries use, natsjs-sync among them: data sources run there, not in
    the client. Not thread-safe.

    Args:
        master: the server's Spark master, ``local[2]`` by default (or a
            :attr:`SparkStandaloneCluster.master_url`).
        python: the Python of the server's Python workers; this interpreter by default.
        env, conf, base_dir: as for :class:`SparkStandaloneCluster`.

    Example::

        with SparkConnectServer() as server:
            spark = server.session()
            spark.read.format("jetstream").option("servers", url).load("ORDERS").count()
    """

    def __init__(self, master: str = "local[2]", *, python: str | None = None, env: Mapping[str, str] | None = None,
                 conf: Mapping[str, str] | None = None, base_dir: str | os.PathLike[str] | None = None):
        # local[n] runs the tasks inside the server's JVM: it needs more than a driver's heap.
        super().__init__(python, env, {"spark.driver.memory": "1g", **(conf or {})}, base_dir,
                         "natsjs-spark-connect-")
        # spark-submit runs the Connect server with the daemons' heap setting, not spark.driver.memory.
        if not (env and "SPARK_DAEMON_MEMORY" in env):
            self.env["SPARK_DAEMON_MEMORY"] = "1g"
        self.master = master
        self.port = free_port()
        self._server: subprocess.Popen[bytes] | None = None
        self._sessions: list[Any] = []

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``, for ``SparkSession.builder.remote(...)``."""
        return f"sc://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 120.0) -> SparkConnectServer:
        """Start the server and return once it accepts connections.

        Raises:
            RuntimeError: the server exited (its log is in the message).
            TimeoutError: not ready within ``timeout`` seconds.
        """
        reason = spark_skip_reason()
        if reason:
            raise RuntimeError(reason)
        _write_conf(self.conf_dir, self.conf)
        log = self.dir / "logs" / "connect-server.log"
        self._server = self._spawn(
            [self._bin("spark-submit"), "--master", self.master, "--name", "natsjs-spark-connect",
             "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}",
             "--conf", f"spark.connect.grpc.binding.port={self.port}"], log)
        try:
            _wait(lambda: _port_open(self.port), timeout, "spark connect server", self._server, log)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def log(self) -> Path:
        """The server's log file."""
        return self.dir / "logs" / "connect-server.log"

    def session(self) -> Any:
        """A new remote ``SparkSession`` on this server (closed by :meth:`close`)."""
        from pyspark.sql.connect.session import SparkSession as RemoteSession

        session = RemoteSession.builder.remote(self.url).create()
        self._sessions.append(session)
        return session

    def close(self) -> None:
        """Stop the client sessions made by :meth:`session`, then the server."""
        for session in self._sessions:
            with contextlib.suppress(Exception):
                session.stop()
        self._sessions.clear()
        self._close_processes()
        self._server = None

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._finalizer()
