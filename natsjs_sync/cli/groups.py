"""``natsjs-sync group ...``: partitioned consumer groups, for operators.

``ls`` lists a stream's groups, ``info`` shows a group's config and each
member with its partitions and whether an instance of it is consuming now,
``add`` and ``drop`` change an elastic group's membership (``drop`` is how a
member whose processes died gives its partitions to the others).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import _note, _print, client_for, when

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream import JetStream


def _kind_of(js: JetStream, stream: str, group: str, wanted: str | None) -> str:
    """``"static"`` or ``"elastic"``: the kind of group ``group`` is (``--kind`` when both exist).

    Raises:
        ConsumerGroupNotFoundError: no group of that name on the stream.
        ValueError: a static and an elastic group share the name and no kind was given.
    """
    from ..pcgroups import ConsumerGroupNotFoundError, get_elastic_config, get_static_config

    found = []
    for kind, get in (("static", get_static_config), ("elastic", get_elastic_config)):
        if wanted not in (None, kind):
            continue
        try:
            get(js, stream, group)
        except ConsumerGroupNotFoundError:
            continue
        found.append(kind)
    if not found:
        raise ConsumerGroupNotFoundError(f"no {wanted or 'static or elastic'} consumer group {group!r} "
                                         f"on stream {stream!r}")
    if len(found) > 1:
        raise ValueError(f"stream {stream!r} has a static and an elastic group {group!r}: give --kind")
    return found[0]


def _js_on_stream(nc: Client, stream: str) -> JetStream:
    """The JetStream context, once ``stream`` is known to exist (a missing stream is an error,
    not a stream without groups).

    Raises:
        StreamNotFoundError: no such stream.
        BadSubjectError: not a valid stream name.
    """
    js = nc.jetstream()
    js.stream(stream)
    return js


def group_ls(args: argparse.Namespace) -> int:
    from ..pcgroups import ConsumerGroupNotFoundError, list_elastic_groups, list_static_groups

    with client_for(args) as nc:
        js = _js_on_stream(nc, args.stream)
        rows = []
        for kind, lister in (("static", list_static_groups), ("elastic", list_elastic_groups)):
            try:
                rows += [(kind, name) for name in sorted(lister(js, args.stream))]
            except ConsumerGroupNotFoundError:
                continue  # no group of that kind was ever made
        if not rows:
            _print(f"no consumer groups on stream {args.stream}")
        for kind, name in rows:
            _print(f"{kind:8} {name}")
    return 0


def _describe(js: JetStream, stream: str, group: str, kind: str) -> str:
    from ..pcgroups import get_elastic_config, get_static_config

    if kind == "static":
        st = get_static_config(js, stream, group)
        return (f"static group {group} on stream {stream}: {st.max_members} partitions, "
                f"filters {', '.join(st.filters) or 'all subjects'}")
    el = get_elastic_config(js, stream, group)
    filters = ", ".join(f"{f.filter} (wildcards {','.join(map(str, f.partitioning_wildcards)) or 'all'})"
                        for f in el.partitioning_filters) or "all subjects"
    limits = f"buffer {el.max_buffered_msgs or 'unlimited'} msgs, {el.max_buffered_bytes or 'unlimited'} bytes"
    return f"elastic group {group} on stream {stream}: {el.max_members} partitions, filters {filters}, {limits}"


def group_info(args: argparse.Namespace) -> int:
    from ..pcgroups import list_elastic_members, list_static_members

    with client_for(args) as nc:
        js = _js_on_stream(nc, args.stream)
        kind = _kind_of(js, args.stream, args.group, args.kind)
        _print(_describe(js, args.stream, args.group, kind))
        states = (list_static_members if kind == "static" else list_elastic_members)(js, args.stream, args.group)
        if not states:
            _print("no members")
            return 0
        _print(f"{'member':20} {'partitions':12} {'active':6} {'waiting':>7} {'ack pending':>11} {'pending':>8}  "
               "pinned since")
        for s in states:
            parts = ",".join(map(str, s.partitions)) or "-"
            _print(f"{s.member:20} {parts:12} {'yes' if s.active else 'NO':6} {s.num_waiting:>7} "
                   f"{s.num_ack_pending:>11} {s.num_pending if s.consumer_exists else '-':>8}  "
                   f"{when(s.pinned_since)}")
        for s in states:
            if s.active or not s.partitions:
                continue
            fix = (f"; remove it with 'natsjs-sync group drop {args.stream} {args.group} {s.member}'"
                   if kind == "elastic" else "")
            _note(f"member {s.member} has no instance consuming: nobody consumes its partitions "
                  f"{','.join(map(str, s.partitions))} until one starts{fix}")
    return 0


def group_membership(args: argparse.Namespace) -> int:
    from ..pcgroups import add_members, delete_members

    change = add_members if args.action == "add" else delete_members
    with client_for(args) as nc:
        members = change(_js_on_stream(nc, args.stream), args.stream, args.group, args.members)
        _print(f"members of {args.group}: {', '.join(members) or 'none'}")
    return 0


_POSITIONALS = {
    "stream": "the stream the groups consume",
    "group": "the group's name",
    "members": "member names",
}


def register(sub: Any) -> None:
    """Add the ``group`` command to the top-level subparsers ``sub``."""
    group = sub.add_parser("group", help="partitioned consumer groups: list, members and their state, "
                                         "membership").add_subparsers(dest="action", required=True)
    for action, help_text, func, positionals in (
            ("ls", "list a stream's static and elastic groups", group_ls, ("stream",)),
            ("info", "a group's config and members: partitions, active or not", group_info, ("stream", "group")),
            ("add", "add members to an elastic group", group_membership, ("stream", "group", "members")),
            ("drop", "remove members from an elastic group (the others take their partitions)", group_membership,
             ("stream", "group", "members"))):
        p = group.add_parser(action, help=help_text)
        for name in positionals:
            p.add_argument(name, nargs="+" if name == "members" else None, help=_POSITIONALS[name])
        if action == "info":
            p.add_argument("--kind", choices=["static", "elastic"],
                           help="when a static and an elastic group share the name")
        p.set_defaults(func=func)
