"""A Flask app for gunicorn ``--preload`` whose master forks its workers while a thread of the
master is in the middle of connecting, holding the per-process client's lock.

As an app that warms its connection up in the background at import would. The master's
thread waits in an ``on_connect`` callable (the lock held) until gunicorn has stopped; the
app is handed to gunicorn only once that thread holds the lock, so every worker is forked
with the lock held by a thread the worker does not have.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from flask import Flask, jsonify

import natsjs_sync as nats
from natsjs_sync.contrib.flask import NATS

MASTER = os.getpid()
_holding = threading.Event()
_never = threading.Event()  # set by nobody: the master's connect stays under way
nats_ext = NATS()


@nats_ext.on_connect
def hold_the_lock_in_the_master(nc: nats.Client) -> None:
    if os.getpid() == MASTER:
        _holding.set()
        _never.wait(600)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["NATS_SERVERS"] = os.environ["NATS_URL"]
    app.config["NATS_HEALTH_URL"] = "/healthz/nats"
    app.config["NATS_HEALTH"] = {"timeout": 10.0, "jetstream": False}
    nats_ext.init_app(app)

    @app.get("/whoami")
    def whoami() -> Any:
        nc = nats_ext.client
        nc.flush(timeout=10)
        return jsonify(pid=os.getpid(), client_id=nc.client_id)

    threading.Thread(target=nats_ext.holder(app), name="warm-up", daemon=True).start()
    if not _holding.wait(60):
        raise RuntimeError("the warm-up connection did not start")
    return app
