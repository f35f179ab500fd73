"""``natsjs-sync consumer report``, ``consumer deadletter`` and ``events``: lag and dead letters, for operators.

``consumer report STREAM`` shows each consumer of a stream with its lag (as
the nats CLI's command of that name does) and each partitioned consumer group
on it with its members' lag. ``consumer deadletter STREAM [CONSUMER] --to DLQ``
copies the messages of max-deliveries and terminated advisories into a
dead-letter stream, once each, live or from advisories stored in a stream.
``events`` prints JetStream advisories as they arrive.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import _note, _print, client_for, count_or_zero, when
from .server import duration

if TYPE_CHECKING:
    from ..advisories import Advisory, DeadLetterResult
    from ..jetstream import JetStream


def _groups(js: JetStream, stream: str) -> list[tuple[str, str]]:
    """``(kind, group)`` of every partitioned consumer group on ``stream``."""
    from ..pcgroups import ConsumerGroupNotFoundError, list_elastic_groups, list_static_groups

    rows: list[tuple[str, str]] = []
    for kind, lister in (("static", list_static_groups), ("elastic", list_elastic_groups)):
        try:
            rows += [(kind, name) for name in sorted(lister(js, stream))]
        except ConsumerGroupNotFoundError:
            continue  # no group of that kind was ever made
    return rows


_HEADER = (f"{'consumer':24} {'pending':>9} {'ack pending':>11} {'redelivered':>11} {'waiting':>7}  "
           "last delivery")


def consumer_report(args: argparse.Namespace) -> int:
    from ..errors import ConsumerNotFoundError
    from ..pcgroups import compose_group_stream_name, list_elastic_members, list_static_members

    with client_for(args) as nc:
        js = nc.jetstream()
        js.stream(args.stream)  # a missing stream is an error, not a stream without consumers
        infos = sorted(js.list_consumers(args.stream), key=lambda i: i.name)
        _print(f"consumers of stream {args.stream}: {len(infos)}")
        if infos:
            _print(_HEADER)
        for i in infos:
            _print(f"{i.name:24} {i.num_pending:>9,} {i.num_ack_pending:>11,} {i.num_redelivered:>11,} "
                   f"{i.num_waiting:>7,}  {when(i.delivered.last_active)}")
        for kind, group in _groups(js, args.stream):
            states = (list_static_members if kind == "static" else list_elastic_members)(js, args.stream, group)
            on = args.stream if kind == "static" else compose_group_stream_name(args.stream, group)
            _print(f"\n{kind} group {group} (consumers on stream {on}): {len(states)} member(s)")
            if not states:
                continue
            _print(f"{'member':24} {'pending':>9} {'ack pending':>11} {'redelivered':>11} {'waiting':>7}  "
                   "active")
            for s in states:
                if not s.consumer_exists:
                    _print(f"{s.member:24} {'-':>9} {'-':>11} {'-':>11} {'-':>7}  no consumer")
                    continue
                try:
                    info = js.consumer_info(on, s.consumer)
                except ConsumerNotFoundError:  # gone since the member list was read
                    _print(f"{s.member:24} {'-':>9} {'-':>11} {'-':>11} {'-':>7}  no consumer")
                    continue
                _print(f"{s.member:24} {info.num_pending:>9,} {info.num_ack_pending:>11,} "
                       f"{info.num_redelivered:>11,} {info.num_waiting:>7,}  {'yes' if s.active else 'NO'}")
    return 0


def _say(result: DeadLetterResult, dlq: str) -> None:
    what = {"moved": "moved", "already_moved": "already in", "missing": "gone, recorded in"}[result.outcome.value]
    _print(f"{result.stream} #{result.stream_seq}: {what} {dlq} as {result.subject} "
           f"(#{result.dead_letter_seq})")


def consumer_deadletter(args: argparse.Namespace) -> int:
    from ..advisories import DeadLetters

    with client_for(args, long_running=args.seq is None and args.from_stream is None) as nc:
        js = nc.jetstream()
        dl = DeadLetters(js, args.to, prefix=args.prefix)
        if args.create:
            dl.create_stream()
        else:
            js.stream(args.to)  # fail before waiting when it does not exist
        if args.seq is not None:
            # By hand, a stream that is not there is a mistyped name: the API would record its message as
            # gone (a stream deleted after its advisory), leaving a record of a message that never was.
            js.stream(args.stream)
            _say(dl.move_sequence(args.stream, args.seq, reason=args.reason, consumer=args.consumer or ""), args.to)
            return 0
        if args.from_stream is not None:
            if not args.durable:
                raise ValueError("--from-stream needs --durable: the consumer that remembers what was handled")
            reader = js.create_or_update_consumer(args.from_stream, durable_name=args.durable,
                                                  ack_policy="explicit")
            done = 0
            for result in dl.drain_stored(reader, limit=args.count or None, stream=args.stream,
                                          consumer_name=args.consumer or "*"):
                _say(result, args.to)
                done += 1
            _note(f"{done} dead letter(s) handled; none left in {args.from_stream}")
            return 0
        with dl.feed(args.stream, args.consumer or "*") as feed:  # subscribed before saying so
            _note(f"moving dead letters of {args.stream}/{args.consumer or '*'} to {args.to} as they arrive"
                  + (f"; stopping after {args.idle:g} s without one" if args.idle else "; Ctrl-C stops"))
            done = 0
            for result in dl.move_all(feed.until_idle(args.idle) if args.idle else feed):
                _say(result, args.to)
                done += 1
                if args.count and done >= args.count:
                    break
    return 0


def _describe(adv: Advisory) -> str:
    from ..advisories import UnknownAdvisory

    if isinstance(adv, UnknownAdvisory):
        return f"{adv.type or '(no type)'} on {adv.subject}"
    kind = adv.type.rpartition(".")[2]
    fields = {k: getattr(adv, k) for k in ("stream", "consumer", "action", "stream_seq", "deliveries", "reason",
                                           "leader", "paused") if getattr(adv, k, None) not in (None, "")}
    return f"{kind} " + " ".join(f"{k}={v}" for k, v in fields.items())


def events(args: argparse.Namespace) -> int:
    import msgspec

    from ..advisories import ADVISORY_PREFIX, AdvisoryFeed, UnknownAdvisory, advisory_subjects

    # --stream alone narrows to every kind about that stream (not to nothing, nor to every stream's).
    kinds = args.kind or (_KINDS if args.stream != "*" else None)
    subjects = advisory_subjects(kinds, args.stream) if kinds else [f"{ADVISORY_PREFIX}.>"]
    with client_for(args, long_running=True) as nc, AdvisoryFeed(nc, subjects) as feed:
        _note(f"listening for JetStream advisories on {', '.join(subjects)}")
        seen = 0
        source = feed.until_idle(args.stop_after, args.stop_after) if args.stop_after else feed
        for adv in source:
            if args.json:
                raw = adv.raw if isinstance(adv, UnknownAdvisory) else msgspec.to_builtins(adv)
                _print(msgspec.json.encode(raw).decode())
            else:
                stamp = when(getattr(adv, "timestamp", None))
                _print(f"[{stamp}] {_describe(adv)}")
            seen += 1
            if args.count and seen >= args.count:
                break
    return 0


_KINDS = ("max_deliver", "terminated", "nak", "consumer_action", "stream_action", "stream_leader_elected",
          "consumer_leader_elected")


def register_consumer_actions(consumer: Any) -> None:
    """Add ``report`` and ``deadletter`` to the ``consumer`` command's subparsers."""
    p = consumer.add_parser("report", help="a stream's consumers and consumer groups with their lag")
    p.add_argument("stream", help="the stream's name")
    p.set_defaults(func=consumer_report)

    p = consumer.add_parser(
        "deadletter", help="copy messages that reached max deliveries or were terminated into a dead-letter stream",
        description="Copy each message a max-deliveries or terminated advisory names into the stream --to, on "
                    "<prefix>.<stream>.<seq>, with its subject, headers, sequence and the reason in Dead-Letter-* "
                    "headers; once each, however often it runs. Live advisories by default (Ctrl-C stops), or "
                    "advisories stored in a stream (--from-stream), or one message by --seq.")
    p.add_argument("stream", help="the stream whose dead letters to move (* for every stream)")
    p.add_argument("consumer", nargs="?", help="only this consumer's (default: every consumer's)")
    p.add_argument("--to", required=True, metavar="STREAM", help="the dead-letter stream")
    p.add_argument("--prefix", default="deadletter", help="first token of the dead-letter subjects "
                   "(default: deadletter)")
    p.add_argument("--create", action="store_true", help="create the dead-letter stream on <prefix>.> if missing")
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many (0: never)")
    p.add_argument("--idle", type=duration, default=0.0, metavar="DURATION",
                   help="stop after this long without an advisory, e.g. 30s (0: never)")
    p.add_argument("--from-stream", metavar="STREAM",
                   help="read stored advisories from this stream (through --durable) instead of live ones")
    p.add_argument("--durable", metavar="NAME", help="the durable consumer that reads --from-stream")
    p.add_argument("--seq", type=int, help="move this one message of the stream (by its sequence) instead")
    p.add_argument("--reason", default="manual", help="the reason recorded with --seq (default: manual)")
    p.set_defaults(func=consumer_deadletter)


def register(sub: Any) -> None:
    """Add the ``events`` command to the top-level subparsers ``sub``."""
    from . import STOP_AFTER

    p = sub.add_parser("events", help="print JetStream advisories as they arrive")
    p.add_argument("--kind", action="append", choices=_KINDS,
                   help="only advisories of this kind (repeat for several; default: every advisory)")
    p.add_argument("--stream", default="*", help="only advisories about this stream (of the --kinds, or of every kind)")
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", **STOP_AFTER)
    p.add_argument("--json", action="store_true", help="print each advisory as JSON, one a line")
    p.set_defaults(func=events)
