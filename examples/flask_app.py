"""A Flask app that shares one natsjs_sync Client across its request threads.

One client per process is the pattern: it is thread safe, so every request
thread publishes and requests through the same connection (publishes from
concurrent requests are coalesced into few socket writes). The client is made
once by the app factory and closed when the process exits.

Routes:

* ``POST /orders`` (JSON with an ``id``): JetStream publish to ``orders.new``
  with the order id as message id (a retried POST stores nothing twice);
* ``GET /price/<sku>``: a request to the ``pricing.<sku>`` service;
* ``GET /whoami``: this process's pid and its connection's server-side id.

Run it with Flask's threaded development server, or under gunicorn (threads or
pre-fork workers; with ``--preload`` the client made in the master is not
shared: each worker reconnects on first use)::

    NATS_URL=nats://127.0.0.1:4222 flask --app examples/flask_app.py run --with-threads
    NATS_URL=nats://127.0.0.1:4222 gunicorn -w 4 --chdir examples 'flask_app:create_app()'
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Any

from flask import Flask, jsonify, request

import natsjs_sync as nats


def create_app(nats_url: str | None = None) -> Flask:
    app = Flask(__name__)
    nc = nats.connect(nats_url or os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name="flask-app")
    atexit.register(nc.close)
    js = nc.jetstream(timeout=5.0)
    js.create_or_update_stream(name="ORDERS", subjects=["orders.>"])
    app.extensions["nats"] = nc
    made_by = {"pid": os.getpid(), "client_id": nc.client_id}

    @app.post("/orders")
    def place_order() -> Any:
        order = request.get_json(force=True, silent=True)
        if not isinstance(order, dict) or "id" not in order:
            return jsonify(error="an order needs an id"), 400
        ack = js.publish("orders.new", json.dumps(order).encode(), msg_id=f"order-{order['id']}")
        return jsonify(stream=ack.stream, seq=ack.seq, duplicate=ack.duplicate), 201

    @app.get("/price/<sku>")
    def price(sku: str) -> Any:
        reply = nc.request(f"pricing.{sku}", b"", timeout=2.0)
        return jsonify(sku=sku, price=reply.data.decode())

    @app.get("/whoami")
    def whoami() -> Any:
        nc.flush(timeout=2.0)  # in a forked worker, the first use makes the worker's own connection
        return jsonify(pid=os.getpid(), client_id=nc.client_id, made_by=made_by)

    @app.errorhandler(nats.NoRespondersError)
    def no_responders(err: Exception) -> Any:
        return jsonify(error=f"service unavailable: {err}"), 503

    @app.errorhandler(nats.TimeoutError)
    def timed_out(err: Exception) -> Any:
        return jsonify(error=f"timed out: {err}"), 504

    @app.errorhandler(nats.JetStreamError)
    def jetstream_error(err: Exception) -> Any:
        return jsonify(error=str(err)), 502

    return app
