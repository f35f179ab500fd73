"""System checks: a bad ``settings.NATS`` is reported at start-up, each mistake as ``natsjs_sync.E001``."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from ..process import SettingsError, parse_settings


@register("nats")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate ``settings.NATS``: keys, server URLs, the types and values of connect and health
    options, dotted paths (imported).

    Nothing is sent to a server: a check must not depend on one being up.

    Returns:
        One :class:`~django.core.checks.Error` per problem (none when the setting is right).
    """
    from django.conf import settings

    try:
        parse_settings(getattr(settings, "NATS", None))
    except SettingsError as exc:
        return [Error(problem, hint="See the NATS setting in docs/web.rst.", obj="settings.NATS",
                      id="natsjs_sync.E001") for problem in exc.problems]
    return []
