"""``natsjs-sync context ls|show|select|save|rm``: the nats CLI's contexts, in the same files.

A context saved here is used by ``nats --context NAME`` and the other way
round; ``save`` on a saved context changes only the fields given and keeps
the others, those this client does not know included.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import natscontext
from . import GLOBAL_OPTIONS, _print

#: ``context save`` options -> context fields (the nats CLI's flag names where it has one).
_SAVE_OPTIONS = (
    ("server", "url", "server URL(s), comma-separated"),
    ("description", "description", "a description shown by 'context ls'"),
    ("user", "user", "user name"),
    ("password", "password", "password"),
    ("token", "token", "authentication token"),
    ("creds", "creds", "path of a .creds file"),
    ("nkey", "nkey", "path of a user nkey seed file"),
    ("user_jwt", "user_jwt", "a user JWT (signed with --nkey)"),
    ("tlscert", "cert", "client certificate file (PEM)"),
    ("tlskey", "key", "client certificate's key file (PEM)"),
    ("tlsca", "ca", "CA certificate file (PEM) to verify the server with"),
    ("inbox_prefix", "inbox_prefix", "prefix of reply inboxes"),
    ("js_domain", "jetstream_domain", "JetStream domain"),
    ("js_api_prefix", "jetstream_api_prefix", "JetStream API prefix"),
)
#: Shown as stars by ``context show``.
_SECRETS = ("password", "token", "user_jwt")


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
    for key in natscontext.FIELDS:
        value = ctx.settings.get(key)
        if value in (None, "", False):
            continue
        shown = "*********" if key in _SECRETS and not args.secrets else value
        _print(f"  {key}: {shown}")
    others = [k for k in ctx.settings if k not in natscontext.FIELDS and k != "name"]
    for key in others:
        _print(f"  {key}: {ctx.settings[key]} (not used by this client; kept)")
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
    for option, key, _ in _SAVE_OPTIONS:
        value = getattr(args, option)
        if value is not None:
            changes[key] = value
    if args.tlsfirst is not None:
        changes["tls_first"] = args.tlsfirst
    ctx = natscontext.save(args.name, **changes)
    _print(f"saved context {ctx.name} in {ctx.path}")
    if args.select:
        _select(ctx.name)
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
    q.add_argument("--secrets", action="store_true", help="show passwords and tokens too")
    q.set_defaults(func=cmd_show)

    q = ctx.add_parser("select", help="make a context the default of this client and the nats CLI")
    q.add_argument("name", help="the context to select")
    q.set_defaults(func=cmd_select)

    q = ctx.add_parser("save", help="create a context, or change the fields given of a saved one",
                       description="Create a context, or change the fields given of a saved one. The "
                                   "global --server gives the context's server URL(s), as in the nats CLI.")
    q.add_argument("name", help="the context's name")
    global_flags = {flag for flags, _ in GLOBAL_OPTIONS for flag in flags}
    for option, _, help_text in _SAVE_OPTIONS:
        flag = "--" + option.replace("_", "-")
        if flag not in global_flags:  # --server: every parser has it already (the value saved is the same)
            q.add_argument(flag, dest=option, default=None, help=help_text)
    q.add_argument("--tlsfirst", action=argparse.BooleanOptionalAction, default=None,
                   help="start with the TLS handshake, before the server's INFO")
    q.add_argument("--select", action="store_true", help="select the context as well")
    q.set_defaults(func=cmd_save)

    q = ctx.add_parser("rm", help="remove a context (the selected one only when it is the last)")
    q.add_argument("name", help="the context to remove")
    q.set_defaults(func=cmd_rm)
