"""The settings of the web integrations, checked once at start-up by one validator.

Flask reads them from ``app.config`` (``NATS_SERVERS``, ``NATS_OPTIONS`` ...),
Django from ``settings.NATS`` (``{"servers": ..., "options": ...}``); both hand
them to :func:`parse_settings`, and :class:`~natsjs_sync.contrib.process.ProcessClient`
checks its arguments with the same rules. Keys, types and values are checked
before anything connects: a connect option by the rules :func:`natsjs_sync.connect`
applies, a health option by those of :func:`natsjs_sync.health.check_health`.
A wrong value stops the app when it starts (Flask's ``init_app``, Django's
``AppConfig.ready`` and system checks), instead of failing every request and
every health probe later.

Every mistake is reported at once, each naming the setting as it is written
(``NATS_HEALTH['max_usage']`` for Flask, ``NATS['options']['connect_timeout']``
for Django), and never showing a secret: a server URL's credentials are masked,
and no value of a connect option is shown (credentials live there).

What depends on the machine the app runs on is left to the connection: the
files of ``nkeys_seed``, ``user_credentials`` and ``context`` are read when the
client connects, so a check at build time does not need them.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import natsjs_sync

from .._core.options import DEFAULT_SERVER, ConnectOptions
from .._core.pool import parse_server_url
from .._redact import redact, split_server_urls
from ..errors import NatsError
from ..health import check_health, check_options

__all__ = ["SETTINGS_KEYS", "Settings", "SettingsError", "import_callable", "parse_settings", "secret_values"]

#: The keys of the settings mapping (Django's ``NATS``; Flask's ``NATS_<KEY>`` in upper case).
SETTINGS_KEYS = ("servers", "options", "on_connect", "health", "health_details", "workers", "drain_timeout")

#: How the settings are spelled where the user wrote them: Flask's ``NATS_OPTIONS``,
#: Django's ``NATS['options']``, or plain ``options`` (arguments of ProcessClient).
Framework = Literal["flask", "django", "python"]

_CONNECT_OPTIONS = frozenset(
    name for name, p in inspect.signature(natsjs_sync.connect).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY)
_HEALTH_OPTIONS = frozenset(
    name for name, p in inspect.signature(check_health).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY)
#: Read from files (or the nats CLI's configuration) when the client connects: only their type is checked here.
_FILE_OPTIONS = frozenset({"nkeys_seed", "user_credentials", "context"})
#: Credentials are checked together: one may need another (``user_jwt_cb`` needs ``signature_cb``).
_CREDENTIAL_OPTIONS = frozenset({"user", "password", "token", "token_cb", "user_info_cb", "user_jwt_cb",
                                 "signature_cb"})


class SettingsError(ValueError):
    """The settings are wrong; ``problems`` lists each mistake in words.

    No secret is quoted: a URL's password, nkey seeds, JWTs and the ``secrets``
    given (the settings' password, token and seed) are masked in every problem.
    """

    def __init__(self, problems: Collection[str], secrets: Iterable[str | None] = ()):
        secrets = list(secrets)
        self.problems = [redact(problem, secrets) for problem in problems]
        super().__init__("bad NATS settings: " + "; ".join(self.problems))


@dataclass(frozen=True)
class Settings:
    """The validated settings of an integration. Immutable.

    Attributes:
        servers: server URLs; ``None``: ``NATS_URL`` from the environment, else
            ``nats://127.0.0.1:4222`` (the default of :func:`natsjs_sync.connect`).
        options: more keywords of :func:`natsjs_sync.connect`.
        on_connect: callables (or their dotted paths) run with each new client
            before it is handed out (declare streams there); if one raises,
            the client is closed and the error raised to the caller.
        health: keywords of :func:`natsjs_sync.health.check_health`.
        health_details: who sees the details of the health endpoint's answer
            (what each check measured: server URL and id, usage, errors):
            ``False`` (nobody: the body is the status alone), ``True``
            (everybody), or a callable (or its dotted path) given the request,
            answering whether this caller may.
        workers: dotted paths of callables taking the client, started by the
            Django ``nats_worker`` command.
        drain_timeout: seconds a worker's drain may take when it is told to stop.
    """

    servers: tuple[str, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    on_connect: tuple[str | Callable[..., object], ...] = ()
    health: Mapping[str, Any] = field(default_factory=dict)
    health_details: bool | str | Callable[[Any], object] = False
    workers: tuple[str, ...] = ()
    drain_timeout: float = 30.0


def import_callable(spec: str | Callable[..., Any]) -> Callable[..., Any]:
    """The callable named by ``"package.module.attribute"`` (or ``"package.module:attribute"``).

    Args:
        spec: a dotted path, or a callable (returned as it is).

    Raises:
        ImportError: the module or attribute is not there.
        TypeError: what it names cannot be called.
    """
    if callable(spec):
        return spec
    module_name, sep, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module_name or not attr:
        raise ImportError(f"{spec!r} is not a dotted path 'module.attribute'")
    module = importlib.import_module(module_name)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise TypeError(f"{spec!r} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


def setting_name(key: str, framework: Framework) -> str:
    """How the user wrote the setting ``key``: ``NATS_OPTIONS``, ``NATS['options']`` or ``options``."""
    if framework == "flask":
        return f"NATS_{key.upper()}"
    if framework == "django":
        return f"NATS[{key!r}]"
    return key


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or callable(value):
        return (value,)
    return tuple(value)


def parse_settings(raw: Mapping[str, Any] | None, *, import_paths: bool = True,
                   framework: Framework = "django") -> Settings:
    """Validate a settings mapping and return it as :class:`Settings`.

    Args:
        raw: the mapping (lower-case keys, see :data:`SETTINGS_KEYS`); ``None`` is all defaults.
        import_paths: also import every dotted path (``on_connect``,
            ``health_details``, ``workers``) to check that it names a callable.
        framework: how the messages spell the settings (``NATS_OPTIONS`` for
            ``"flask"``, ``NATS['options']`` for ``"django"``).

    Raises:
        SettingsError: every mistake found, each in ``problems``.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise SettingsError([f"NATS is a dict, not {type(raw).__name__}"])
    problems: list[str] = [f"NATS: unknown key {key!r} (known: {', '.join(SETTINGS_KEYS)})"
                           for key in raw if key not in SETTINGS_KEYS]

    def name(key: str) -> str:
        return setting_name(key, framework)

    servers = check_servers(raw.get("servers"), name("servers"), problems)
    options = check_connect_options(raw.get("options"), name("options"), problems)
    health = check_health_options(raw.get("health"), name("health"), problems)

    details = raw.get("health_details", False)
    if not isinstance(details, (bool, str)) and not callable(details):
        problems.append(f"{name('health_details')} is True, False, or a callable (or its dotted path) "
                        f"given the request, not {details!r}")
        details = False

    drain_timeout = raw.get("drain_timeout", 30.0)
    if isinstance(drain_timeout, bool) or not isinstance(drain_timeout, (int, float)) or not drain_timeout > 0:
        problems.append(f"{name('drain_timeout')} is a number of seconds above 0, not {drain_timeout!r}")
        drain_timeout = 30.0

    on_connect = _as_tuple(raw.get("on_connect"))
    workers = _as_tuple(raw.get("workers"))
    _check_paths(name("on_connect"), on_connect, import_paths, problems, callables=True)
    _check_paths(name("workers"), workers, import_paths, problems, callables=False)
    if isinstance(details, str):
        _check_paths(name("health_details"), (details,), import_paths, problems, callables=False)
    if problems:
        raise SettingsError(problems, secret_values(raw.get("options")))
    return Settings(servers=servers, options=options, on_connect=on_connect, health=health,
                    health_details=details, workers=workers, drain_timeout=float(drain_timeout))


#: Connect options whose value is a secret (masked in every problem reported).
_SECRET_OPTIONS = ("password", "token", "nkeys_seed")


def secret_values(options: Any) -> list[str]:
    """The secret values among connect ``options``: what no pattern recognises in a message."""
    if not isinstance(options, Mapping):
        return []
    return [value for key in _SECRET_OPTIONS if isinstance(value := options.get(key), str)]


def _check_paths(name: str, specs: tuple[Any, ...], import_paths: bool, problems: list[str], *,
                 callables: bool) -> None:
    """Dotted paths (or, with ``callables``, callables too); imported when ``import_paths``."""
    for spec in specs:
        if callables and callable(spec):
            continue
        if not isinstance(spec, str):
            problems.append(f"{name} holds {spec!r}, not a dotted path 'module.attribute'")
        elif import_paths:
            try:
                import_callable(spec)
            except (ImportError, TypeError) as exc:
                problems.append(f"{name}: {spec!r} cannot be used: {exc}")


def check_servers(value: Any, name: str, problems: list[str]) -> tuple[str, ...] | None:
    """The server URLs of a setting (``None``: not set), each parsed as the client parses it.

    Args:
        value: a URL, comma-separated URLs or a list of them.
        name: the setting, for the messages.
        problems: where each mistake is added (credentials masked).
    """
    if value is None:
        return None
    items = [s.strip() for s in split_server_urls(value)] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        problems.append(f"{name} is a URL, a comma-separated string or a list of URLs, not "
                        + ("an empty one" if not value else type(value).__name__))
        return None
    for url in items:
        try:
            parse_server_url(url)
        except (NatsError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
    return tuple(str(s) for s in items)


def _mapping(value: Any, name: str, what: str, problems: list[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{name} is a dict of {what} keywords, not {type(value).__name__}")
        return {}
    return value


def check_connect_options(value: Any, name: str, problems: list[str]) -> dict[str, Any]:
    """Keywords of :func:`natsjs_sync.connect`, checked by the rules ``connect()`` applies,
    without connecting or reading a file.

    Args:
        value: the dict of keywords (``None``: none).
        name: the setting, for the messages (``NATS_OPTIONS``).
        problems: where each mistake is added, naming the keyword, never showing its value.

    Returns:
        The keywords (empty when they are not a dict).
    """
    options = _mapping(value, name, "natsjs_sync.connect()", problems)
    credentials: dict[str, Any] = {}
    for key, option in options.items():
        if key not in _CONNECT_OPTIONS:
            problems.append(f"{name}: natsjs_sync.connect() takes no keyword {key!r}")
        elif key in _FILE_OPTIONS:
            if option is not None and not isinstance(option, (str, os.PathLike)):
                problems.append(f"{name}[{key!r}] is a str (a path or a name), not {type(option).__name__}")
        elif key in _CREDENTIAL_OPTIONS:
            credentials[key] = option
        else:
            _build(name, f"{name}[{key!r}]", {key: option}, problems)
    for key, kinds in (("user", "a str"), ("password", "a str"), ("token", "a str or a callable")):
        secret = credentials.get(key)
        if secret is not None and not isinstance(secret, str) and not (key == "token" and callable(secret)):
            problems.append(f"{name}[{key!r}] is {kinds}, not {type(secret).__name__}")  # never the value
            del credentials[key]
    if credentials:
        _build(name, name, credentials, problems)
    return dict(options)


def _build(setting: str, where: str, options: dict[str, Any], problems: list[str]) -> None:
    """Check ``options`` as ``connect()`` does, before it opens anything."""
    try:
        ConnectOptions.build(DEFAULT_SERVER, **options)
    except (TypeError, ValueError, NatsError) as exc:
        # The client's messages name the keyword; values are not repeated (credentials live here).
        problems.append(f"{where}: {exc}")


def check_health_options(value: Any, name: str, problems: list[str]) -> dict[str, Any]:
    """Keywords of :func:`natsjs_sync.health.check_health`, checked by its own rules.

    Args:
        value: the dict of keywords (``None``: none).
        name: the setting, for the messages (``NATS_HEALTH``).
        problems: where each mistake is added, naming the keyword.

    Returns:
        The keywords as given (empty when they are not a dict).
    """
    options = _mapping(value, name, "check_health()", problems)
    for key, option in options.items():
        if key not in _HEALTH_OPTIONS:
            problems.append(f"{name}: check_health() takes no keyword {key!r}")
            continue
        try:
            check_options(**{key: option})
        except (TypeError, ValueError) as exc:
            problems.append(f"{name}[{key!r}]: {exc}")
    return dict(options)
