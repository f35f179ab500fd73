"""A Flask app that shares one natsjs_sync Client across its request threads.

One client per process is the pattern: it is thread safe, so every request
thread publishes and requests through the same connection (publishes from
concurrent requests are coalesced into few socket writes). The client is made
once by the app factory and closed when the process exits. It outlives any
outage: it never stops reconnecting (``max_reconnect_attempts=-1``), and the
app's ``client()`` holder replaces a client that closed anyway (closed by hand,
refused by the server) on the next request. Meanwhile requests are answered
503/504, not 500.

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
import threading
from typing import Any

from flask import Flask, jsonify, request

import natsjs_sync as nats


def create_app(nats_url: str | None = None) -> Flask:
    app = Flask(__name__)
    url = nats_url or os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
    lock = threading.Lock()
    held: list[nats.Client] = []

    def client() -> nats.Client:
        """The app's shared client, made again if it closed."""
        with lock:
            if not held or held[0].is_closed:
                nc = nats.connect(url, name="flask-app", max_reconnect_attempts=-1)  # never give up
                try:
                    nc.jetstream().create_or_update_stream(name="ORDERS", subjects=["orders.>"])
                except BaseException:
                    nc.close()
                    raise
                held[:] = [nc]
            return held[0]

    def close() -> None:
        with lock:
            for nc in held:
                nc.close()

    nc = client()  # at start-up: a server that is not there is an error now, not at the first request
    atexit.register(close)
    app.extensions["nats"] = client
    made_by = {"pid": os.getpid(), "client_id": nc.client_id}

    @app.post("/orders")
    def place_order() -> Any:
        order = request.get_json(force=True, silent=True)
        if not isinstance(order, dict) or "id" not in order:
            return jsonify(error="an order needs an id"), 400
        js = client().jetstream(timeout=5.0)  # cheap: a context per request is fine
        ack = js.publish("orders.new", json.dumps(order).encode(), msg_id=f"order-{order['id']}")
        return jsonify(stream=ack.stream, seq=ack.seq, duplicate=ack.duplicate), 201

    @app.get("/price/<sku>")
    def price(sku: str) -> Any:
        reply = client().request(f"pricing.{sku}", b"", timeout=2.0)
        return jsonify(sku=sku, price=reply.data.decode())

    @app.get("/whoami")
    def whoami() -> Any:
        nc = client()
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

    @app.errorhandler(nats.NatsError)
    def nats_unavailable(err: Exception) -> Any:  # no server reachable, connection lost ...
        return jsonify(error=f"NATS unavailable: {err}"), 503

    return app
