"""``natsjs-sync stream ...`` and ``natsjs-sync consumer ...``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TimeoutError
from . import _print, client_for, positive_int, timeout_of
from . import when as _when
from .server import duration


def _value(v: Any) -> str:
    return str(getattr(v, "value", v))


def stream_ls(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        infos = list(nc.jetstream().list_streams(subject=args.subject))
        if not infos:
            _print("no streams")
            return 0
        _print(f"{'name':24} {'subjects':30} {'messages':>10} {'bytes':>12} {'last':19}")
        for i in infos:
            _print(f"{i.config.name:24} {','.join(i.config.subjects or [])[:30]:30} {i.state.messages:>10,} "
                   f"{i.state.bytes:>12,} {_when(i.state.last_ts)}")
    return 0


def stream_info(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        i = nc.jetstream().stream(args.name).info()
        c, s = i.config, i.state
        _print(f"stream {c.name}: {c.description or ''}")
        _print(f"  subjects   {', '.join(c.subjects or [])}")
        _print(f"  storage    {_value(c.storage)}, {c.num_replicas} replica(s), retention {_value(c.retention)}, "
               f"discard {_value(c.discard)}")
        _print(f"  limits     max_msgs {c.max_msgs}, max_bytes {c.max_bytes}, max_age {c.max_age} s, "
               f"duplicate window {c.duplicate_window} s")
        _print(f"  state      {s.messages:,} messages, {s.bytes:,} bytes, sequences {s.first_seq}..{s.last_seq}, "
               f"{s.consumer_count} consumer(s)")
        if i.cluster and i.cluster.leader:
            _print(f"  leader     {i.cluster.leader}")
    return 0


def stream_add(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        st = nc.jetstream().create_stream(
            name=args.name, subjects=args.subjects.split(","), storage=args.storage, retention=args.retention,
            max_age=args.max_age, max_msgs=args.max_msgs, num_replicas=args.replicas,
            duplicate_window=args.dupe_window)
        _print(f"created stream {st.name} on {', '.join(st.config.subjects or [])}")
    return 0


def stream_rm(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        nc.jetstream().delete_stream(args.name)
        _print(f"deleted stream {args.name}")
    return 0


def stream_purge(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        n = nc.jetstream().stream(args.name).purge(subject=args.subject, keep=args.keep)
        _print(f"purged {n:,} message(s) from {args.name}")
    return 0


def stream_get(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        st = nc.jetstream().stream(args.name)
        if args.last_for:
            m = st.get_last_msg_for_subject(args.last_for)
        elif args.seq is not None:
            m = st.get_msg(args.seq)
        else:
            raise ValueError("give a sequence or --last-for SUBJECT")
        _print(f"{args.name} #{m.seq} {m.subject} at {_when(m.time)}")
        for k, v in (m.headers.items_all() if m.headers else ()):
            _print(f"  {k}: {v}")
        _print(m.data.decode(errors="replace"))
    return 0


def consumer_ls(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        infos = list(nc.jetstream().list_consumers(args.stream))
        if not infos:
            _print(f"no consumers on {args.stream}")
            return 0
        _print(f"{'name':24} {'filter':24} {'ack':9} {'pending':>9} {'ack pending':>11} {'redelivered':>11}")
        for i in infos:
            flt = i.config.filter_subject or ",".join(i.config.filter_subjects or []) or ">"
            _print(f"{i.name:24} {flt[:24]:24} {_value(i.config.ack_policy):9} {i.num_pending:>9,} "
                   f"{i.num_ack_pending:>11,} {i.num_redelivered:>11,}")
    return 0


def consumer_info(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        i = nc.jetstream().consumer(args.stream, args.name).info()
        c = i.config
        _print(f"consumer {args.stream}/{i.name}")
        _print(f"  deliver    {_value(c.deliver_policy)}, ack {_value(c.ack_policy)}, ack wait {c.ack_wait} s, "
               f"max deliver {c.max_deliver}")
        _print(f"  filter     {c.filter_subject or ', '.join(c.filter_subjects or []) or '>'}")
        _print(f"  state      delivered stream seq {i.delivered.stream_seq}, ack floor {i.ack_floor.stream_seq}, "
               f"{i.num_pending:,} pending, {i.num_ack_pending:,} awaiting ack, {i.num_redelivered:,} redelivered")
    return 0


def consumer_add(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        kwargs: dict[str, Any] = {"durable_name": args.name, "ack_policy": args.ack, "deliver_policy": args.deliver}
        if args.filter:
            kwargs["filter_subject"] = args.filter
        if args.ack_wait:
            kwargs["ack_wait"] = args.ack_wait
        if args.max_deliver:
            kwargs["max_deliver"] = args.max_deliver
        cons = nc.jetstream().create_consumer(args.stream, **kwargs)
        _print(f"created consumer {args.stream}/{cons.name}")
    return 0


def consumer_rm(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        nc.jetstream().delete_consumer(args.stream, args.name)
        _print(f"deleted consumer {args.stream}/{args.name}")
    return 0


def consumer_next(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        cons = nc.jetstream().consumer(args.stream, args.name)
        got = 0
        for _ in range(args.count):
            try:
                msg = cons.next(timeout=timeout_of(args))
            except TimeoutError:
                break
            got += 1
            md = msg.metadata
            _print(f"[{md.sequence.stream}] {msg.subject} (delivery {md.num_delivered}, {md.num_pending} pending): "
                   f"{msg.data.decode(errors='replace')}")
            if not args.no_ack:
                msg.ack_sync()
        if got == 0:
            _print(f"no message within {timeout_of(args):g} s")
            return 1
    return 0


def register(sub: Any) -> None:
    stream = sub.add_parser("stream", help="manage streams").add_subparsers(dest="action", required=True)
    name_help = "the stream's name"
    p = stream.add_parser("ls", help="list streams")
    p.add_argument("--subject", help="only streams capturing this subject")
    p.set_defaults(func=stream_ls)
    p = stream.add_parser("info", help="a stream's configuration and state")
    p.add_argument("name", help=name_help)
    p.set_defaults(func=stream_info)
    p = stream.add_parser("add", help="create a stream")
    p.add_argument("name", help=name_help)
    p.add_argument("--subjects", required=True, help="comma-separated subjects")
    p.add_argument("--storage", choices=["file", "memory"], default="file", help="where messages are kept "
                   "(default: file)")
    p.add_argument("--retention", choices=["limits", "interest", "workqueue"], default="limits",
                   help="when messages are removed: by the limits, once every consumer acked, once one "
                        "consumer acked (default: limits)")
    p.add_argument("--max-age", type=duration, default=0.0, metavar="DURATION",
                   help="how long a message is kept: seconds, or e.g. 90s, 24h (0: no limit)")
    p.add_argument("--max-msgs", type=int, default=-1, help="the most messages kept (-1: no limit)")
    p.add_argument("--replicas", type=int, default=1, help="copies of each message in a cluster (default 1)")
    p.add_argument("--dupe-window", type=duration, default=120.0, metavar="DURATION",
                   help="how long a message id is remembered to drop duplicates: seconds, or e.g. 2m (default 2m)")
    p.set_defaults(func=stream_add)
    p = stream.add_parser("rm", help="delete a stream")
    p.add_argument("name", help=name_help)
    p.set_defaults(func=stream_rm)
    p = stream.add_parser("purge", help="remove messages")
    p.add_argument("name", help=name_help)
    p.add_argument("--subject", help="only messages of this subject")
    p.add_argument("--keep", type=int, help="keep this many of the newest messages")
    p.set_defaults(func=stream_purge)
    p = stream.add_parser("get", help="print a message by sequence")
    p.add_argument("name", help=name_help)
    p.add_argument("seq", type=int, nargs="?", help="the message's sequence number")
    p.add_argument("--last-for", metavar="SUBJECT", help="the last message of this subject instead")
    p.set_defaults(func=stream_get)

    consumer = sub.add_parser("consumer", help="manage consumers").add_subparsers(dest="action", required=True)
    stream_help, consumer_help = "the stream's name", "the consumer's name"
    p = consumer.add_parser("ls", help="list a stream's consumers")
    p.add_argument("stream", help=stream_help)
    p.set_defaults(func=consumer_ls)
    p = consumer.add_parser("info", help="a consumer's configuration and state")
    p.add_argument("stream", help=stream_help)
    p.add_argument("name", help=consumer_help)
    p.set_defaults(func=consumer_info)
    p = consumer.add_parser("add", help="create a durable pull consumer")
    p.add_argument("stream", help=stream_help)
    p.add_argument("name", help=consumer_help)
    p.add_argument("--filter", help="only messages of this subject")
    p.add_argument("--ack", choices=["explicit", "none", "all"], default="explicit",
                   help="the ack policy (default: explicit, each message acked)")
    p.add_argument("--deliver", choices=["all", "new", "last", "last_per_subject"], default="all",
                   help="where delivery starts (default: all, the first message)")
    p.add_argument("--ack-wait", type=duration, metavar="DURATION",
                   help="how long before an unacked message is delivered again: seconds, or e.g. 30s")
    p.add_argument("--max-deliver", type=int, help="the most times a message is delivered")
    p.set_defaults(func=consumer_add)
    p = consumer.add_parser("rm", help="delete a consumer")
    p.add_argument("stream", help=stream_help)
    p.add_argument("name", help=consumer_help)
    p.set_defaults(func=consumer_rm)
    p = consumer.add_parser("next", help="fetch (and ack) the next message(s)")
    p.add_argument("stream", help=stream_help)
    p.add_argument("name", help=consumer_help)
    p.add_argument("--count", type=positive_int, default=1,
                   help="messages to fetch (default 1), each waited for up to --timeout (default 5s)")
    p.add_argument("--no-ack", action="store_true", help="print the messages without acknowledging them")
    p.set_defaults(func=consumer_next)
    from .advisories import register_consumer_actions

    register_consumer_actions(consumer)
