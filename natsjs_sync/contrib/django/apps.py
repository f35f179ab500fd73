"""The app's configuration: registers the system checks and follows changes of ``settings.NATS``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
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
        from . import checks  # noqa: F401  (registers the checks)

        setting_changed.connect(_settings_changed, dispatch_uid="natsjs_sync.settings_changed")
