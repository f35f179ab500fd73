"""The credential check: a ``.creds`` (or JWT) file's signature and expiry, read offline."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import os
import re
import time
from typing import Any

from .durations import _go_time, _human_duration
from .result import CheckResult

_DECORATED_JWT = re.compile(r"-{3,}[^\n]*BEGIN[^\n]*JWT[^\n]*-{3,}\s*\n\s*([A-Za-z0-9_\-.=]+)\s*\n\s*-{3,}")


def _strict_json(raw: bytes) -> Any:
    """JSON as Go's decoder takes it: ``NaN`` and ``Infinity`` (which Python's accepts) are not JSON."""
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    return json.loads(raw, parse_constant=refuse)


def _jwt_claims(text: str) -> dict[str, Any]:
    """The claims of a NATS JWT (alone, or the first of a ``.creds`` file), its signature checked.

    Raises:
        ValueError: no JWT, or one that does not decode or whose signature is not its issuer's.
    """
    from ...nkeys import decode_public, ed25519_verify

    found = _DECORATED_JWT.search(text)
    token = (found.group(1) if found else text).strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("expected 3 chunks in a JWT")

    def b64(chunk: str) -> bytes:
        return base64.urlsafe_b64decode(chunk + "=" * (-len(chunk) % 4))

    try:
        header, claims = _strict_json(b64(parts[0])), _strict_json(b64(parts[1]))
        signature = b64(parts[2])
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"the JWT does not decode: {exc}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("the JWT's header or claims are not JSON objects")
    if header.get("alg") not in ("ed25519-nkey", "ed25519"):
        raise ValueError(f"unexpected JWT algorithm {header.get('alg')!r}")
    try:
        _, issuer = decode_public(str(claims.get("iss", "")))
    except ValueError as exc:  # InvalidNkeyError, or base32 that does not decode
        raise ValueError(f"the JWT's issuer is not a public nkey: {exc}") from None
    if not ed25519_verify(issuer, f"{parts[0]}.{parts[1]}".encode(), signature):
        raise ValueError("the JWT's signature is not its issuer's")
    return claims


def check_credential(
    path: str | os.PathLike[str],
    *,
    validity_warn: float | None = None,
    validity_critical: float | None = None,
    require_expiry: bool = True,
) -> CheckResult:
    """A ``.creds`` file's (or a JWT file's) expiry, as ``nats server check credential`` sees it;
    offline: it reads only the file.

    Args:
        path: the credentials file, or a file holding a JWT.
        validity_warn, validity_critical: expiring within this many seconds (or expired)
            is WARNING / CRITICAL (0 or ``None``: not checked).
        require_expiry: a credential that never expires is CRITICAL.

    Returns:
        CRITICAL when the file cannot be read or holds no valid JWT, it expired, or as above.
    """
    result = CheckResult("credential", "Credential")
    try:
        if os.path.isdir(path):
            raise IsADirectoryError("is a directory")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        result.critical(f"credential not accessible: {exc.strerror or exc}")
        return result
    try:
        claims = _jwt_claims(text)
    except ValueError as exc:
        result.critical(f"invalid credential: {exc}")
        return result
    expires = claims.get("exp")
    expires = 0 if expires is None else expires  # null, as absent: Go's zero value
    # The JWT library's claims hold the expiry in an int64: a fraction, an exponent, a bool or a
    # number out of its range does not decode there, and the credential is invalid.
    if type(expires) is not int or not -(2**63) <= expires < 2**63:
        result.critical(f"invalid credential: expiry {expires!r} is not a whole number of seconds (int64)")
        return result
    if not expires:
        if require_expiry:
            result.critical("never expires")
        else:
            result.ok("never expires")
        return result
    until = int(expires) - int(time.time())
    result.perf("expiry", until, "s", validity_warn, validity_critical, description="Expiry time in seconds")
    try:
        at = _go_time(datetime.datetime.fromtimestamp(int(expires), datetime.timezone.utc))
    except (OverflowError, OSError, ValueError):  # past the year 9999
        at = f"{int(expires)} (Unix time)"
    if until <= 0:
        result.critical(f"expired at {at}")
    elif validity_critical and until <= validity_critical:
        result.critical(f"expires sooner than {_human_duration(validity_critical)}")
    elif validity_warn and until <= validity_warn:
        result.warning(f"expires sooner than {_human_duration(validity_warn)}")
    else:
        result.ok(f"expires in {at}")
    return result
