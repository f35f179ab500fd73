"""The app's configuration: checks ``settings.NATS`` when Django starts, registers the system checks,
and follows changes."""

from __future__ import annotations

import inspect
import sys
from typing import Any

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "NATS":  # tests' override_settings: the next get_client() uses the new settings
        from . import close_client

        close_client()


def _for_management_command() -> bool:
    """Whether ``django.setup()`` runs for a management command (``manage.py``, ``django-admin``).

    Such a command runs the system checks itself when it needs them (``check``,
    ``runserver``, ``migrate``, ``nats_worker``: every mistake reported as
    ``natsjs_sync.E001``); one that does not (``diffsettings``, ``shell``) has
    no use for NATS and must still run. Told by the command-line utility's
    ``execute`` being a caller of this start-up.
    """
    management = sys.modules.get("django.core.management")
    if management is None:
        return False
    execute = management.ManagementUtility.execute.__code__
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code is execute:
            return True
        frame = frame.f_back
    return False


class NatsjsSyncConfig(AppConfig):
    """``natsjs_sync.contrib.django`` (label ``natsjs_sync``)."""

    name = "natsjs_sync.contrib.django"
    label = "natsjs_sync"
    verbose_name = "NATS (natsjs_sync)"

    def ready(self) -> None:
        """Check ``settings.NATS`` as a serving process starts: its types and values, by the rules
        :func:`natsjs_sync.connect` and :func:`~natsjs_sync.health.check_health` apply, and its
        dotted paths (imported), so a server that runs no system checks (gunicorn, uwsgi, an
        ASGI server, a Celery worker) stops here on a mistake instead of failing every request.

        A management command is left to the system checks, which report each mistake as
        ``natsjs_sync.E001``; commands that run none and use no NATS (``diffsettings``) still run.

        Raises:
            ImproperlyConfigured: ``settings.NATS`` is wrong (every mistake, named).
        """
        from django.conf import settings

        from ..process import SettingsError, parse_settings
        from . import checks  # noqa: F401  (registers the checks)

        setting_changed.connect(_settings_changed, dispatch_uid="natsjs_sync.settings_changed")
        if _for_management_command():
            return
        try:
            parse_settings(getattr(settings, "NATS", None))
        except SettingsError as exc:
            raise ImproperlyConfigured(str(exc)) from exc
