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


def call(method: str, url: str, body: Any = None, timeout: float = 20,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One HTTP request: ``(status, JSON body)``."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
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
def serving(cmd: list[str], port: int, env: dict[str, str], log: Path, *,
            cwd: Path | None = None) -> Iterator[tuple[subprocess.Popen[bytes], str | None]]:
    """Start a server process that will listen on ``port``; yields ``(process, base URL)`` once it
    listens, or ``(process, None)`` once it exited instead (a bad setting stopped it at start-up)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=out)
    try:
        def exited_or_serving() -> bool:
            if proc.poll() is not None:
                return True
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        # Another process's start-up offers nothing to wait on but its exit or its port.
        assert wait_until(exited_or_serving, timeout=60, interval=0.1), log.read_text()
        yield proc, (None if proc.poll() is not None else f"http://127.0.0.1:{port}")
    finally:
        stop(proc, timeout=15)


@contextmanager
def gunicorn_start(app: str, env: dict[str, str], log: Path, *, chdir: Path = EXAMPLES,
                   args: tuple[str, ...] = ()) -> Iterator[tuple[subprocess.Popen[bytes], str | None]]:
    """Start ``app`` under gunicorn; yields ``(process, base URL)`` once it listens, or
    ``(process, None)`` once it exited instead (a bad setting stopped it at start-up)."""
    port = free_port()
    with serving([sys.executable, "-m", "gunicorn", *args, "-b", f"127.0.0.1:{port}", "--chdir", str(chdir), app],
                 port, env, log) as started:
        yield started


@contextmanager
def uvicorn_start(app: str, env: dict[str, str], log: Path, *, cwd: Path,
                  args: tuple[str, ...] = ()) -> Iterator[tuple[subprocess.Popen[bytes], str | None]]:
    """Start the ASGI ``app`` under uvicorn (one process, one event loop), as :func:`gunicorn_start`."""
    port = free_port()
    with serving([sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                  *args, app], port, env, log, cwd=cwd) as started:
        yield started


@contextmanager
def daphne_start(app: str, env: dict[str, str], log: Path, *, cwd: Path,
                 args: tuple[str, ...] = ()) -> Iterator[tuple[subprocess.Popen[bytes], str | None]]:
    """Start the ASGI ``app`` under daphne (one process, Twisted's reactor), as :func:`uvicorn_start`."""
    port = free_port()
    with serving([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), *args, app],
                 port, env, log, cwd=cwd) as started:
        yield started


#: The project's async views (served under an ASGI server): each NATS call goes through run_sync.
_ASYNC_VIEWS = '''import json, os, threading

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from natsjs_sync.contrib.asgi import run_sync
from natsjs_sync.contrib.django import get_client, get_jetstream

CALL_TIMEOUT = float(os.environ.get("SHOP_CALL_TIMEOUT", "5"))
_lock = threading.Lock()
publishing = 0  # JetStream publishes waiting for their ack now


def _publish(subject, body, msg_id):
    global publishing
    with _lock:
        publishing += 1
    try:
        return get_jetstream(timeout=CALL_TIMEOUT).publish(subject, body, msg_id=msg_id)
    finally:
        with _lock:
            publishing -= 1


@csrf_exempt
async def place_order(request):
    order = json.loads(request.body)
    ack = await run_sync(_publish, "orders.new", request.body, f"order-{order['id']}")
    return JsonResponse({"seq": ack.seq, "duplicate": ack.duplicate}, status=201)


@csrf_exempt
async def note(request):
    await run_sync(lambda: get_client().publish("notes.new", request.body))
    return JsonResponse({}, status=202)


async def state(request):
    connected = await run_sync(lambda: get_client().is_connected)
    return JsonResponse({"connected": connected, "publishing": publishing,
                         "on_loop_thread": threading.current_thread() is threading.main_thread()})
'''

#: A Django project of its own files (not one module configuring itself, as examples/django_app.py):
#: ``settings.NATS`` comes from the environment variable SHOP_NATS (JSON).
_DJANGO_PROJECT = {
    "manage.py": ("import os, sys\n"
                  "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'shop.settings')\n"
                  "from django.core.management import execute_from_command_line\n"
                  "execute_from_command_line(sys.argv)\n"),
    "shop/__init__.py": "",
    "shop/settings.py": ("import json, os\n"
                         "SECRET_KEY = 'test-only'\nDEBUG = False\nALLOWED_HOSTS = ['*']\n"
                         "ROOT_URLCONF = 'shop.urls'\nDATABASES = {}\n"
                         "INSTALLED_APPS = ['natsjs_sync.contrib.django']\n"
                         "MIDDLEWARE = ['natsjs_sync.contrib.django.middleware.NatsErrorMiddleware']\n"
                         "NATS = json.loads(os.environ['SHOP_NATS'])\n"),
    "shop/auth.py": "def operators_only(request):\n    return request.headers.get('X-Ops') == 'yes'\n",
    "shop/nats.py": ("declared = []\n\ndef declare_streams(nc):\n    declared.append(nc)\n\n"
                     "def declare_shop(nc):\n"
                     "    nc.jetstream().create_or_update_stream(name='SHOP', subjects=['orders.>', 'notes.>'])\n"),
    "shop/urls.py": ("from django.http import HttpResponse\nfrom django.urls import include, path\n"
                     "from shop import views\n"
                     "urlpatterns = [path('healthz/nats', include('natsjs_sync.contrib.django.urls')),\n"
                     "               path('livez', lambda request: HttpResponse('ok')),\n"
                     "               path('async/orders', views.place_order),\n"
                     "               path('async/notes', views.note),\n"
                     "               path('async/state', views.state)]\n"),
    "shop/views.py": _ASYNC_VIEWS,
    "shop/asgi.py": ("import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'shop.settings')\n"
                     "from django.core.asgi import get_asgi_application\n"
                     "from natsjs_sync.contrib.asgi import NatsLifespan\n"
                     "from natsjs_sync.contrib.django import get_holder, get_settings\n"
                     "application = NatsLifespan(get_asgi_application(), get_holder,\n"
                     "                           drain_timeout=get_settings().drain_timeout)\n"),
    "shop/wsgi.py": ("import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'shop.settings')\n"
                     "from django.core.wsgi import get_wsgi_application\napplication = get_wsgi_application()\n"),
}


def django_project(root: Path, nats: dict[str, Any]) -> dict[str, str]:
    """Write a small Django project ``shop`` under ``root`` with ``settings.NATS = nats``.

    Returns:
        The environment to run its ``manage.py``, ``shop.wsgi:application`` or ``shop.asgi:application`` in.
    """
    for name, text in _DJANGO_PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {**os.environ, "SHOP_NATS": json.dumps(nats), "HOME": str(root), "DJANGO_SETTINGS_MODULE": "shop.settings",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}


@contextmanager
def gunicorn(app: str, env: dict[str, str], log: Path, workers: int = 3, preload: bool = True) -> Iterator[str]:
    """Run ``app`` under gunicorn with pre-forked ``workers``; yields the base URL once it listens."""
    # --preload: the app is made in the master, then the workers are forked from it.
    args = ("-w", str(workers), "--graceful-timeout", "5", "--timeout", "60", *(("--preload",) if preload else ()))
    with gunicorn_start(app, env, log, args=args) as (_, base):
        assert base is not None, log.read_text()
        yield base
