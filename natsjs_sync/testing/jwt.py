"""Issue NATS JWTs for tests: an operator, accounts and users, and ``.creds`` files.

Only for test set-ups (an operator-mode nats-server with a memory resolver);
production JWTs come from ``nsc`` or an auth service.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

import msgspec

from ..nkeys import PREFIX_BYTE_ACCOUNT, PREFIX_BYTE_OPERATOR, PREFIX_BYTE_USER, KeyPair

_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def encode_jwt(claims: dict[str, Any], issuer: KeyPair) -> str:
    """Sign ``claims`` (``iss``, ``iat`` and ``jti`` are filled in) with ``issuer``."""
    body = dict(claims)
    body["iss"] = issuer.public_key
    body.setdefault("iat", int(time.time()))
    body.pop("jti", None)
    body["jti"] = base64.b32encode(hashlib.sha256(msgspec.json.encode(body)).digest()).decode().rstrip("=")
    head = _b64(msgspec.json.encode(_HEADER))
    payload = _b64(msgspec.json.encode(body))
    signing_input = f"{head}.{payload}".encode()
    return f"{head}.{payload}.{_b64(issuer.sign(signing_input))}"


_NO_LIMITS = {
    "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
    "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1,
}


class Operator:
    """A test operator with its accounts and users; renders the server config."""

    def __init__(self, name: str = "natsjs-test"):
        self.name = name
        self.key = KeyPair.generate(PREFIX_BYTE_OPERATOR)
        self.jwt = encode_jwt(
            {"sub": self.key.public_key, "name": name, "nats": {"type": "operator", "version": 2}}, self.key
        )
        self.accounts: dict[str, tuple[KeyPair, str]] = {}
        self.system_account = self.add_account("SYS", jetstream=False)

    def add_account(self, name: str, jetstream: bool = True) -> KeyPair:
        """A new account signed by the operator; returns its key pair."""
        key = KeyPair.generate(PREFIX_BYTE_ACCOUNT)
        limits: dict[str, Any] = dict(_NO_LIMITS)
        if not jetstream:
            limits.update(mem_storage=0, disk_storage=0, streams=0, consumer=0)
        claims = {"sub": key.public_key, "name": name, "nats": {"type": "account", "version": 2, "limits": limits}}
        self.accounts[name] = (key, encode_jwt(claims, self.key))
        return key

    def user_creds(self, account: str, name: str = "user", expires_in: float | None = None,
                   bearer: bool = False) -> str:
        """A ``.creds`` file's content for a new user of ``account``.

        Args:
            expires_in: seconds until the JWT expires (negative: already expired).
            bearer: a bearer JWT: the server accepts it without a signature of its nonce.
        """
        acc_key, _ = self.accounts[account]
        user = KeyPair.generate(PREFIX_BYTE_USER)
        claims: dict[str, Any] = {
            "sub": user.public_key,
            "name": name,
            "nats": {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        }
        if expires_in is not None:
            claims["exp"] = int(time.time() + expires_in)
        if bearer:
            claims["nats"]["bearer_token"] = True
        jwt = encode_jwt(claims, acc_key)
        return format_creds(jwt, user.seed)

    def server_config(self) -> dict[str, Any]:
        """Entries for :class:`NatsServer`'s ``config=``: operator mode, memory resolver."""
        return {
            "operator": self.jwt,
            "system_account": self.system_account.public_key,
            "resolver": "MEMORY",
            "resolver_preload": {key.public_key: jwt for key, jwt in self.accounts.values()},
        }


def format_creds(jwt: str, seed: str) -> str:
    """The standard ``.creds`` text for a user JWT and seed."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )
