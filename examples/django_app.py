"""A one-file Django project using the ``natsjs_sync.contrib.django`` app.

The app holds one client per process (:func:`~natsjs_sync.contrib.django.get_client`):
made on first use, so each pre-forked gunicorn worker and each Celery pool
process has its own connection without any hook; reconnecting for ever;
replaced if it closes anyway; closed at exit. Its middleware answers a NATS
failure with 503/504 instead of a 500 page, and ``GET /healthz/nats`` serves
the readiness check (``{"status": ...}``). The server comes from ``NATS_URL``; ``NATS_CALL_TIMEOUT``
(seconds, default 2) bounds each NATS call of a request and the health check.

The same file declares a worker: ``fulfil_orders`` takes each stored order
from the ``fulfil`` consumer, records its fulfilment in the FULFILMENTS stream
and acknowledges it. ``python examples/django_app.py nats_worker`` runs it
until SIGTERM, then drains (orders received are finished and acknowledged
before the process exits). ``FULFIL_SECONDS`` simulates slow work.

The routes are those of ``flask_app.py``: ``POST /orders``, ``GET /price/<sku>``,
``GET /whoami``, ``GET /healthz/nats``. Run it with::

    NATS_URL=nats://127.0.0.1:4222 python examples/django_app.py runserver 127.0.0.1:8000
    NATS_URL=nats://127.0.0.1:4222 gunicorn -w 4 --chdir examples django_app:application
    NATS_URL=nats://127.0.0.1:4222 python examples/django_app.py nats_worker
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="example-only",
        ROOT_URLCONF=__name__,
        ALLOWED_HOSTS=["127.0.0.1", "localhost", "testserver"],
        MIDDLEWARE=["natsjs_sync.contrib.django.middleware.NatsErrorMiddleware"],
        INSTALLED_APPS=["natsjs_sync.contrib.django"],
        DATABASES={},
        NATS={
            # No "servers": NATS_URL from the environment, else nats://127.0.0.1:4222.
            "options": {"name": "django-app"},
            "on_connect": [f"{__name__}.declare_streams"],
            "health": {"streams": ["ORDERS"], "consumers": ["ORDERS/fulfil"],
                       "timeout": float(os.environ.get("NATS_CALL_TIMEOUT", "2.0"))},
            "workers": [f"{__name__}.fulfil_orders"],
            "drain_timeout": 30,
        },
    )
    django.setup()

from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

import natsjs_sync as nats
from natsjs_sync.contrib.django import get_client, get_jetstream
from natsjs_sync.jetstream import ConsumeContext

# Seconds each NATS call of a request may take (the health check's is set above).
CALL_TIMEOUT = float(os.environ.get("NATS_CALL_TIMEOUT", "2.0"))


def declare_streams(nc: nats.Client) -> None:
    """Run with each new client, before anything uses it."""
    js = nc.jetstream()
    js.create_or_update_stream(name="ORDERS", subjects=["orders.>"])
    js.create_or_update_stream(name="FULFILMENTS", subjects=["fulfilments.>"])
    js.create_or_update_consumer("ORDERS", durable_name="fulfil", filter_subject="orders.new",
                                 ack_policy="explicit", ack_wait=30.0)


def fulfil_orders(nc: nats.Client) -> ConsumeContext:
    """The worker: fulfil each order, then acknowledge it (started by ``manage.py nats_worker``)."""
    js = nc.jetstream()
    work = float(os.environ.get("FULFIL_SECONDS", "0"))

    def fulfil(msg: nats.Msg) -> None:
        order = json.loads(msg.data)
        if work:
            time.sleep(work)  # stands for real work
        token = re.sub(r"[^A-Za-z0-9_-]", "_", str(order["id"]))
        js.publish(f"fulfilments.{token}", msg.data)  # waits for the stream's ack
        msg.ack_sync()  # acknowledged: never delivered again

    return js.consumer("ORDERS", "fulfil").consume(fulfil, max_messages=20)


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    try:
        order = json.loads(request.body)
    except ValueError:
        order = None
    if not isinstance(order, dict) or "id" not in order:
        return JsonResponse({"error": "an order needs an id"}, status=400)
    ack = get_jetstream().publish("orders.new", request.body, msg_id=f"order-{order['id']}")
    return JsonResponse({"stream": ack.stream, "seq": ack.seq, "duplicate": ack.duplicate}, status=201)


@require_GET
def price(request: HttpRequest, sku: str) -> JsonResponse:
    reply = get_client().request(f"pricing.{sku}", b"", timeout=CALL_TIMEOUT)
    return JsonResponse({"sku": sku, "price": reply.data.decode()})


@require_GET
def whoami(request: HttpRequest) -> JsonResponse:
    nc = get_client()
    nc.flush(timeout=CALL_TIMEOUT)
    return JsonResponse({"pid": os.getpid(), "client_id": nc.client_id})


urlpatterns = [
    path("orders", place_order),
    path("price/<str:sku>", price),
    path("whoami", whoami),
    path("healthz/nats", include("natsjs_sync.contrib.django.urls")),
]

application = get_wsgi_application()

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
