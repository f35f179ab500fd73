"""``natsjs-sync service ls|info|stats|ping``: find and inspect services (ADR-32).

The services package is imported when a service command runs, not when the
command line is built, so other commands start no slower.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import _print, client_for, count_or_zero, timeout_of
from .server import duration

if TYPE_CHECKING:
    from ..micro.models import ServiceVerb, _Model

    M = TypeVar("M", bound=_Model)


#: How long the commands wait for the first answer when --timeout is not given.
_TIMEOUT = 2.0


def _duration(ns: int) -> str:
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.1f}us"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.2f}ms"
    return f"{ns / 1_000_000_000:.2f}s"


def _metadata(meta: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(meta.items())) or "-"


def _dump(docs: Sequence[_Model]) -> None:
    _print(json.dumps([d.to_dict() for d in docs], indent=2))


def _none_answered(args: argparse.Namespace, none_listening: bool = False) -> int:
    """The error when no service answered; ``none_listening``: the server said at once that no one
    listens (no responders), so no time was waited."""
    waited = "none is running (no responders)" if none_listening else f"within {timeout_of(args, _TIMEOUT):g} s"
    if args.name:
        who = f"service {args.name}" + (f" instance {args.id}" if args.id else "")
        print(f"error: {who} did not answer: {waited}", file=sys.stderr)
    else:
        print(f"error: no service answered: {waited}", file=sys.stderr)
    return 1


def _discover(args: argparse.Namespace, verb: ServiceVerb, model: type[M]) -> tuple[list[M], bool]:
    """The answers of the services ``args`` names, and whether the server said at once that none
    listens (no responders: nothing was waited for)."""
    from .._timeout import USE_DEFAULT
    from ..errors import NoRespondersError
    from ..micro import ServiceClient

    with client_for(args) as nc:
        client = ServiceClient(nc, timeout=timeout_of(args, _TIMEOUT), stall=args.stall)
        try:
            found = client._discover(verb, model, args.name, args.id, USE_DEFAULT, None, none_listening_raises=True)
        except NoRespondersError:
            return [], True
    return found, False


def service_ls(args: argparse.Namespace) -> int:
    from ..micro import ServiceClient

    with client_for(args) as nc:
        infos = ServiceClient(nc, timeout=timeout_of(args, _TIMEOUT), stall=args.stall).info(args.name)
    infos.sort(key=lambda i: (i.name, i.version, i.id))
    if args.json:
        _dump(infos)
        return 0
    if not infos:
        _print("no services" + (f" named {args.name}" if args.name else ""))
        return 0
    _print(f"{'name':20} {'version':12} {'id':24} {'endpoints':>9}  description")
    for i in infos:
        _print(f"{i.name:20} {i.version:12} {i.id:24} {len(i.endpoints):>9}  {i.description}")
    return 0


def service_info(args: argparse.Namespace) -> int:
    from ..micro import ServiceInfo, ServiceVerb

    infos, none_listening = _discover(args, ServiceVerb.INFO, ServiceInfo)
    if args.json:
        _dump(infos)
    if not infos:
        return _none_answered(args, none_listening)
    if args.json:
        return 0
    for i in sorted(infos, key=lambda i: i.id):
        _print(f"{i.name} {i.version} (id {i.id})")
        if i.description:
            _print(f"  {i.description}")
        _print(f"  metadata: {_metadata(i.metadata)}")
        _print(f"  {'endpoint':20} {'subject':30} {'queue group':12} metadata")
        for e in i.endpoints:
            _print(f"  {e.name:20} {e.subject:30} {e.queue_group or '(none)':12} {_metadata(e.metadata)}")
    return 0


def service_stats(args: argparse.Namespace) -> int:
    from ..micro import ServiceStats, ServiceVerb

    stats, none_listening = _discover(args, ServiceVerb.STATS, ServiceStats)
    if args.json:
        _dump(stats)
    if not stats:
        return _none_answered(args, none_listening)
    if args.json:
        return 0
    total_requests = total_errors = 0
    for s in sorted(stats, key=lambda s: s.id):
        started = s.started.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        _print(f"{s.name} {s.version} (id {s.id}), started {started}")
        _print(f"  {'endpoint':20} {'requests':>9} {'errors':>7} {'average':>9} {'total':>9}  last error")
        for e in s.endpoints:
            total_requests += e.num_requests
            total_errors += e.num_errors
            _print(f"  {e.name:20} {e.num_requests:>9,} {e.num_errors:>7,} {_duration(e.average_processing_time):>9} "
                   f"{_duration(e.processing_time):>9}  {e.last_error or '-'}")
            if e.data is not None:
                _print(f"  {'':20} data: {json.dumps(e.data)}")
    _print(f"{len(stats)} instance(s), {total_requests:,} request(s), {total_errors:,} error(s)")
    return 0


def service_ping(args: argparse.Namespace) -> int:
    from ..errors import NoRespondersError
    from ..micro import ServicePing, ServiceVerb, control_subject
    from ..request_many import request_many

    subject = control_subject(ServiceVerb.PING, args.name, args.id)
    answers: list[tuple[ServicePing, float]] = []
    with client_for(args) as nc:
        start = time.perf_counter()
        max_messages = args.count or (1 if args.id else None)
        with request_many(nc, subject, timeout=timeout_of(args, _TIMEOUT), stall=args.stall,
                          max_messages=max_messages) as replies:
            try:
                for msg in replies:
                    answers.append((ServicePing.from_json(msg.data), time.perf_counter() - start))
            except NoRespondersError:
                none_listening = True  # no service at all: reported below
            else:
                none_listening = False
    if not answers:
        return _none_answered(args, none_listening)
    for ping, rtt in answers:
        _print(f"{ping.name:20} {ping.version:12} {ping.id:24} {rtt * 1000:8.2f} ms")
    _print(f"{len(answers)} answer(s)")
    return 0


def positive_duration(text: str) -> float:
    """A duration that must be more than 0 (``--stall``): argparse's ``type``."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r}")
    return seconds


def _common(p: argparse.ArgumentParser, name_required: bool, with_id: bool) -> None:
    if name_required:
        p.add_argument("name", help="the service name")
    else:
        p.add_argument("name", nargs="?", help="only services of this name")
    if with_id:
        p.add_argument("id", nargs="?", help="one instance's id")
    else:
        p.set_defaults(id=None)
    p.add_argument("--stall", type=positive_duration, default=0.5, metavar="DURATION",
                   help="seconds without another answer after which all have answered (default 0.5); the "
                        "first answer is waited for up to --timeout (default 2s here)")


def register(sub: Any) -> None:
    service = sub.add_parser("service", help="find and inspect services").add_subparsers(dest="action",
                                                                                          required=True)
    p = service.add_parser("ls", help="list the running service instances")
    _common(p, name_required=False, with_id=False)
    p.add_argument("--json", action="store_true", help="print the INFO documents as JSON")
    p.set_defaults(func=service_ls)
    p = service.add_parser("info", help="a service's endpoints and metadata")
    _common(p, name_required=True, with_id=True)
    p.add_argument("--json", action="store_true", help="print the INFO documents as JSON")
    p.set_defaults(func=service_info)
    p = service.add_parser("stats", help="a service's request and error counts and times")
    _common(p, name_required=True, with_id=True)
    p.add_argument("--json", action="store_true", help="print the STATS documents as JSON")
    p.set_defaults(func=service_stats)
    p = service.add_parser("ping", help="ping services and show their round-trip times")
    _common(p, name_required=False, with_id=True)
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many answers (0: all)")
    p.set_defaults(func=service_ping)
