"""What the web tests share: loading the examples, serving a WSGI app, calling it, running gunicorn."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from socketserver import ThreadingMixIn
from types import ModuleType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from natsjs_sync.testing import free_port

from ..conftest import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 256  # 200 requests arrive at once


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


#: The header (and value) that :func:`operators_only` lets see the health details.
OPERATOR_HEADER = ("X-Operator-Token", "ops-only")


def operators_only(request: Any) -> bool:
    """A ``health_details`` callable: the details for callers that show the operators' token
    (Flask's and Django's requests both have ``headers``)."""
    name, token = OPERATOR_HEADER
    return bool(request.headers.get(name) == token)


def broken_decider(request: Any) -> bool:
    """A ``health_details`` callable that fails: the endpoint must still answer, with less."""
    raise RuntimeError("the auth backend is down")


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` afresh as ``example_<name>``."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Django finds its URLconf and the NATS settings' paths by module name
    spec.loader.exec_module(module)
    if name == "django_app":
        from django.urls import clear_url_caches

        from natsjs_sync.contrib.django import close_client

        clear_url_caches()  # resolve to this module's views, not those of an earlier load
        close_client()  # and make the client of this load from the environment of now
    return module


def serve(app: Callable[..., Any]) -> Iterator[str]:
    """Serve a WSGI app on a threaded server; yields its base URL once."""
    httpd = make_server("127.0.0.1", 0, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def call(method: str, url: str, body: Any = None, timeout: float = 20) -> tuple[int, Any]:
    """One HTTP request: ``(status, JSON body)``."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def example_env(nats_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    # HOME: newer gunicorns put a control socket under ~/.gunicorn.
    return {**os.environ, "NATS_URL": nats_url, "HOME": str(tmp_path), **extra,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))}


def stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """Signal a process and wait for it (killed after ``timeout``); its exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise


@contextmanager
def gunicorn(app: str, env: dict[str, str], log: Path, workers: int = 3, preload: bool = True) -> Iterator[str]:
    """Run ``app`` under gunicorn with pre-forked ``workers``; yields the base URL once it listens."""
    port = free_port()
    args = [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}",
            "--chdir", str(EXAMPLES), "--graceful-timeout", "5", "--timeout", "60", app]
    if preload:
        args.insert(3, "--preload")  # the app is made in the master, then the workers are forked from it
    with open(log, "w") as out:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=out)
    try:
        def serving() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        # Another process's start-up offers nothing to wait on but its port.
        assert wait_until(serving, timeout=60, interval=0.1), "gunicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc, timeout=15)
