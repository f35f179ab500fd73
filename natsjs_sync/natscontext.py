"""NATS contexts (ADR-21): the named connection settings the ``nats`` CLI keeps.

A context is a JSON file ``<name>.json`` in ``$XDG_CONFIG_HOME/nats/context/``
(``~/.config/nats/context/`` when ``XDG_CONFIG_HOME`` is unset); the one the
CLI selected is named in ``context.txt`` beside that folder. This module reads
and writes exactly those files, field by field as the nats CLI (jsm.go's
``natscontext``) does, so a context saved by ``nats context save`` is used by
``connect(context=...)`` and one saved here is used by ``nats`` (and by
orbit.go's ``natscontext`` and natsio's ``natsio.natscontext``)::

    nc = natsjs_sync.connect(context="prod")     # a named context
    nc = natsjs_sync.connect(context="")         # $NATS_CONTEXT, else the selected one

Secrets may be given in a context as references, resolved when connecting as
the nats CLI resolves them: ``env://NAME`` (an environment variable),
``file://PATH`` (a file's content), ``data:;base64,...`` (embedded),
``op://vault/item/field`` (the 1Password CLI ``op``) and
``nsc://operator/account/user`` (the ``nsc`` tool). A reference that cannot be
resolved here (``op`` or ``nsc`` not installed, a variable not set, a scheme no
resolver knows where a file or a reference is required) is a
:class:`ContextError` naming the context, the field and the reference (a
``data:`` reference by its scheme only: it holds the secret), raised before
any connection is tried; nothing is sent.

Fields this client does not know are kept when a context is saved again
(the ``nats`` CLI's own save drops them; we do not). A setting this client
cannot honour (a SOCKS proxy, a Windows certificate store) is a
:class:`ContextError` naming the context and the field, raised before any
connection is tried; so is a file the context names that does not exist.

Thread-safety: the functions read and write files without locks; two
processes saving the same context at once leave one of the two versions
(each write replaces the file whole, never half of it).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ._redact import MASK, decoded, redact, redact_urls
from .errors import NatsError

__all__ = [
    "ContextError",
    "NatsContext",
    "config_dir",
    "context_dir",
    "delete",
    "known_contexts",
    "load",
    "masked",
    "previous_context",
    "save",
    "select",
    "selected_context",
]

#: The fields of a context file, in the order the nats CLI writes them (jsm.go's
#: ``natscontext`` settings struct); it writes every one, empty or not.
FIELDS: tuple[str, ...] = (
    "description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey", "cert", "key", "ca",
    "nsc", "jetstream_domain", "jetstream_api_prefix", "jetstream_event_prefix", "inbox_prefix", "user_jwt",
    "user_seed", "color_scheme", "tls_first", "windows_cert_store", "windows_cert_match_by", "windows_cert_match",
    "windows_ca_certs_match",
)
#: Fields that hold a secret itself, or a reference to one: masked when shown.
SECRET_FIELDS = ("password", "token", "user_jwt", "user_seed")
#: Fields that name a file (or hold a reference, or the secret inline): shown when a path or reference.
_FILE_SECRET_FIELDS = ("creds", "nkey")
#: The kinds of credentials, of which the nats CLI saves one at most (jsm.go's ``Validate``).
_CREDENTIAL_KINDS = ("user", "creds", "nkey", "nsc", "user_jwt")
#: Settings other clients honour that this one cannot, and why.
_UNSUPPORTED = {
    "windows_cert_store": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_cert_match_by": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_cert_match": "Windows certificate stores are not supported: give cert, key and ca files",
    "windows_ca_certs_match": "Windows certificate stores are not supported: give a ca file",
}
_BOOL_FIELDS = ("tls_first",)
#: Fields the nats CLI writes as a list (``null`` when empty).
_LIST_FIELDS = ("windows_ca_certs_match",)
#: Seconds an external resolver (``op``, ``nsc``) may take.
RESOLVER_TIMEOUT = 60.0


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


def _valid_name(name: str) -> bool:
    # The nats CLI's rule (jsm.go's ValidateName): a file name in the context folder, never a
    # path out of it, on every system.
    return bool(name) and ".." not in name and "/" not in name and "\\" not in name


def _check_name(name: str) -> str:
    if not _valid_name(name):
        raise ContextError(f"invalid context name {name!r}: give a plain name such as 'prod'")
    return name


def context_path(name: str) -> Path:
    """The file of the context ``name`` (which need not exist).

    Raises:
        ContextError: ``name`` is empty or not a plain file name.
    """
    return context_dir() / f"{_check_name(name)}.json"


_SELECTED = "context.txt"
_PREVIOUS = "previous-context.txt"


def _read_name(file: str) -> str | None:
    try:
        name = (config_dir() / file).read_text().strip()
    except OSError:
        return None
    return name or None


def selected_context() -> str | None:
    """The context the nats CLI selected (``context.txt``), or ``None``."""
    return _read_name(_SELECTED)


def previous_context() -> str | None:
    """The context selected before the current one (``previous-context.txt``, which the nats
    CLI's ``context previous`` goes back to), or ``None``."""
    return _read_name(_PREVIOUS)


def known_contexts() -> list[str]:
    """The names of the saved contexts, sorted; as the nats CLI lists them, empty files and
    files whose name is no valid context name are skipped (they cannot be loaded or selected)."""
    try:
        entries = list(context_dir().iterdir())
    except OSError:
        return []
    return sorted(p.stem for p in entries
                  if p.suffix == ".json" and _valid_name(p.stem) and p.is_file() and p.stat().st_size > 0)


def _make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only (0700, as the nats CLI makes them)."""
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for item in reversed(missing):
        try:
            item.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made meanwhile by another process (or a file in the way: the write will say so)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` whole with ``text``, readable by its owner only (it may hold secrets)."""
    _make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _set_selected(name: str | None) -> None:
    """Select ``name`` (``None``: none), keeping the one selected until now in
    ``previous-context.txt``, as the nats CLI's selector does."""
    current = selected_context()
    if current:
        _write_private(config_dir() / _PREVIOUS, current)
    if name is None:
        (config_dir() / _SELECTED).unlink(missing_ok=True)
    else:
        _write_private(config_dir() / _SELECTED, name)


def select(name: str) -> None:
    """Make ``name`` the selected context (for this client and the nats CLI); the one
    selected until now becomes the previous one (:func:`previous_context`).

    Raises:
        ContextError: no context of that name is saved.
    """
    if not context_path(name).is_file():
        raise ContextError(f"unknown context {name!r} (looked in {context_dir()})")
    _set_selected(name)


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
        _set_selected(None)


def _expand(path: str) -> str:
    # As the nats CLI: '~' is the home folder, $VARS are expanded.
    return os.path.expanduser(os.path.expandvars(path))


# ------------------------------------------------------------------ secret references


def _scheme(value: str) -> str:
    """The scheme of a reference as the nats CLI reads it (at least two letters, so a
    Windows drive is none); ``""`` for a bare value: a path or the secret itself."""
    try:
        scheme = urlsplit(value).scheme
    except ValueError:
        return ""
    return scheme.lower() if len(scheme) >= 2 else ""


def _trim(value: str, prefix: str) -> str:
    return value[len(prefix):] if value[:len(prefix)].lower() == prefix else value


class _Unresolved(Exception):
    """Why a reference cannot be resolved (never quoting a secret)."""


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise _Unresolved(f"cannot read {path!r}: {exc.strerror or exc}") from None


def _env(ref: str) -> bytes:
    name = _trim(ref, "env://")
    if not name:
        raise _Unresolved("no environment variable named")
    value = os.environ.get(name)
    if value is None:
        raise _Unresolved(f"the environment variable {name} is not set")
    if not value:
        raise _Unresolved(f"the environment variable {name} is empty")
    return value.encode()


def _file(ref: str) -> bytes:
    return _read_bytes(_expand(_trim(ref, "file://")))


def _data(ref: str) -> bytes:
    header, comma, payload = _trim(ref, "data:").partition(",")
    if not comma:
        raise _Unresolved("needs a ',' before its payload")
    if "base64" not in (part.strip() for part in header.split(";")):
        raise _Unresolved("must be ';base64' encoded")
    try:
        # Line ends are skipped, as Go's base64 decoder skips them: `base64 user.creds` wraps its output.
        return base64.b64decode(payload.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        raise _Unresolved("its payload is not base64") from None


def _run(tool: str, args: list[str]) -> bytes:
    """The output of an external resolver, run as the nats CLI runs it (no input, stderr kept)."""
    exe = shutil.which(tool)
    if exe is None:
        raise _Unresolved(f"resolving it needs the {tool!r} command, which is not on PATH")
    try:
        done = subprocess.run([exe, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=RESOLVER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise _Unresolved(f"'{tool} {args[0]}' did not finish within {RESOLVER_TIMEOUT:g} s") from None
    except OSError as exc:
        raise _Unresolved(f"cannot run {exe!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        detail = f": {lines[-1]}" if lines else ""
        raise _Unresolved(f"'{tool} {' '.join(args[:2])}' failed with exit code {done.returncode}{detail}")
    return done.stdout


def _op(ref: str) -> bytes:
    # As the nats CLI: the 1Password CLI reads the item's field.
    return _run("op", ["read", "op://" + _trim(ref, "op://")])


def _nsc_profile(ref: str) -> tuple[str, str]:
    """``nsc generate profile`` of an ``nsc://operator/account/user`` reference, as the nats CLI
    runs it: (the user's creds file, the operator's service URLs comma-separated)."""
    out = _run("nsc", ["generate", "profile", "nsc://" + _trim(ref, "nsc://")])
    try:
        profile = json.loads(out)
        creds = profile.get("user_creds") or ""
        service = (profile.get("operator") or {}).get("service") or []
        urls = ",".join(str(url) for url in service)
    except (ValueError, AttributeError, TypeError):
        raise _Unresolved("nsc's output is not the JSON profile expected") from None
    return str(creds), urls


def _nsc(ref: str) -> bytes:
    creds, _ = _nsc_profile(ref)
    if not creds:
        raise _Unresolved("nsc's profile names no user_creds file")
    return _read_bytes(creds)


#: The references the nats CLI resolves (jsm.go's natscontext resolvers), by scheme.
_RESOLVERS: dict[str, Callable[[str], bytes]] = {"env": _env, "file": _file, "data": _data, "op": _op, "nsc": _nsc}


def _reference(value: str) -> str:
    """A reference as an error message may name it: ``env://NAME``, ``file://PATH``, ``op://...``
    say where a secret is; a ``data:`` reference holds it, so only its scheme is named."""
    return "a data: reference" if _scheme(value) == "data" else value


def _inline_seed(value: str) -> bool:
    """An ``nkey`` field holding the seed itself rather than naming its file (accepted here; the
    nats CLI reads the field as a path)."""
    return value.startswith("S") and not any(c in value for c in "/\\.~$:")


def masked(key: str, value: Any) -> str:
    """How the field ``key`` of a context, holding ``value``, may be shown: secrets masked.

    A reference (``env://NAME``, ``file://PATH``, ``op://...``, ``nsc://...``) says
    where a secret is, not what it is, and is shown as it is; so are paths. A
    literal password, token, user JWT or user seed, an inline nkey seed or creds,
    an embedded ``data:`` payload and a URL's password are masked; so is the
    value of a field this client does not know whose name says it is secret
    (``password``, ``secret``, ``token``, ``seed``, ``jwt``, ``creds``, ``key``),
    at any depth of a JSON object.

    Args:
        key: the field's name.
        value: its value, as the file holds it.

    Returns:
        The text to show.
    """
    if isinstance(value, str):
        text, scheme = value, _scheme(value)
    else:
        text, scheme = json.dumps(_masked_json(value)), ""
    if key == "url":
        text = redact_urls(text)  # a list of URLs: each password masked whole, whatever it holds
    if scheme in _RESOLVERS and scheme != "data":
        return redact(text)
    if text and (key in SECRET_FIELDS or scheme == "data" or (key not in FIELDS and _SECRET_NAME.search(key))
                 or (key in _FILE_SECRET_FIELDS and (_inline_seed(text) or "\n" in text))):
        return MASK
    return redact(text)


#: The name of a field (of the nats CLI's future, or of another tool) that holds a secret.
_SECRET_NAME = re.compile(r"pass|secret|token|seed|jwt|cred|key|auth", re.IGNORECASE)


def _masked_json(value: Any) -> Any:
    """A JSON value with the values under secret-named keys masked, at every depth."""
    if isinstance(value, dict):
        return {k: MASK if _SECRET_NAME.search(str(k)) and v not in (None, "") else _masked_json(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_masked_json(item) for item in value]
    return value


# ------------------------------------------------------------------ contexts


@dataclass(frozen=True)
class NatsContext:
    """One context: its name, its file and its settings as the file holds them.

    ``settings`` keeps every field of the file, those this client does not know
    included, so that :meth:`save` writes them back. It is left out of ``repr``
    (it may hold secrets); show a field with :func:`masked`. Immutable; thread-safe.
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
        return ContextError(redact(f"context {self.name!r} ({self.path or 'not saved'}): {key}: {problem}"))

    def _flag(self, key: str) -> bool:
        value = self.settings.get(key, False)
        if not isinstance(value, bool):
            raise self._error(key, f"must be true or false, not {value!r}")
        return value

    def _path(self, key: str, value: str | None = None) -> str:
        """The file a field names (a path or a ``file://`` reference; ``~`` and ``$VARS``
        expanded); it must exist."""
        value = self.get(key) if value is None else value
        scheme = _scheme(value)
        if scheme not in ("", "file"):
            raise self._error(key, f"{scheme}: references are not supported here: give a file (as the nats CLI "
                                   "requires)")
        path = _expand(_trim(value, "file://"))
        if not os.path.isfile(path):
            raise self._error(key, f"file {path!r} does not exist")
        return path

    def _resolve(self, key: str, value: str, resolver: Callable[[str], bytes]) -> str:
        try:
            data = resolver(value)
        except _Unresolved as exc:
            raise self._error(key, f"{_reference(value)}: {exc}") from None
        text = decoded(data)
        if text is None:
            raise self._error(key, f"{_reference(value)}: does not resolve to UTF-8 text")
        return text

    def _literal(self, key: str, files: bool = False) -> str:
        """A field holding a secret or a reference to one: the secret (as the nats CLI resolves it,
        trailing line ends dropped). With ``files``, a bare path of an existing file is read too
        (the nats CLI's help offers paths for ``--jwt`` and ``--seed``)."""
        value = self.get(key)
        resolver = _RESOLVERS.get(_scheme(value)) if value else None
        if resolver is None and files and os.path.isfile(_expand(value)):
            resolver = _file
        if resolver is None:
            return value  # the secret itself (a scheme no resolver knows included, as the nats CLI)
        return self._resolve(key, value, resolver).rstrip("\r\n")

    def _source(self, key: str) -> tuple[str | None, str]:
        """A ``creds`` or ``nkey`` field: (the file it names, or ``None``; else the content its
        reference resolves to), as the nats CLI reads them."""
        value = self.get(key)
        scheme = _scheme(value)
        if scheme in ("", "file"):
            return self._path(key), ""
        resolver = _RESOLVERS.get(scheme)
        if resolver is None:
            known = ", ".join(f"{s}:" for s in _RESOLVERS)
            raise self._error(key, f"no resolver for {scheme}: references (the nats CLI resolves {known})")
        return None, self._resolve(key, value, resolver)

    def server_url(self) -> str:
        """The servers to connect to: ``url``, else the service URLs of a legacy ``nsc`` lookup
        (running ``nsc``), else ``""``.

        Raises:
            ContextError: the ``nsc`` lookup fails.
        """
        if self.url or not self.get("nsc"):
            return self.url
        return self._nsc_lookup()[1]

    def _nsc_lookup(self) -> tuple[str, str]:
        """The legacy ``nsc`` field, as the nats CLI reads it: (the creds file, the servers)."""
        try:
            creds, urls = _nsc_profile(self.get("nsc"))
        except _Unresolved as exc:
            raise self._error("nsc", f"{self.get('nsc')}: {exc}") from None
        if creds and not os.path.isfile(creds):
            raise self._error("nsc", f"nsc's profile names {creds!r}, which does not exist")
        return creds, urls

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
        order: ``user`` (with ``password``), else ``creds`` (or a legacy ``nsc``
        lookup), else ``nkey``, else ``user_jwt`` (signed with ``user_seed``; a
        bearer JWT without one); a ``token`` is sent as well. Secret references are
        resolved here (see the module's docstring). ``cert``/``key``/``ca`` make an
        :class:`ssl.SSLContext` (and so TLS).

        Returns:
            The keyword arguments ``servers``, ``user``, ``password``, ``token``,
            ``user_credentials``, ``nkeys_seed``, ``user_jwt_cb``, ``signature_cb``,
            ``tls``, ``tls_handshake_first``, ``socks_proxy``, ``inbox_prefix``, ``jetstream_domain``,
            ``jetstream_api_prefix``.

        Raises:
            ContextError: a setting this client cannot honour, a field of the wrong
                type, a file the context names that is missing or unusable, or a
                reference that cannot be resolved; the message names the context
                and the field, and quotes no secret.
        """
        for key, why in _UNSUPPORTED.items():
            if self.settings.get(key):
                raise self._error(key, why)
        for key in FIELDS:
            if key not in _BOOL_FIELDS and key not in _LIST_FIELDS:
                self.get(key)  # type check of every known field, used or not
        nsc_creds, nsc_urls = "", ""
        if self.get("nsc") and not (self.url and self.get("creds")):
            nsc_creds, nsc_urls = self._nsc_lookup()
        options: dict[str, Any] = {}
        if self.url or nsc_urls:
            options["servers"] = self.url or nsc_urls
        options.update(self._credentials(nsc_creds))
        tls = self._tls()
        if tls is not None:
            options["tls"] = tls
        if self._flag("tls_first"):
            options["tls_handshake_first"] = True
        if self.get("socks_proxy"):
            from ._core.dial import SocksProxy

            try:
                SocksProxy.parse(self.get("socks_proxy"))
            except ValueError as exc:
                raise self._error("socks_proxy", str(exc)) from None
        for key in ("socks_proxy", "inbox_prefix", "jetstream_domain", "jetstream_api_prefix"):
            if self.get(key):
                options[key] = self.get(key)
        return options

    def _credentials(self, nsc_creds: str) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.get("user"):
            options["user"] = self.get("user")
            options["password"] = self._literal("password")
        elif self.get("creds") or nsc_creds:
            options.update(self._creds(nsc_creds))
        elif self.get("nkey"):
            options.update(self._nkey())
        elif self.get("user_jwt"):
            seed = self._literal("user_seed", files=True) if self.get("user_seed") else None
            options.update(self._jwt(self._literal("user_jwt", files=True), seed, "user_seed"))
        if self.get("token"):
            options["token"] = self._literal("token")
        return options

    def _creds(self, nsc_creds: str) -> dict[str, Any]:
        from .auth import parse_creds
        from .errors import AuthorizationError

        path, content = self._source("creds") if self.get("creds") else (nsc_creds, "")
        if path is not None:
            return {"user_credentials": path}
        try:
            jwt, seed = parse_creds(content)
        except AuthorizationError as exc:
            raise self._error("creds", f"{_reference(self.get('creds'))}: {exc}") from None
        return self._jwt(jwt, seed, "creds")

    def _nkey(self) -> dict[str, Any]:
        value = self.get("nkey")
        path: str | None = None
        if _inline_seed(value) and not os.path.isfile(_expand(value)):
            seed = value
        else:
            path, content = self._source("nkey")
            if path is not None:
                content = _read_bytes_or(self, "nkey", path).decode(errors="replace")
            seed = _seed_of(content)
        if self.get("user_jwt") and not self.get("user_seed"):
            # Saved by natsjs-sync before it wrote user_seed: the JWT signed with the nkey seed
            # (saved again, it becomes user_jwt + user_seed, as the nats CLI writes it).
            return self._jwt(self._literal("user_jwt", files=True), seed, "nkey")
        from .nkeys import InvalidNkeyError, KeyPair

        try:
            KeyPair.from_seed(seed)
        except InvalidNkeyError as exc:
            raise self._error("nkey", f"does not hold a user nkey seed: {exc}") from None
        # A file holding the bare seed is given as its path: read again at each reconnect.
        return {"nkeys_seed": path if path is not None and content.strip() == seed else seed}

    def _jwt(self, jwt: str, seed: str | None, key: str) -> dict[str, Any]:
        """Callbacks sending ``jwt`` and signing the server's nonce with ``seed``; with no seed,
        a bearer JWT sent unsigned (as the nats CLI does with a ``user_jwt`` alone)."""
        if seed is None:
            return {"user_jwt_cb": lambda: jwt, "signature_cb": lambda nonce: b""}
        from .nkeys import InvalidNkeyError, KeyPair

        try:
            pair = KeyPair.from_seed(seed.strip())
        except InvalidNkeyError as exc:
            raise self._error(key, f"does not hold a user nkey seed: {exc}") from None
        return {"user_jwt_cb": lambda: jwt, "signature_cb": lambda nonce: pair.sign(nonce.encode())}

    def _tls(self) -> ssl.SSLContext | None:
        cert, key, ca = self.get("cert"), self.get("key"), self.get("ca")
        if not (cert or key or ca):
            return None
        if bool(cert) != bool(key):
            missing = "key" if cert else "cert"
            raise self._error(missing, "a client certificate needs both cert and key")
        ca_file = self._path("ca") if ca else None
        try:
            tls = ssl.create_default_context(cafile=ca_file)
        except ssl.SSLError as exc:
            raise self._error("ca", f"{ca_file!r} is not a PEM CA certificate: {exc}") from None
        if cert:
            cert_file, key_file = self._path("cert"), self._path("key")
            try:
                tls.load_cert_chain(cert_file, key_file)
            except ssl.SSLError as exc:
                raise self._error("cert", f"{cert_file!r} and {key_file!r} are not a PEM certificate and "
                                          f"its key: {exc}") from None
        return tls

    def embedded(self) -> NatsContext:
        """A copy with the credentials held in files (``creds``, ``nkey``, ``user_jwt``,
        ``user_seed`` naming a file) embedded as ``data:`` references, as ``nats context save
        --embed`` does: the context then works where those files are not. An inline nkey seed
        becomes a ``data:`` reference too (the nats CLI reads a bare ``nkey`` as a path).

        Every file is read before anything changes: on an error the context is as it was.

        Raises:
            ContextError: a ``creds`` or ``nkey`` file that does not exist or cannot be read.
        """
        changes: dict[str, str] = {}
        for key in ("creds", "nkey", "user_jwt", "user_seed"):
            value = self.get(key)
            if not value or _scheme(value) not in ("", "file"):
                continue  # unset, or a reference resolved where the context is used
            if key == "nkey" and _is_inline_seed(value):
                changes[key] = _data_reference(value.encode())
                continue
            if key in ("user_jwt", "user_seed") and _scheme(value) == "" and not os.path.isfile(_expand(value)):
                continue  # the secret itself (creds and nkey name a file: it must be there)
            changes[key] = _data_reference(_read_bytes_or(self, key, self._path(key)))
        return self.with_settings(**changes)

    def _as_saved(self) -> dict[str, Any]:
        """The settings as the nats CLI saves them: one kind of credentials, a user JWT with
        its seed in ``user_seed``, a legacy ``nsc`` lookup as a ``creds`` reference.

        Raises:
            ContextError: more than one kind of credentials is set, or (migrating a legacy
                ``nsc`` field with neither ``url`` nor ``creds``) ``nsc`` cannot be run.
        """
        settings = dict(self.settings)
        nsc = settings.get("nsc")
        if isinstance(nsc, str) and nsc:
            self._migrate_nsc(settings, nsc)
        nkey = settings.get("nkey")
        if settings.get("user_jwt") and isinstance(nkey, str) and nkey and not settings.get("user_seed"):
            # Written so by natsjs-sync before: the nats CLI would read it as nkey auth alone.
            settings["nkey"] = ""
            bare = _scheme(nkey) == "" and not _inline_seed(nkey)
            settings["user_seed"] = "file://" + nkey if bare else nkey
        elif isinstance(nkey, str) and _is_inline_seed(nkey):
            # The nats CLI reads a bare nkey as the path of a seed file: the seed goes inline as data:.
            settings["nkey"] = _data_reference(nkey.encode())
        kinds = [key for key in _CREDENTIAL_KINDS if settings.get(key)]
        if len(kinds) > 1:
            raise self._error(kinds[-1], f"a context holds one kind of credentials, this one {', '.join(kinds)} "
                                         "(the nats CLI refuses to save that): remove all but one")
        return settings

    def _migrate_nsc(self, settings: dict[str, Any], nsc: str) -> None:
        """Fold the legacy ``nsc`` field into ``settings`` as jsm.go's ``Registry.Save`` does: a
        ``creds`` reference ``nsc://...`` (unless creds are set: then they win), and when neither
        ``url`` nor ``creds`` is set, the servers ``nsc`` names as the ``url`` (else a reload would
        use the default server). ``nsc`` is then empty: one kind of credentials again."""
        if not settings.get("url") and not settings.get("creds"):
            try:
                _, urls = _nsc_profile(nsc)
            except _Unresolved as exc:
                raise self._error("nsc", f"{nsc}: {exc}") from None
            if urls:
                settings["url"] = urls
        if not settings.get("creds"):
            settings["creds"] = "nsc://" + _trim(nsc, "nsc://")
        settings["nsc"] = ""

    def to_json(self) -> str:
        """The file's text: the known fields first, in the nats CLI's order and
        always present (as it writes them), then the others as they were.

        Raises:
            ContextError: see :meth:`save`.
        """
        return _file_text(self._as_saved())

    def save(self) -> NatsContext:
        """Write this context to its file (owner-only permissions): back to the file it was
        loaded from when that file's name is the context's (a context loaded by its path, as
        :func:`load` reads it), else to ``<name>.json`` in the context folder.

        As the nats CLI reads them: a user JWT whose seed is in ``nkey`` (as
        natsjs-sync wrote it before) is written with the seed in ``user_seed``, and
        an inline nkey seed as a ``data:`` reference (a bare ``nkey`` is a path). As
        the nats CLI writes it, a legacy ``nsc`` lookup becomes a ``creds`` reference
        ``nsc://...`` (the creds given win), with the servers ``nsc`` names as the
        ``url`` when none is set (``nsc`` is run for them).

        Returns:
            The context as saved (with its path).

        Raises:
            ContextError: the name is not a plain file name, more than one kind
                of credentials is set (user, creds, nkey, user_jwt), or ``nsc``
                cannot be run for the servers of a legacy lookup.
            OSError: the file could not be written.
        """
        # jsm.go's Context.Save: a context loaded from a file goes back to it unless renamed.
        path = self.path if self.path is not None and self.path.stem == self.name else context_path(self.name)
        settings = self._as_saved()
        _write_private(path, _file_text(settings))
        return NatsContext(self.name, path, settings)


def _file_text(settings: Mapping[str, Any]) -> str:
    """A context file's text: the known fields first, in the nats CLI's order and always present
    (as it writes them), then the others as they were."""
    out: dict[str, Any] = {}
    for key in FIELDS:
        default: Any = False if key in _BOOL_FIELDS else None if key in _LIST_FIELDS else ""
        out[key] = settings.get(key, default)
    for key, value in settings.items():
        if key not in out and key != "name":  # 'name' is never written to disk by the nats CLI
            out[key] = value
    return json.dumps(out, indent=2)


def _is_inline_seed(value: str) -> bool:
    """An ``nkey`` field holding a seed itself (base32 from an 'S'), not naming a file: saved as a
    ``data:`` reference, the one form of an inline seed the nats CLI reads."""
    return re.fullmatch(r"S[A-Z2-7]{10,}", value.strip()) is not None and not os.path.isfile(_expand(value))


def _data_reference(data: bytes) -> str:
    return "data:;base64," + base64.b64encode(data).decode()


def _seed_of(text: str) -> str:
    """The nkey seed in a seed file's text or in creds-style text (as nkeys' ParseDecoratedNKey)."""
    from .auth import parse_creds
    from .errors import AuthorizationError

    try:
        return parse_creds(text)[1]
    except AuthorizationError:
        return text.strip()


def _read_bytes_or(ctx: NatsContext, key: str, path: str) -> bytes:
    try:
        return _read_bytes(path)
    except _Unresolved as exc:
        raise ctx._error(key, str(exc)) from None


def _read(name: str, path: Path) -> NatsContext:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ContextError(f"unknown context {name!r} (no file {path})") from None
    except OSError as exc:
        raise ContextError(f"context {name!r}: cannot read {path}: {exc.strerror}") from None
    text = decoded(data)
    if text is None:
        raise ContextError(f"context {name!r}: {path} is no UTF-8 text")
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


def save(name: str, *, embed: bool = False, **settings: Any) -> NatsContext:
    """Create the context ``name``, or change the fields given of a saved one.

    Fields not given, those this client does not know included, keep their
    values; a value of ``None`` removes a field.

    Args:
        name: the context's name.
        embed: embed the credentials files in the context as ``data:`` references
            (:meth:`NatsContext.embedded`, ``nats context save --embed``). Every file
            is read before anything is written: on an error the saved context is as it was.
        settings: the fields to change.

    Returns:
        The saved context.

    Raises:
        ContextError: ``name`` is not a plain name, the saved file is unreadable, or
            (with ``embed``) a credentials file cannot be read.
        OSError: the file could not be written.
    """
    path = context_path(name)
    current = _read(name, path) if path.is_file() else NatsContext(name, None, {})
    changed = current.with_settings(**settings)
    return (changed.embedded() if embed else changed).save()
