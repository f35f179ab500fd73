"""A one-file Django project sharing one natsjs_sync Client across threads.

Django has no app factory, so the client lives in a module-level holder that
connects on first use (under a lock, so concurrent first requests make one
connection) and is closed at exit. The holder outlives any outage: its client
never stops reconnecting (``max_reconnect_attempts=-1``), and a client that
closed anyway (closed by hand, refused by the server) is replaced by a new one
on the next request. Meanwhile requests are answered 503/504, not 500. The same holder is what a Celery task or a
management command would use; in a pre-fork server each worker process gets
its own connection (a client inherited through ``fork`` reconnects on first use).

The routes are those of ``flask_app.py``: ``POST /orders``, ``GET /price/<sku>``,
``GET /whoami``. Run it with::

    NATS_URL=nats://127.0.0.1:4222 python examples/django_app.py runserver 127.0.0.1:8000
    NATS_URL=nats://127.0.0.1:4222 gunicorn -w 4 --chdir examples django_app:application
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="example-only",
        ROOT_URLCONF=__name__,
        ALLOWED_HOSTS=["127.0.0.1", "localhost", "testserver"],
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        DATABASES={},
    )
    django.setup()

from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

import natsjs_sync as nats

_lock = threading.Lock()
_client: nats.Client | None = None


def get_client() -> nats.Client:
    """The process's shared client: connected on first use, made again if it closed."""
    global _client
    with _lock:
        if _client is None or _client.is_closed:
            nc = nats.connect(os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name="django-app",
                              max_reconnect_attempts=-1)  # never give up on the servers
            try:
                nc.jetstream().create_or_update_stream(name="ORDERS", subjects=["orders.>"])
            except BaseException:
                nc.close()
                raise
            if _client is None:
                atexit.register(_close_client)
            _client = nc
        return _client


def _close_client() -> None:
    with _lock:
        if _client is not None:
            _client.close()


def _errors(view):  # type: ignore[no-untyped-def]
    """NATS failures as HTTP answers instead of 500 pages."""

    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
        try:
            return view(request, *args, **kwargs)  # type: ignore[no-any-return]
        except nats.NoRespondersError as err:
            return JsonResponse({"error": f"service unavailable: {err}"}, status=503)
        except nats.TimeoutError as err:
            return JsonResponse({"error": f"timed out: {err}"}, status=504)
        except nats.JetStreamError as err:
            return JsonResponse({"error": str(err)}, status=502)
        except nats.NatsError as err:  # no server reachable, connection lost ...
            return JsonResponse({"error": f"NATS unavailable: {err}"}, status=503)

    return wrapped


@csrf_exempt
@require_POST
@_errors
def place_order(request: HttpRequest) -> JsonResponse:
    try:
        order = json.loads(request.body)
    except ValueError:
        order = None
    if not isinstance(order, dict) or "id" not in order:
        return JsonResponse({"error": "an order needs an id"}, status=400)
    ack = get_client().jetstream().publish("orders.new", request.body, msg_id=f"order-{order['id']}")
    return JsonResponse({"stream": ack.stream, "seq": ack.seq, "duplicate": ack.duplicate}, status=201)


@require_GET
@_errors
def price(request: HttpRequest, sku: str) -> JsonResponse:
    reply = get_client().request(f"pricing.{sku}", b"", timeout=2.0)
    return JsonResponse({"sku": sku, "price": reply.data.decode()})


@require_GET
@_errors
def whoami(request: HttpRequest) -> JsonResponse:
    nc = get_client()
    nc.flush(timeout=2.0)
    return JsonResponse({"pid": os.getpid(), "client_id": nc.client_id})


urlpatterns = [
    path("orders", place_order),
    path("price/<str:sku>", price),
    path("whoami", whoami),
]

application = get_wsgi_application()

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
