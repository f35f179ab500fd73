"""Django app: settings ``NATS = {...}``, a per-process client, system checks, a health view, a worker command.

Add ``"natsjs_sync.contrib.django"`` to ``INSTALLED_APPS`` and, optionally::

    NATS = {
        "servers": ["nats://127.0.0.1:4222"],        # default: NATS_URL, else nats://127.0.0.1:4222
        "options": {"name": "shop", "user_credentials": "/etc/nats/shop.creds"},
        "on_connect": ["shop.nats.declare_streams"],   # run with each new client
        "health": {"streams": ["ORDERS"], "consumers": ["ORDERS/fulfil"]},
        "health_details": "shop.auth.is_operator",    # who sees more than the status (default: nobody)
        "workers": ["shop.workers.fulfil_orders"],    # started by ``manage.py nats_worker``
        "drain_timeout": 30,
    }

- :func:`get_client` gives the process's client: made on first use (so a
  pre-fork server's workers and Celery's pool processes each get their own
  without any hook), reconnecting for ever, replaced when closed, closed at exit.
- The settings (types, values, dotted paths) are checked when a serving
  process starts (gunicorn, uwsgi, an ASGI server, Celery: ``AppConfig.ready``
  raises ``ImproperlyConfigured`` naming every mistake, so the server stops),
  and by the system checks (``manage.py check``, ``runserver``, ``migrate``,
  ``nats_worker``), which report each mistake as error ``natsjs_sync.E001``.
- ``path("healthz/nats", include("natsjs_sync.contrib.django.urls"))`` serves
  :func:`natsjs_sync.health.check_health` as a readiness probe (200 or 503,
  JSON ``{"status": ...}``; the details for whom ``health_details`` allows).
- ``"natsjs_sync.contrib.django.middleware.NatsErrorMiddleware"`` answers a
  :class:`~natsjs_sync.NatsError` a view lets escape with 503/504/502 JSON.
- ``manage.py nats_worker`` calls each ``workers`` callable with the client
  (each subscribes, consumes or adds a service, and returns), then runs until
  SIGTERM or SIGINT, and drains: no more messages are pulled, those received
  are handled and acknowledged, then the connection closes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..process import ProcessClient, Settings, parse_settings

if TYPE_CHECKING:
    from ...client import Client
    from ...health import Health
    from ...jetstream import JetStream

__all__ = ["close_client", "get_client", "get_holder", "get_jetstream", "get_settings", "health"]

_lock = threading.Lock()
_holder: ProcessClient | None = None
_settings: Settings | None = None


def get_settings() -> Settings:
    """The validated ``settings.NATS`` (an absent setting is all defaults).

    Raises:
        SettingsError: the setting is wrong (the system checks report the same at start-up).
    """
    from django.conf import settings

    return parse_settings(getattr(settings, "NATS", None))


def _current_settings() -> Settings:
    """The validated ``settings.NATS``, read once (again after :func:`close_client`).

    Raises:
        SettingsError: the setting is wrong.
    """
    global _settings
    settings = _settings
    if settings is None:
        with _lock:
            if _settings is None:
                _settings = get_settings()
            settings = _settings
    return settings


def get_holder() -> ProcessClient:
    """The :class:`~natsjs_sync.contrib.process.ProcessClient` of this process, made from the settings once."""
    global _holder
    holder = _holder
    if holder is None:
        settings = _current_settings()
        with _lock:
            if _holder is None:
                _holder = ProcessClient.from_settings(settings)
            holder = _holder
    return holder


def get_client() -> Client:
    """The process's client (connected on first use, replaced when closed).

    Raises:
        NoServersError: no server can be reached now.
        SettingsError: ``settings.NATS`` is wrong.
    """
    return get_holder()()


def get_jetstream(**kwargs: Any) -> JetStream:
    """``get_client().jetstream(**kwargs)`` (cheap; one per request is fine)."""
    return get_client().jetstream(**kwargs)


def health(**overrides: Any) -> Health:
    """:func:`natsjs_sync.health.check_health` of the process's client, with the ``health`` settings."""
    return get_holder().health(**overrides)


def close_client() -> None:
    """Close the process's client and forget the settings (they are read again on next use)."""
    global _holder, _settings
    with _lock:
        holder, _holder, _settings = _holder, None, None
    if holder is not None:
        holder.close()
