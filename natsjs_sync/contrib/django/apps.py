"""The app's configuration: checks ``settings.NATS`` at start-up, registers the system checks, and follows changes."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "NATS":  # tests' override_settings: the next get_client() uses the new settings
        from . import close_client

        close_client()


class NatsjsSyncConfig(AppConfig):
    """``natsjs_sync.contrib.django`` (label ``natsjs_sync``)."""

    name = "natsjs_sync.contrib.django"
    label = "natsjs_sync"
    verbose_name = "NATS (natsjs_sync)"

    def ready(self) -> None:
        """Check the types and values of ``settings.NATS``: a server that runs no system
        checks (gunicorn, uwsgi) stops here on a mistake, not at each request.

        Dotted paths are imported by the system checks and on first use, not here: the
        module they name may be the one still running ``django.setup()``.

        Raises:
            ImproperlyConfigured: ``settings.NATS`` is wrong (every mistake, named).
        """
        from django.conf import settings

        from ..process import SettingsError, parse_settings
        from . import checks  # noqa: F401  (registers the checks)

        setting_changed.connect(_settings_changed, dispatch_uid="natsjs_sync.settings_changed")
        try:
            parse_settings(getattr(settings, "NATS", None), import_paths=False)
        except SettingsError as exc:
            raise ImproperlyConfigured(str(exc)) from exc
