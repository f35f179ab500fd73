"""A Flask app that shares one natsjs_sync Client across its request threads.

The :class:`~natsjs_sync.contrib.flask.NATS` extension holds one client per
process: every request thread publishes and requests through it (the client is
thread safe, and publishes from concurrent requests are coalesced into few
socket writes). It connects on the first request, not when the app is made, so
each pre-forked worker of gunicorn (also with ``--preload``) has its own
connection without any ``post_fork`` hook. It never stops reconnecting, is
replaced if it closes anyway (closed by hand, refused by the server), and is
closed at exit. While NATS is away, requests are answered 503/504, not 500,
and ``GET /healthz/nats`` says so (503) to the load balancer: a readiness
probe, answering ``{"status": ...}`` and nothing more.

Routes:

* ``POST /orders`` (JSON with an ``id``): JetStream publish to ``orders.new``
  with the order id as message id (a retried POST stores nothing twice);
* ``GET /price/<sku>``: a request to the ``pricing.<sku>`` service;
* ``GET /whoami``: this process's pid and its connection's server-side id;
* ``GET /healthz/nats``: the readiness check (connection, round trip, JetStream, the ORDERS stream).

``NATS_CALL_TIMEOUT`` (seconds, default 2) bounds each NATS call of a request
and the health check.

Run it with Flask's threaded development server, or under gunicorn::

    NATS_URL=nats://127.0.0.1:4222 flask --app examples/flask_app.py run --with-threads
    NATS_URL=nats://127.0.0.1:4222 gunicorn -w 4 --chdir examples 'flask_app:create_app()'
"""

from __future__ import annotations

import json
import os
from typing import Any

from flask import Flask, jsonify, request

import natsjs_sync as nats
from natsjs_sync.contrib.flask import NATS

nats_ext = NATS()


@nats_ext.on_connect
def declare_streams(nc: nats.Client) -> None:
    """Run with each new client, before any request uses it."""
    nc.jetstream().create_or_update_stream(name="ORDERS", subjects=["orders.>"])


def create_app(nats_url: str | None = None) -> Flask:
    app = Flask(__name__)
    app.config["NATS_SERVERS"] = nats_url or os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
    app.config["NATS_OPTIONS"] = {"name": "flask-app"}
    # Seconds each NATS call of a request (and the health check) may take.
    call_timeout = float(os.environ.get("NATS_CALL_TIMEOUT", "2.0"))
    app.config["NATS_HEALTH"] = {"streams": ["ORDERS"], "timeout": call_timeout}
    app.config["NATS_HEALTH_URL"] = "/healthz/nats"  # no health endpoint unless the app asks for one
    nats_ext.init_app(app)  # checks the settings; connects on first use, in each process

    @app.post("/orders")
    def place_order() -> Any:
        order = request.get_json(force=True, silent=True)
        if not isinstance(order, dict) or "id" not in order:
            return jsonify(error="an order needs an id"), 400
        js = nats_ext.jetstream(timeout=5.0)  # cheap: a context per request is fine
        ack = js.publish("orders.new", json.dumps(order).encode(), msg_id=f"order-{order['id']}")
        return jsonify(stream=ack.stream, seq=ack.seq, duplicate=ack.duplicate), 201

    @app.get("/price/<sku>")
    def price(sku: str) -> Any:
        # A NatsError escaping a view is answered by the extension: 503, or 504 for a timeout.
        reply = nats_ext.client.request(f"pricing.{sku}", b"", timeout=call_timeout)
        return jsonify(sku=sku, price=reply.data.decode())

    @app.get("/whoami")
    def whoami() -> Any:
        nc = nats_ext.client
        nc.flush(timeout=call_timeout)
        return jsonify(pid=os.getpid(), client_id=nc.client_id)

    return app
