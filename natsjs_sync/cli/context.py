"""``natsjs-sync context ls|show|select|save|rm``: the nats CLI's contexts, in the same files.

A context saved here is used by ``nats --context NAME`` and the other way
round; ``save`` on a saved context changes only the fields given and keeps
the others, those this client does not know included. ``show`` masks secrets
(passwords, tokens, seeds, JWTs, a URL's password) unless asked for them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import natscontext
from . import GLOBAL_OPTIONS, _print

_REFERENCES = "a value, or a reference: env://NAME, file://PATH, op://vault/item/field, nsc://op/account/user"
#: ``context save`` options -> context fields (the nats CLI's flag names, and ours kept as aliases).
_SAVE_OPTIONS = (
    (("--server",), "url", "server URL(s), comma-separated"),
    (("--description",), "description", "a description shown by 'context ls'"),
    (("--user",), "user", "user name; without --password (here or saved) it is saved as the token, as the "
                          "nats CLI does"),
    (("--password",), "password", f"password: {_REFERENCES}"),
    (("--token",), "token", f"authentication token: {_REFERENCES}"),
    (("--creds",), "creds", "a .creds file: a path, or a reference as for --password"),
    (("--nkey",), "nkey", "a user nkey seed file: a path, or a reference as for --password"),
    (("--jwt", "--user-jwt"), "user_jwt", f"a user JWT (signed with --seed): {_REFERENCES}"),
    (("--seed",), "user_seed", f"the user nkey seed of --jwt: {_REFERENCES}"),
    (("--tlscert",), "cert", "client certificate file (PEM)"),
    (("--tlskey",), "key", "client certificate's key file (PEM)"),
    (("--tlsca",), "ca", "CA certificate file (PEM) to verify the server with"),
    (("--socks-proxy",), "socks_proxy", "SOCKS5 proxy to reach the servers through: socks5://[user:password@]host:port"),
    (("--inbox-prefix",), "inbox_prefix", "prefix of reply inboxes"),
    (("--js-domain",), "jetstream_domain", "JetStream domain"),
    (("--js-api-prefix",), "jetstream_api_prefix", "JetStream API prefix"),
    (("--js-event-prefix",), "jetstream_event_prefix", "JetStream advisories prefix (used by the nats CLI)"),
    (("--colors",), "color_scheme", "the nats CLI's colour scheme for this context"),
)


def cmd_ls(args: argparse.Namespace) -> int:
    names = natscontext.known_contexts()
    if not names:
        _print(f"no contexts in {natscontext.context_dir()}: make one with 'natsjs-sync context save NAME'")
        return 0
    selected = natscontext.selected_context()
    width = max(len(n) for n in names) + 2
    for name in names:
        try:
            description = natscontext.load(name).description
        except natscontext.ContextError as exc:
            description = f"(unreadable: {exc})"
        mark = "*" if name == selected else ""
        _print(f"{name + mark:<{width}} {description}".rstrip())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    ctx = natscontext.load(args.name or "")
    selected = " (selected)" if ctx.name == natscontext.selected_context() else ""
    _print(f"NATS context {ctx.name}{selected}: {ctx.path}")

    def shown(key: str, value: Any) -> str:
        if args.secrets:
            return value if isinstance(value, str) else json.dumps(value)
        return natscontext.masked(key, value)

    for key in natscontext.FIELDS:
        value = ctx.settings.get(key)
        if value in (None, "", False, []):
            continue
        _print(f"  {key}: {shown(key, value)}")
    others = [k for k in ctx.settings if k not in natscontext.FIELDS and k != "name"]
    for key in others:
        _print(f"  {key}: {shown(key, ctx.settings[key])} (not used by this client; kept)")
    return 0


def _select(name: str) -> None:
    """Select ``name`` and say so: ``context select`` and ``context save --select``."""
    natscontext.select(name)
    _print(f"selected context {name}")


def cmd_select(args: argparse.Namespace) -> int:
    _select(args.name)
    return 0


def cmd_save(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    for flags, key, _ in _SAVE_OPTIONS:
        # A global option (--server) keeps its own destination on every parser.
        value = getattr(args, key, None) if key in vars(args) else getattr(args, flags[0][2:], None)
        if value is not None:
            changes[key] = value
    if args.tlsfirst is not None:
        changes["tls_first"] = args.tlsfirst
    if changes.get("user") and "password" not in changes and not _saved_password(args.name):
        # The nats CLI saves a --user given without a password as the token (its --user takes either).
        changes["token"] = changes.pop("user")
    ctx = natscontext.save(args.name, embed=args.embed, **changes)
    _print(f"saved context {ctx.name} in {ctx.path}")
    if args.select:
        _select(ctx.name)
    return 0


def _saved_password(name: str) -> bool:
    """The saved context ``name`` has a password (so a new ``--user`` is its user's name)."""
    if name not in natscontext.known_contexts():
        return False
    return bool(natscontext.load(name).settings.get("password"))


def cmd_previous(args: argparse.Namespace) -> int:
    previous = natscontext.previous_context()
    if previous is None:
        _print(f"no previous context; selected: {natscontext.selected_context() or 'none'}")
        return 0
    _select(previous)
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    natscontext.delete(args.name)
    _print(f"removed context {args.name}")
    return 0


def register(sub: Any) -> None:
    """Add the ``context`` command to the top-level subparsers ``sub``."""
    p = sub.add_parser("context", help="NATS contexts: named connection settings shared with the nats CLI")
    ctx = p.add_subparsers(dest="context_command", required=True)

    q = ctx.add_parser("ls", help="list the saved contexts (* marks the selected one)")
    q.set_defaults(func=cmd_ls)

    q = ctx.add_parser("show", help="show a context's settings (default: the selected one)")
    q.add_argument("name", nargs="?", default=None, help="the context (default: the selected one)")
    q.add_argument("--secrets", action="store_true",
                   help="show secrets too (passwords, tokens, seeds, JWTs, a URL's password); references "
                        "such as env://NAME are always shown")
    q.set_defaults(func=cmd_show)

    q = ctx.add_parser("select", help="make a context the default of this client and the nats CLI")
    q.add_argument("name", help="the context to select")
    q.set_defaults(func=cmd_select)

    q = ctx.add_parser("previous", aliases=["-"], help="select the context selected before the current one")
    q.set_defaults(func=cmd_previous)

    q = ctx.add_parser("save", help="create a context, or change the fields given of a saved one",
                       description="Create a context, or change the fields given of a saved one. The "
                                   "global --server, --user, --password, --creds and --nkey give the context's "
                                   "server URL(s) and credentials, as in the nats CLI: --user without a password "
                                   "(given or saved) is saved as the token; --password, --creds and --nkey take "
                                   f"{_REFERENCES}.")
    q.add_argument("name", help="the context's name")
    global_flags = {flag for flags, _ in GLOBAL_OPTIONS for flag in flags}
    for flags, key, help_text in _SAVE_OPTIONS:
        if any(flag in global_flags for flag in flags):
            continue  # --server: every parser has it already (the value saved is the same)
        q.add_argument(*flags, dest=key, default=None, help=help_text)
    q.add_argument("--tlsfirst", action=argparse.BooleanOptionalAction, default=None,
                   help="start with the TLS handshake, before the server's INFO")
    q.add_argument("--select", action="store_true", help="select the context as well")
    q.add_argument("--embed", action="store_true",
                   help="embed the credentials files (creds, nkey, jwt, seed) in the context, as data: references; "
                        "every file is read first: on an error nothing is saved")
    q.set_defaults(func=cmd_save)

    q = ctx.add_parser("rm", help="remove a context (the selected one only when it is the last)")
    q.add_argument("name", help="the context to remove")
    q.set_defaults(func=cmd_rm)
