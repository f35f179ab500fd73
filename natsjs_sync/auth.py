"""Credentials: user/password, token, nkey seed, JWT ``.creds`` files, callbacks.

Secrets live only here and in the CONNECT message. They are kept out of
``repr``, log lines and exception messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from ._redact import MASK, decoded, redact
from .errors import AuthorizationError, InvalidUserCredentialsError
from .nkeys import InvalidNkeyError, KeyPair, sign_nonce

# A .creds file holds the user JWT and then the user's nkey seed, each between
# dashed BEGIN/END lines.
_CREDS_BLOCK = re.compile(r"-{3,}[^\n]*BEGIN[^\n]*-{3,}\s*\n\s*([A-Za-z0-9_\-.=]+)\s*\n\s*-{3,}[^\n]*END[^\n]*-{3,}")


def parse_creds(text: str) -> tuple[str, str]:
    """Split ``.creds`` content into ``(jwt, seed)``.

    Raises:
        InvalidUserCredentialsError: the content is not a creds file (nothing of it is quoted);
            an AuthorizationError.
    """
    blocks = _CREDS_BLOCK.findall(text)
    if len(blocks) < 2:
        raise InvalidUserCredentialsError(
            "nats: invalid user credentials: credentials file has no user JWT and nkey seed blocks")
    jwt, seed = blocks[0], blocks[1]
    if not seed.startswith("SU"):
        raise InvalidUserCredentialsError("nats: invalid user credentials: credentials file does not hold a "
                                          "user nkey seed")
    return jwt, seed


#: A seed or the content of a .creds file given inline, or the path of a file holding it.
SecretSource = str | os.PathLike[str]


def _looks_like_path(value: str) -> bool:
    """Whether ``value`` can only be a file's path: a seed (base32) and a creds file's content
    (several lines) never hold a path separator on one line, start with ``~`` or end in a file
    name extension."""
    return "\n" not in value and (
        "/" in value or os.sep in value or value.startswith("~") or value.endswith((".nk", ".creds", ".seed", ".txt")))


def _read_secret(value: SecretSource, what: str) -> str:
    """``value`` itself, or the content of the file it names (always a file for an ``os.PathLike``
    and for a string that can only be a path; ``~`` is the home directory, as the nats CLI reads it).

    Raises:
        AuthorizationError: the file is missing, cannot be read, or is no UTF-8 text (its
            path is shown, never the content: a UnicodeDecodeError holds the file's bytes).
    """
    if isinstance(value, str) and value.startswith("~"):
        value = os.path.expanduser(value)
    if isinstance(value, os.PathLike) or os.path.exists(value) or _looks_like_path(value):
        path = os.fspath(value)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise AuthorizationError(f"cannot read the {what} file {redact(path)!r}: {exc.strerror}") from exc
        text = decoded(data)
        if text is None:
            raise AuthorizationError(f"the {what} file {redact(path)!r} is no UTF-8 text")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # line ends as open() in text mode reads them
    return value


def jwt_and_seed_files(jwt_file: SecretSource, seed_file: SecretSource) -> tuple[
        Callable[[], str], Callable[[str], str]]:
    """``user_jwt_cb`` and ``signature_cb`` reading a user JWT file and an nkey seed file
    at every (re)connect (nats-py's ``user_credentials=(jwt_file, seed_file)``). Both
    files are read once here, so a bad one fails before anything is sent.

    Raises:
        AuthorizationError: a file is missing, unreadable or no UTF-8 text, or the seed
            file holds no nkey seed (nothing of either file is quoted).
    """
    def user_jwt() -> str:
        return _read_secret(_as_path(jwt_file), "user JWT").strip()

    def signature(nonce: str) -> str:
        return sign_nonce(_seed_in(_read_secret(_as_path(seed_file), "nkey seed")), nonce)

    if not user_jwt():
        raise AuthorizationError(f"the user JWT file {redact(os.fspath(jwt_file))!r} is empty")
    try:
        KeyPair.from_seed(_seed_in(_read_secret(_as_path(seed_file), "nkey seed")))
    except InvalidNkeyError as exc:
        raise AuthorizationError(f"the nkey seed file {redact(os.fspath(seed_file))!r} holds no valid nkey "
                                 f"seed: {exc}") from None
    return user_jwt, signature


def _as_path(value: SecretSource) -> os.PathLike[str]:
    """A str named as a file's path (never taken for the secret itself)."""
    from pathlib import Path

    return value if isinstance(value, os.PathLike) else Path(os.path.expanduser(value))


def _seed_in(text: str) -> str:
    """The seed of a seed file, or of a ``.creds`` file given in its place."""
    try:
        return parse_creds(text)[1]
    except AuthorizationError:
        return text.strip()


@dataclass
class Credentials:
    """Everything a client may authenticate with. Secrets are masked in ``repr``."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkeys_seed: SecretSource | None = None  # a seed or the path of its file
    user_credentials: SecretSource | None = None  # a path (or the file's content)
    user_jwt_cb: Callable[[], str] | None = None
    signature_cb: Callable[[str], bytes | str] | None = None
    token_cb: Callable[[], str] | None = None
    user_info_cb: Callable[[], tuple[str, str]] | None = None

    def __repr__(self) -> str:
        shown = []
        for item in dataclass_fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if item.name in ("password", "token"):
                value = MASK
            elif item.name in ("nkeys_seed", "user_credentials") and isinstance(value, str):
                # A path stays (it is read as one: an existing file); anything else is the secret
                # itself or a mangled copy of it (a seed one character short is no seed pattern).
                value = value if os.path.exists(value) else MASK
            elif isinstance(value, str):
                value = redact(value)
            shown.append(f"{item.name}={value!r}")
        return f"Credentials({', '.join(shown)})"

    def validate(self) -> None:
        """Fail early on unusable settings (before any network traffic): what :func:`natsjs_sync.connect`
        checks, files read as a connect reads them. No message quotes a secret.

        Raises:
            TypeError: a user, password or token that is not a str, a seed or
                credentials that are neither a str nor a path.
            AuthorizationError: a seed or credentials file that is missing,
                unreadable or holds no usable key.
            ValueError: ``user_jwt_cb`` without ``signature_cb``.
        """
        for name in ("user", "password", "token"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")  # never the value
        for name in ("nkeys_seed", "user_credentials"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"{name} must be a str or a path, not {type(value).__name__}")
        if self.nkeys_seed is not None:
            seed = _read_secret(self.nkeys_seed, "nkey seed").strip()
            try:
                KeyPair.from_seed(seed)
            except InvalidNkeyError as exc:
                raise AuthorizationError(f"nkeys_seed is not a valid nkey seed (nor a file): {exc}") from None
        if self.user_credentials is not None:
            creds = _read_secret(self.user_credentials, "credentials")
            if creds is self.user_credentials and "\n" not in creds:
                # One line is no file's content (its blocks span lines), nor a path (_read_secret read
                # those): a missing file named without a path, or a secret given in the wrong place (a
                # token, a seed cut short), which no pattern of redact() recognises: never quoted.
                raise AuthorizationError("user_credentials is neither a credentials file (no such file) nor the "
                                         "content of one")
            parse_creds(creds)
        if self.user_jwt_cb is not None and self.signature_cb is None:
            raise ValueError("user_jwt_cb needs signature_cb to sign the server's nonce")

    def connect_fields(self, info: dict[str, Any], url_user: str | None, url_password: str | None) -> dict[str, Any]:
        """The CONNECT fields for this server (signing its nonce when asked).

        URL credentials win over the arguments, as in the other NATS clients.
        """
        fields: dict[str, Any] = {}
        nonce = info.get("nonce")
        if self.user_credentials is not None:
            jwt, seed = parse_creds(_read_secret(self.user_credentials, "credentials"))
            fields["jwt"] = jwt
            if nonce:
                fields["sig"] = sign_nonce(seed, nonce)
        elif self.user_jwt_cb is not None:
            fields["jwt"] = self.user_jwt_cb()
            if nonce and self.signature_cb is not None:
                sig = self.signature_cb(nonce)
                signature = sig if isinstance(sig, str) else _b64url(sig)
                if signature:  # a bearer JWT is sent unsigned (an empty signature), as nats.go does
                    fields["sig"] = signature
        elif self.nkeys_seed is not None:
            kp = KeyPair.from_seed(_read_secret(self.nkeys_seed, "nkey seed").strip())
            fields["nkey"] = kp.public_key
            if nonce:
                fields["sig"] = sign_nonce(kp.seed, nonce)

        user, password = self.user, self.password
        if self.user_info_cb is not None:
            user, password = self.user_info_cb()
        token = self.token_cb() if self.token_cb is not None else self.token
        if url_user:
            if url_password is None and not user:
                token = url_user  # nats://TOKEN@host
            else:
                user, password = url_user, url_password
        if user is not None:
            fields["user"] = user
            fields["pass"] = password or ""
        if token is not None:
            fields["auth_token"] = token
        return fields


def _b64url(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
