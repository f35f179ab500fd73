"""NATS contexts (ADR-21): the named connection settings the ``nats`` CLI keeps.

A context is a JSON file ``<name>.json`` in ``$XDG_CONFIG_HOME/nats/context/``
(``~/.config/nats/context/`` when ``XDG_CONFIG_HOME`` is unset); the one the
CLI selected is named in ``context.txt`` beside that folder. This module reads
and writes exactly those files, so a context saved by ``nats context save`` is
used by ``connect(context=...)`` and one saved here is used by ``nats`` (and by
orbit.go's ``natscontext`` and natsio's ``natsio.natscontext``)::

    nc = natsjs_sync.connect(context="prod")     # a named context
    nc = natsjs_sync.connect(context="")         # $NATS_CONTEXT, else the selected one

Fields this client does not know are kept when a context is saved again
(the ``nats`` CLI's own save drops them; we do not). A setting this client
cannot honour (a SOCKS proxy, an ``nsc`` lookup, a Windows certificate store)
is a :class:`ContextError` naming the context and the field, raised before
any connection is tried; so is a file the context names that does not exist.

Thread-safety: the functions read and write files without locks; two
processes saving the same context at once leave one of the two versions
(each write replaces the file whole, never half of it).
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import NatsError

__all__ = [
    "ContextError",
    "NatsContext",
    "config_dir",
    "context_dir",
    "delete",
    "known_contexts",
    "load",
    "save",
    "select",
    "selected_context",
]

#: The fields of a context file, in the order the nats CLI writes them.
FIELDS: tuple[str, ...] = (
    "description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey", "cert", "key", "ca",
    "nsc", "jetstream_domain", "jetstream_api_prefix", "jetstream_event_prefix", "inbox_prefix", "user_jwt",
    "color_scheme", "tls_first",
)
#: Fields that only tools read (a CLI's colours, its advisory prefix, a description):
#: kept and shown, with no effect on a connection.
_COSMETIC = ("description", "color_scheme", "jetstream_event_prefix")
#: Settings other clients honour that this one cannot, and why.
_UNSUPPORTED = {
    "socks_proxy": "connections through a SOCKS proxy are not supported",
    "nsc": "nsc lookups are not supported: save the URL and a creds file in the context instead",
    "windows_cert_store": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_cert_match_by": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_cert_match": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_ca_certs_match": "Windows certificate stores are not supported: give a ca file",
}
_BOOL_FIELDS = ("tls_first",)


class ContextError(NatsError, ValueError):
    """A context that cannot be found, read or honoured; the message names the
    context and, where one is to blame, its field."""


def config_dir() -> Path:
    """The nats CLI's configuration folder: ``$XDG_CONFIG_HOME/nats``, else ``~/.config/nats``."""
    parent = os.environ.get("XDG_CONFIG_HOME")
    return (Path(parent) if parent else Path.home() / ".config") / "nats"


def context_dir() -> Path:
    """The folder of the ``<name>.json`` context files."""
    return config_dir() / "context"


def _check_name(name: str) -> str:
    # The nats CLI's rule: a file name in the context folder, never a path out of it.
    if not name or ".." in name or os.sep in name or (os.altsep and os.altsep in name):
        raise ContextError(f"invalid context name {name!r}: give a plain name such as 'prod'")
    return name


def context_path(name: str) -> Path:
    """The file of the context ``name`` (which need not exist).

    Raises:
        ContextError: ``name`` is empty or not a plain file name.
    """
    return context_dir() / f"{_check_name(name)}.json"


def selected_context() -> str | None:
    """The context the nats CLI selected (``context.txt``), or ``None``."""
    try:
        name = (config_dir() / "context.txt").read_text().strip()
    except OSError:
        return None
    return name or None


def known_contexts() -> list[str]:
    """The names of the saved contexts, sorted (empty files skipped, as the nats CLI does)."""
    try:
        entries = list(context_dir().iterdir())
    except OSError:
        return []
    return sorted(p.stem for p in entries if p.suffix == ".json" and p.is_file() and p.stat().st_size > 0)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` whole with ``text``, readable by its owner only (it may hold secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def select(name: str) -> None:
    """Make ``name`` the selected context (for this client and the nats CLI).

    Raises:
        ContextError: no context of that name is saved.
    """
    if not context_path(name).is_file():
        raise ContextError(f"unknown context {name!r} (looked in {context_dir()})")
    _write_private(config_dir() / "context.txt", name)


def delete(name: str) -> None:
    """Remove the saved context ``name``; removing the selected one unselects it.

    As the nats CLI, the selected context is only removed when it is the last one.

    Raises:
        ContextError: ``name`` is unknown, or selected while others exist.
    """
    path = context_path(name)
    if not path.is_file():
        raise ContextError(f"unknown context {name!r} (looked in {context_dir()})")
    selected = selected_context() == name
    if selected and len(known_contexts()) > 1:
        raise ContextError(f"context {name!r} is selected: select another one before removing it")
    path.unlink()
    if selected:
        (config_dir() / "context.txt").unlink(missing_ok=True)


def _expand(path: str) -> str:
    # As the nats CLI: '~' is the home folder, $VARS are expanded (orbit.go does it for creds).
    return os.path.expanduser(os.path.expandvars(path))


@dataclass(frozen=True)
class NatsContext:
    """One context: its name, its file and its settings as the file holds them.

    ``settings`` keeps every field of the file, those this client does not know
    included, so that :meth:`save` writes them back. Immutable; thread-safe.
    """

    name: str
    path: Path | None
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def get(self, key: str) -> str:
        """A text field, ``""`` when unset.

        Raises:
            ContextError: the field holds something other than text.
        """
        value = self.settings.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._error(key, f"must be a string, not {type(value).__name__}")
        return value

    @property
    def description(self) -> str:
        """The context's description (``""`` when unset)."""
        return self.get("description")

    @property
    def url(self) -> str:
        """The servers, a comma-separated list of URLs (``""`` when unset)."""
        return self.get("url")

    @property
    def jetstream_domain(self) -> str:
        """The JetStream domain ``nc.jetstream()`` uses (``""``: none)."""
        return self.get("jetstream_domain")

    @property
    def jetstream_api_prefix(self) -> str:
        """The JetStream API prefix ``nc.jetstream()`` uses (``""``: the default)."""
        return self.get("jetstream_api_prefix")

    def _error(self, key: str, problem: str) -> ContextError:
        return ContextError(f"context {self.name!r} ({self.path or 'not saved'}): {key}: {problem}")

    def _flag(self, key: str) -> bool:
        value = self.settings.get(key, False)
        if not isinstance(value, bool):
            raise self._error(key, f"must be true or false, not {value!r}")
        return value

    def _file(self, key: str) -> str:
        """The path a field names, ``~`` and ``$VARS`` expanded; it must exist."""
        path = _expand(self.get(key))
        if not os.path.isfile(path):
            raise self._error(key, f"file {path!r} does not exist")
        return path

    def with_settings(self, **changes: Any) -> NatsContext:
        """A copy with fields changed (a value of ``None`` removes the field); unknown fields stay."""
        settings = dict(self.settings)
        for key, value in changes.items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        return NatsContext(self.name, self.path, settings)

    def connect_options(self) -> dict[str, Any]:
        """This context as :func:`natsjs_sync.connect` keyword arguments.

        Only the fields the context sets appear. Credentials follow the nats CLI's
        order: ``user`` (with ``password``), else ``creds``, else ``user_jwt``
        (signed with the ``nkey`` seed), else ``nkey``; a ``token`` is sent as well.
        ``cert``/``key``/``ca`` make an :class:`ssl.SSLContext` (and so TLS).

        Returns:
            The keyword arguments ``servers``, ``user``, ``password``, ``token``,
            ``user_credentials``, ``nkeys_seed``, ``user_jwt_cb``, ``signature_cb``,
            ``tls``, ``tls_handshake_first``, ``inbox_prefix``, ``jetstream_domain``,
            ``jetstream_api_prefix``.

        Raises:
            ContextError: a setting this client cannot honour, a field of the
                wrong type, or a file the context names that is missing or unusable;
                the message names the context and the field.
        """
        for key, why in _UNSUPPORTED.items():
            if self.settings.get(key):
                raise self._error(key, why)
        for key in FIELDS:
            if key not in _BOOL_FIELDS:
                self.get(key)  # type check of every known field, used or not
        options: dict[str, Any] = {}
        if self.url:
            options["servers"] = self.url
        options.update(self._credentials())
        tls = self._tls()
        if tls is not None:
            options["tls"] = tls
        if self._flag("tls_first"):
            options["tls_handshake_first"] = True
        for key in ("inbox_prefix", "jetstream_domain", "jetstream_api_prefix"):
            if self.get(key):
                options[key] = self.get(key)
        return options

    def _credentials(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.get("user"):
            options["user"] = self.get("user")
            options["password"] = self.get("password")
        elif self.get("creds"):
            options["user_credentials"] = self._file("creds")
        elif self.get("user_jwt"):
            if not self.get("nkey"):
                raise self._error("user_jwt", "needs the nkey field: the seed that signs the server's nonce")
            options["user_jwt_cb"], options["signature_cb"] = self._jwt_signer()
        elif self.get("nkey"):
            options["nkeys_seed"] = self._seed()
        if self.get("token"):
            options["token"] = self.get("token")
        return options

    def _seed(self) -> str:
        """The nkey seed the ``nkey`` field names (a file, as the nats CLI writes it)."""
        value = self.get("nkey")
        if value.startswith("SU") and not os.path.exists(_expand(value)):
            return value  # the seed itself
        from .nkeys import InvalidNkeyError, KeyPair

        path = self._file("nkey")
        try:
            with open(path) as f:
                seed = f.read().strip()
            KeyPair.from_seed(seed)
        except (OSError, InvalidNkeyError) as exc:
            raise self._error("nkey", f"{path!r} does not hold a user nkey seed: {exc}") from None
        return path

    def _jwt_signer(self) -> tuple[Callable[[], str], Callable[[str], bytes]]:
        from .nkeys import KeyPair

        jwt = self.get("user_jwt").strip()
        seed = self._seed()
        if not seed.startswith("SU"):
            with open(seed) as f:
                seed = f.read().strip()
        pair = KeyPair.from_seed(seed)
        return (lambda: jwt), (lambda nonce: pair.sign(nonce.encode()))

    def _tls(self) -> ssl.SSLContext | None:
        cert, key, ca = self.get("cert"), self.get("key"), self.get("ca")
        if not (cert or key or ca):
            return None
        if bool(cert) != bool(key):
            missing = "key" if cert else "cert"
            raise self._error(missing, "a client certificate needs both cert and key")
        ca_file = self._file("ca") if ca else None
        try:
            tls = ssl.create_default_context(cafile=ca_file)
        except ssl.SSLError as exc:
            raise self._error("ca", f"{ca_file!r} is not a PEM CA certificate: {exc}") from None
        if cert:
            cert_file, key_file = self._file("cert"), self._file("key")
            try:
                tls.load_cert_chain(cert_file, key_file)
            except ssl.SSLError as exc:
                raise self._error("cert", f"{cert_file!r} and {key_file!r} are not a PEM certificate and "
                                          f"its key: {exc}") from None
        return tls

    def to_json(self) -> str:
        """The file's text: the known fields first, in the nats CLI's order and
        always present (as it writes them), then the others as they were."""
        out: dict[str, Any] = {}
        for key in FIELDS:
            default: Any = False if key in _BOOL_FIELDS else ""
            out[key] = self.settings.get(key, default)
        for key, value in self.settings.items():
            if key not in out and key != "name":  # 'name' is never written to disk by the nats CLI
                out[key] = value
        return json.dumps(out, indent=2)

    def save(self) -> NatsContext:
        """Write this context to its file in the context folder (owner-only permissions).

        Returns:
            The context as saved (with its path).

        Raises:
            ContextError: the name is not a plain file name.
            OSError: the file could not be written.
        """
        path = context_path(self.name)
        _write_private(path, self.to_json())
        return NatsContext(self.name, path, dict(self.settings))


def _read(name: str, path: Path) -> NatsContext:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ContextError(f"unknown context {name!r} (no file {path})") from None
    except OSError as exc:
        raise ContextError(f"context {name!r}: cannot read {path}: {exc.strerror}") from None
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ContextError(f"context {name!r}: {path} is not JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise ContextError(f"context {name!r}: {path} does not hold a JSON object")
    return NatsContext(name, path, settings)


def resolve_name(name: str | None = None) -> str:
    """The context ``name`` stands for: itself, or when empty ``$NATS_CONTEXT``, else the selected one.

    Raises:
        ContextError: ``name`` is empty and no context is named or selected.
    """
    if name:
        return name
    name = os.environ.get("NATS_CONTEXT") or selected_context()
    if not name:
        raise ContextError("no context given, NATS_CONTEXT is not set and no context is selected "
                           f"(select one with 'natsjs-sync context select NAME'; looked in {config_dir()})")
    return name


def load(name: str | None = None) -> NatsContext:
    """Read a context.

    Args:
        name: a saved context's name; an absolute path of a context file; or
            ``""``/``None`` for the one ``$NATS_CONTEXT`` names, else the selected one.

    Returns:
        The context (no connection is made and no file it names is read yet).

    Raises:
        ContextError: the context is unknown or its file is not a JSON object.
    """
    name = resolve_name(name)
    if os.path.isabs(name):
        path = Path(name)
        return _read(path.stem, path)
    path = context_path(name)
    if not path.is_file():
        raise ContextError(f"unknown context {name!r} (looked in {context_dir()})")
    return _read(name, path)


def save(name: str, **settings: Any) -> NatsContext:
    """Create the context ``name``, or change the fields given of a saved one.

    Fields not given, those this client does not know included, keep their
    values; a value of ``None`` removes a field.

    Returns:
        The saved context.

    Raises:
        ContextError: ``name`` is not a plain name, or the saved file is unreadable.
        OSError: the file could not be written.
    """
    path = context_path(name)
    current = _read(name, path) if path.is_file() else NatsContext(name, None, {})
    return current.with_settings(**settings).save()
