"""The settings of the web integrations, checked once at start-up by one validator.

Flask reads them from ``app.config`` (``NATS_SERVERS``, ``NATS_OPTIONS`` ...),
Django from ``settings.NATS`` (``{"servers": ..., "options": ...}``); both hand
them to :func:`parse_settings`, and :class:`~natsjs_sync.contrib.process.ProcessClient`
checks its arguments with it too. Keys, types and values are checked before
anything connects, each by the code that will use it: the servers and connect
options by :func:`natsjs_sync._connect.connect_options`, the very function
:func:`natsjs_sync.connect` calls before it opens anything (so the files it
names are read, and a ``NATS_URL`` the app would use is checked when no
servers are set), the health options by
:func:`natsjs_sync.health.check_options`, which
:func:`~natsjs_sync.health.check_health` calls; dotted paths are imported. A
wrong value stops the app when it starts (Flask's ``init_app``, Django's
start-up or system checks), instead of failing every request and every health
probe later. What only a server can tell (whether one answers, accepts the
credentials, requires TLS, passes the TLS handshake) is left to the connect.

Every mistake is reported at once, each naming the setting as it is written
(``NATS_HEALTH['max_usage']`` for Flask, ``NATS['options']['connect_timeout']``
for Django). No message holds the value of a connect option (the checks name
the keyword and the type, never a credential); server URLs are shown with
their credentials masked.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from .._connect import connect_options
from .._core.options import DEFAULT_SERVER, server_items
from .._core.pool import parse_server_url
from .._redact import MASK, redact, redact_urls
from ..errors import NatsError
from ..health import check_options

__all__ = ["SETTINGS_KEYS", "Settings", "SettingsError", "import_callable", "parse_settings"]

#: The keys of the settings mapping (Django's ``NATS``; Flask's ``NATS_<KEY>`` in upper case).
SETTINGS_KEYS = ("servers", "options", "on_connect", "health", "health_details", "workers", "drain_timeout")

#: How the settings are spelled where the user wrote them: Flask's ``NATS_OPTIONS``,
#: Django's ``NATS['options']``, or plain ``options`` (arguments of ProcessClient).
Framework = Literal["flask", "django", "python"]

#: What the checks of connect() and check_health() raise for a value they refuse.
_REFUSED = (TypeError, ValueError, NatsError, OSError)


class SettingsError(ValueError):
    """The settings are wrong; ``problems`` lists each mistake in words.

    No problem quotes the value of a connect option (credentials live there);
    a server URL's password, nkey seeds and JWTs are masked wherever they appear.
    """

    def __init__(self, problems: Collection[str]):
        self.problems = [redact(problem) for problem in problems]
        super().__init__("bad NATS settings: " + "; ".join(self.problems))


#: A keyword of connect() that holds a credential (password, token, nkeys_seed, user_credentials,
#: user_jwt_cb, signature_cb, ws_headers ...).
_SECRET_KEYWORD = re.compile(r"pass|secret|token|seed|jwt|cred|key|auth|sig|header", re.IGNORECASE)


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

    def __repr__(self) -> str:
        # The servers' passwords and the credentials among the options stay out (a repr ends up
        # in logs and debuggers): each URL's user info masked, each secret keyword's value too.
        options = {key: MASK if _SECRET_KEYWORD.search(key) else value for key, value in self.options.items()}
        servers = None if self.servers is None else tuple(redact_urls(url) for url in self.servers)
        return redact(f"Settings(servers={servers!r}, options={options!r}, on_connect={self.on_connect!r}, "
                      f"health={dict(self.health)!r}, health_details={self.health_details!r}, "
                      f"workers={self.workers!r}, drain_timeout={self.drain_timeout!r})")



def _split(spec: str) -> tuple[str, str]:
    """``"package.module.attribute"`` (or ``"package.module:attribute"``) -> (module, attribute)."""
    module_name, sep, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module_name or not attr:
        raise ImportError(f"{spec!r} is not a dotted path 'module.attribute'")
    return module_name, attr


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
    module_name, attr = _split(spec)
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


def parse_settings(raw: Mapping[str, Any] | None, *, import_paths: bool = True,
                   framework: Framework = "django") -> Settings:
    """Validate a settings mapping and return it as :class:`Settings`.

    Args:
        raw: the mapping (lower-case keys, see :data:`SETTINGS_KEYS`); ``None`` is all defaults.
        import_paths: also import every dotted path (``on_connect``,
            ``health_details``, ``workers``) to check that it names a callable.
            A path into a module that is still running its own body (a
            one-file app whose settings name its own functions) can only be
            resolved once that module has finished: its attribute is looked up
            when it is first used.
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

    servers, options = check_connection(raw.get("servers"), raw.get("options"), problems,
                                        servers_name=name("servers"), options_name=name("options"))
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

    on_connect = check_paths(raw.get("on_connect"), name("on_connect"), problems, callables=True,
                             import_paths=import_paths)
    workers = check_paths(raw.get("workers"), name("workers"), problems, callables=False,
                          import_paths=import_paths)
    if isinstance(details, str):
        check_paths(details, name("health_details"), problems, callables=False, import_paths=import_paths)
    if problems:
        raise SettingsError(problems)
    return Settings(servers=servers, options=options, on_connect=on_connect, health=health,
                    health_details=details, workers=workers, drain_timeout=float(drain_timeout))


def check_paths(value: Any, name: str, problems: list[str], *, callables: bool,
                import_paths: bool = True) -> tuple[Any, ...]:
    """A dotted path, or a list of them (with ``callables``, callables too), each imported
    when ``import_paths``.

    Args:
        value: the setting (``None``: none).
        name: the setting, for the messages.
        problems: where each mistake is added.
        callables: whether callables are taken besides dotted paths.
        import_paths: import each path to check that it names a callable.

    Returns:
        The items (a str or a callable is one item, never a sequence of letters).
    """
    what = "a dotted path 'module.attribute'" + (" or a callable" if callables else "")
    if value is None:
        return ()
    if isinstance(value, str) or (callables and callable(value)):
        items: tuple[Any, ...] = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray, Mapping)):
        items = tuple(value)
    else:
        problems.append(f"{name} is {what}, or a list of them, not {type(value).__name__}")
        return ()
    for spec in items:
        if callables and callable(spec):
            continue
        if not isinstance(spec, str):
            problems.append(f"{name} holds {spec!r}, not {what}")
        elif import_paths:
            problem = _path_problem(spec)
            if problem is not None:
                problems.append(f"{name}: {spec!r} cannot be used: {problem}")
    return items


def _path_problem(spec: str) -> str | None:
    """Why the dotted path ``spec`` names no callable (``None``: it does, or cannot be told yet)."""
    try:
        import_callable(spec)
    except TypeError as exc:
        return str(exc)
    except ImportError as exc:
        try:
            module = sys.modules.get(_split(spec)[0])
        except ImportError:  # no dotted path at all
            return str(exc)
        if module is not None and _running(module):
            return None  # its body has not reached the attribute yet: looked up on first use
        return str(exc)
    return None


def _running(module: ModuleType) -> bool:
    """Whether ``module``'s body is still running on this thread (it imports us, or calls
    ``django.setup()`` at import, before it defines what its settings name)."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_globals is module.__dict__ and frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return False


def check_connection(servers: Any, options: Any, problems: list[str], *, servers_name: str,
                     options_name: str) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
    """The servers and connect options, checked by the code :func:`natsjs_sync.connect` runs
    before it opens anything: what it would refuse is refused here, and nothing else.

    Args:
        servers: a URL, comma-separated URLs or a list of them; ``None``: the
            ``NATS_URL`` environment variable (checked here when set), else the default.
        options: the dict of :func:`natsjs_sync.connect` keywords (``None``: none).
        problems: where each mistake is added.
        servers_name, options_name: the settings, for the messages.

    Returns:
        ``(servers, options)``: the server URLs (``None`` when not set) and the keywords.
    """
    before = len(problems)
    checked = check_connect_options(options, options_name, problems)
    urls = check_servers(servers, servers_name, problems, environment="context" not in checked)
    if len(problems) == before:
        # Both parts pass on their own: now the very call connect() makes (a context's servers, NATS_URL).
        try:
            connect_options(None if urls is None else list(urls), **checked)
        except _REFUSED as exc:
            problems.append(f"{options_name if checked else servers_name}: {exc}")
    return urls, checked


def check_servers(value: Any, name: str, problems: list[str], *, environment: bool = True) -> tuple[str, ...] | None:
    """The server URLs of a setting (``None``: not set), split and parsed as :func:`natsjs_sync.connect`
    does it.

    Args:
        value: a URL, comma-separated URLs or an iterable of them.
        name: the setting, for the messages.
        problems: where each mistake is added (credentials masked).
        environment: when ``value`` is ``None``, check the ``NATS_URL`` environment
            variable the client will use instead (if set).

    Returns:
        The URLs, or ``None`` when the setting is not set.
    """
    if value is None:
        url = os.environ.get("NATS_URL")
        if environment and url:
            _check_urls(url, f"NATS_URL (the environment variable used since {name} is not set)", problems)
        return None
    return _check_urls(value, name, problems)


def _check_urls(value: Any, name: str, problems: list[str]) -> tuple[str, ...] | None:
    try:
        items = server_items(value)
    except (TypeError, ValueError) as exc:
        problems.append(f"{name}: {exc}")
        return None
    for url in items:
        try:
            parse_server_url(url)
        except (NatsError, ValueError, TypeError) as exc:
            problems.append(f"{name}: {exc}")
    return tuple(items)


def _mapping(value: Any, name: str, what: str, problems: list[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{name} is a dict of {what} keywords, not {type(value).__name__}")
        return {}
    return dict(value)


def _attribute(check: Callable[[dict[str, Any]], object], options: dict[str, Any], name: str,
               problems: list[str]) -> None:
    """Run ``check`` on ``options``; if it refuses them, name each keyword at fault.

    Whether the options pass is ``check``'s answer on all of them, and nothing
    else. Only when they do not is each keyword checked alone, and one that fails
    alone is named unless the others make it pass (``user_jwt_cb`` with
    ``signature_cb``); if no keyword is at fault alone, the whole is.
    """
    try:
        check(dict(options))
        return
    except _REFUSED as exc:
        whole = exc
    good: dict[str, Any] = {}
    bad: dict[str, BaseException] = {}
    for key, value in options.items():
        try:
            check({key: value})
            good[key] = value
        except _REFUSED as alone:
            bad[key] = alone
    named = 0
    for key, reason in bad.items():
        try:
            check({**good, key: options[key]})
        except _REFUSED:
            problems.append(f"{name}[{key!r}]: {reason}")  # the checks name the keyword, never a credential
            named += 1
    if not named:
        problems.append(f"{name}: {whole}")


def check_connect_options(value: Any, name: str, problems: list[str]) -> dict[str, Any]:
    """Keywords of :func:`natsjs_sync.connect` (nats-py's too), checked by the code ``connect()``
    runs before it opens anything (files named are read), against the default server.

    Args:
        value: the dict of keywords (``None``: none).
        name: the setting, for the messages (``NATS_OPTIONS``).
        problems: where each mistake is added, naming the keyword, never showing its value.

    Returns:
        The keywords (empty when they are not a dict).
    """
    options = _mapping(value, name, "natsjs_sync.connect()", problems)
    _attribute(lambda kwargs: connect_options(DEFAULT_SERVER, **kwargs), options, name, problems)
    return options


def check_health_options(value: Any, name: str, problems: list[str]) -> dict[str, Any]:
    """Keywords of :func:`natsjs_sync.health.check_health`, checked by its own rules
    (:func:`~natsjs_sync.health.check_options`).

    Args:
        value: the dict of keywords (``None``: none).
        name: the setting, for the messages (``NATS_HEALTH``).
        problems: where each mistake is added, naming the keyword.

    Returns:
        The keywords as given (empty when they are not a dict).
    """
    options = _mapping(value, name, "check_health()", problems)
    _attribute(lambda kwargs: check_options(**kwargs), options, name, problems)
    return options
