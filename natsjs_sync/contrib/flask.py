"""Flask extension: one NATS client per process, a health endpoint, outages as 503/504 answers.

::

    from natsjs_sync.contrib.flask import NATS

    nats = NATS()

    def create_app():
        app = Flask(__name__)
        app.config["NATS_SERVERS"] = "nats://127.0.0.1:4222"
        nats.init_app(app)
        return app

    @bp.post("/orders")
    def place_order():
        ack = nats.jetstream().publish("orders.new", request.data, msg_id=...)

Settings (``app.config``), each optional:

- ``NATS_SERVERS``: a URL, comma-separated URLs or a list (default: the
  ``NATS_URL`` environment variable, else ``nats://127.0.0.1:4222``);
- ``NATS_OPTIONS``: more keywords of :func:`natsjs_sync.connect`; ``name``
  defaults to the app's name, ``max_reconnect_attempts`` to -1 (for ever);
- ``NATS_ON_CONNECT``: callables or dotted paths run with each new client;
- ``NATS_HEALTH``: keywords of :func:`natsjs_sync.health.check_health`
  (``streams``, ``consumers``, ``timeout`` ...);
- ``NATS_HEALTH_URL``: the path of the health endpoint, a readiness probe
  (default ``None``: no endpoint; the app chooses to have one, and where);
- ``NATS_HEALTH_DETAILS``: who sees what each check measured (server URL and
  id, usage, errors): ``False`` (default: nobody, the body is
  ``{"status": ...}``), ``True``, or a callable (or its dotted path) given the
  request, answering whether this caller may;
- ``NATS_ERROR_HANDLERS``: answer a :class:`~natsjs_sync.NatsError` that a view
  lets escape with JSON ``{"error": ...}`` and 503/504/502 (default True).

:meth:`NATS.init_app` checks their keys, types and values and raises
:class:`~natsjs_sync.contrib.settings.SettingsError` naming every mistake, so a
bad setting stops the app at start-up, not at its first request. It does not
connect: the client is made by the first request (or health probe) of each
process, which is what a pre-fork server (gunicorn, also with ``--preload``)
needs; it is replaced when closed and closed at exit
(:class:`~natsjs_sync.contrib.process.ProcessClient`).

The extension object is thread-safe. Flask is imported here only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app, has_app_context, jsonify, request

from ..errors import NatsError
from .process import OnConnect, ProcessClient, SettingsError, error_status, health_answer, parse_settings
from .settings import check_paths

if TYPE_CHECKING:
    from flask.typing import ResponseReturnValue

    from ..client import Client
    from ..health import Health
    from ..jetstream import JetStream

__all__ = ["NATS", "get_client"]

_EXTENSION = "nats"
#: The keys of the shared settings, read from ``NATS_<KEY>`` (the others are Django's).
_KEYS = ("servers", "options", "on_connect", "health", "health_details")


class NATS:
    """The Flask extension: ``NATS(app)``, or ``NATS()`` then ``init_app(app)`` in a factory.

    Args:
        app: the app to set up now (or later with :meth:`init_app`).
        on_connect: callables run with each new client of every app set up by
            this extension (after ``NATS_ON_CONNECT``); :meth:`on_connect`
            adds more as a decorator.
    """

    def __init__(self, app: Flask | None = None, *, on_connect: list[OnConnect] | None = None):
        self._app = app
        self._on_connect: list[OnConnect] = list(on_connect or [])
        self._holders: list[ProcessClient] = []
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read and check ``app.config``, register the health endpoint and the error handlers.

        Args:
            app: the Flask app.

        Raises:
            SettingsError: a setting is wrong (every problem is named).
        """
        config = app.config
        raw = {key: config[f"NATS_{key.upper()}"] for key in _KEYS if config.get(f"NATS_{key.upper()}") is not None}
        problems: list[str] = []
        try:
            settings = parse_settings(raw, framework="flask")
        except SettingsError as exc:
            problems += exc.problems
        health_url = config.get("NATS_HEALTH_URL")
        if health_url is not None and (not isinstance(health_url, str) or not health_url.startswith("/")):
            problems.append(f"NATS_HEALTH_URL is a path starting with '/', or None, not {health_url!r}")
        check_paths(self._on_connect, "NATS(on_connect=...)", problems, callables=True)
        error_handlers = config.get("NATS_ERROR_HANDLERS", True)
        if not isinstance(error_handlers, bool):
            problems.append(f"NATS_ERROR_HANDLERS is True or False, not {error_handlers!r}")
        if problems:
            raise SettingsError(problems)
        holder = ProcessClient.from_settings(replace(settings, options={"name": app.name, **settings.options},
                                                     on_connect=(*settings.on_connect, *self._on_connect)))
        self._holders.append(holder)
        app.extensions[_EXTENSION] = holder

        if health_url is not None:
            details = settings.health_details

            def health_view() -> ResponseReturnValue:
                body, status = health_answer(holder, details, request)
                # A probe's answer is about now: no proxy may serve an old one.
                return jsonify(body), status, {"Cache-Control": "no-store"}

            # GET, and HEAD with the same status and headers (Flask answers HEAD for GET routes).
            app.add_url_rule(health_url, "nats_health", health_view, methods=["GET"])
        if error_handlers:
            app.register_error_handler(NatsError, _answer_error)

    def on_connect(self, fn: OnConnect) -> OnConnect:
        """Decorator: run ``fn(client)`` with each new client (declare streams, services ...)."""
        self._on_connect.append(fn)
        for holder in self._holders:
            holder.add_on_connect(fn)
        return fn

    def holder(self, app: Flask | None = None) -> ProcessClient:
        """The :class:`~natsjs_sync.contrib.process.ProcessClient` of ``app``.

        Args:
            app: the app; default: the current app, else the one given to the constructor.

        Raises:
            RuntimeError: no app, or the app was not set up with :meth:`init_app`.
        """
        if app is None:
            app = current_app._get_current_object() if has_app_context() else self._app  # type: ignore[attr-defined]
        if app is None:
            raise RuntimeError("no Flask app: call this in an app context, or pass the app")
        try:
            holder: ProcessClient = app.extensions[_EXTENSION]
        except KeyError:
            raise RuntimeError(f"NATS.init_app() was not called for app {app.name!r}") from None
        return holder

    @property
    def client(self) -> Client:
        """The current app's client in this process (connected on first use).

        Raises:
            NoServersError: no server can be reached now.
        """
        return self.holder()()

    def jetstream(self, **kwargs: Any) -> JetStream:
        """``client.jetstream(**kwargs)``: a JetStream context (cheap; one per request is fine)."""
        return self.client.jetstream(**kwargs)

    def health(self, **overrides: Any) -> Health:
        """The health of the current app's client (see :func:`natsjs_sync.health.check_health`)."""
        return self.holder().health(**overrides)


def _answer_error(err: Exception) -> ResponseReturnValue:
    assert isinstance(err, NatsError)
    status, message = error_status(err)
    return jsonify(error=message), status


def get_client(app: Flask | None = None) -> Client:
    """The client of ``app`` (default: the current app) in this process.

    Args:
        app: an app set up with :meth:`NATS.init_app`; default: the current app.

    Raises:
        RuntimeError: no app, or the app was not set up with ``init_app``.
        NoServersError: no server can be reached now.
    """
    return NATS(None).holder(app)()

