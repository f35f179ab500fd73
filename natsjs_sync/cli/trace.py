"""``natsjs-sync trace SUBJECT [DATA]``: the path a message takes through the servers
(ADR-41), drawn as the nats CLI's ``nats trace`` draws it.

Trace only by default: the servers report where the message would go and deliver
nothing; ``--deliver`` delivers it too.
"""

from __future__ import annotations

import argparse
import datetime
from collections import Counter
from typing import Any

from . import _note, _print, client_for, parse_headers, timeout_of

#: The arrow of an egress of each connection kind (the nats CLI's).
_ARROWS = {0: "--C", 1: "-->", 2: "==>", 4: "~~>", 5: "--J"}


def _kind(kind: int) -> str:
    from ..monitor.trace import ConnectionKind

    return ConnectionKind.NAMES.get(kind, f"Kind{kind}")


def _conn(kind: int, cid: int, name: str) -> str:
    from ..monitor.trace import ConnectionKind

    prefix = ConnectionKind.ID_PREFIXES.get(kind, "cid")
    return f"{_kind(kind)} {name!r} {prefix}:{cid}".replace("'", '"') if name else f"{_kind(kind)} {prefix}:{cid}"


def _pairs(**values: str) -> str:
    return " ".join(f'{key}:"{value}"' for key, value in values.items() if value)


def render(trace: Any, timestamps: bool = False) -> list[str]:
    """The lines of ``nats trace``'s drawing of a :class:`~natsjs_sync.monitor.MessageTrace`."""
    from ..monitor.trace import ConnectionKind

    lines: list[str] = []
    counts: Counter[str] = Counter()
    origin = trace.origin
    start = origin.ingress.timestamp if origin is not None and origin.ingress is not None else None

    def stamp(line: str, at: datetime.datetime | None) -> str:
        if not timestamps:
            return line
        if start is None or at is None:
            return f"[?] {line}"
        since = (at - start).total_seconds()
        return f"[{'Skew' if since < 0 else f'{since * 1e6:.0f}µs'}] {line}"

    for depth, event in trace.walk():
        pad = "    " * depth
        ingress = event.ingress
        if ingress is not None:
            head = _conn(ingress.kind, ingress.cid, ingress.name)
            cluster = event.server.cluster if ingress.kind in (ConnectionKind.CLIENT, ConnectionKind.GATEWAY) else ""
            lines.append(pad + stamp(" ".join(p for p in (head, _pairs(cluster=cluster or "", server=event.server.name,
                                                                     version=event.server.version)) if p),
                                     ingress.timestamp))
            if ingress.error:
                lines.append(pad + f"--X Error: {ingress.error}")
        mapping = event.subject_mapping
        if mapping is not None:
            lines.append(pad + stamp(f"    Mapping {_pairs(subject=mapping.mapped_to)}", mapping.timestamp))
        for si in event.service_imports:
            pairs = _pairs(**{"from": si.from_subject}, to=si.to, account=si.account)
            lines.append(pad + stamp(f"    Service Import {pairs}", si.timestamp))
        for se in event.stream_exports:
            lines.append(pad + stamp(f"    Stream Export {_pairs(subject=se.to, account=se.account)}", se.timestamp))
        js = event.jetstream
        if js is not None:
            action = "no interest" if js.no_interest else ("not stored" if js.error else "stored")
            pairs = _pairs(action=action, stream=js.stream, subject=js.subject)
            lines.append(pad + stamp(f"--J JetStream {pairs}", js.timestamp))
            if js.error:
                lines.append(pad + f"--X Error: {js.error}")
            counts[_kind(ConnectionKind.JETSTREAM)] += 1
        egresses = event.egresses
        if not egresses and ingress is not None and ingress.kind == ConnectionKind.CLIENT and not ingress.error:
            lines.append(pad + "--X No active interest")
        for eg in egresses:
            parts = [_ARROWS.get(eg.kind, "-->"), _conn(eg.kind, eg.cid, eg.name),
                     _pairs(account=eg.account, subject=eg.subscription, queue=eg.queue)]
            lines.append(pad + stamp(" ".join(p for p in parts if p), eg.timestamp))
            if eg.error:
                lines.append(pad + f"  --X Error: {eg.error}")
            counts[_kind(eg.kind)] += 1
            if eg.hop and trace.next_hop(eg) is None:
                lines.append(pad + "    (no trace event from that server)")
    lines += ["", "Legend: Client: --C Router: --> Gateway: ==> Leafnode: ~~> JetStream: --J Error: --X"]
    if counts:
        lines += ["", "Egress Count:", ""]
        width = max(len(k) for k in counts)
        lines += [f"   {kind:>{width}}: {n}" for kind, n in sorted(counts.items())]
    if counts[_kind(ConnectionKind.JETSTREAM)] > 1:
        lines += ["", f"WARNING: The message was received by {counts[_kind(ConnectionKind.JETSTREAM)]} streams"]
    return lines


def cmd_trace(args: argparse.Namespace) -> int:
    from ..monitor.trace import trace_message

    headers = parse_headers(args.header)
    with client_for(args) as nc:
        _print(f"Tracing message route to subject {args.subject}"
               + (" with delivery to the final destination" if args.deliver else ""))
        _print()
        trace = trace_message(nc, args.subject, (args.data or "").encode(), headers=headers, deliver=args.deliver,
                              timeout=timeout_of(args, 2.0))
        for line in render(trace, args.timestamp):
            _print(line)
        if not trace.complete:
            _note(f"not every server the message was forwarded to reported within {timeout_of(args, 2.0)} s")
    return 0


def register(sub: Any) -> None:
    """Add the ``trace`` command to the top-level subparsers ``sub``."""
    p = sub.add_parser("trace", help="trace a message's path through the servers (nats-server 2.11+)",
                       description="Publish a traced message (ADR-41) and draw the path each server reports: "
                                   "routes, gateways, leafnodes, accounts, streams and subscribers. Trace only "
                                   "unless --deliver: nothing is delivered. --timeout (default 2s) bounds the "
                                   "wait for the servers' events.")
    p.add_argument("subject", help="the subject to publish to")
    p.add_argument("data", nargs="?", default=None, help="the message body (default: empty)")
    p.add_argument("--deliver", action="store_true", help="deliver the message to the final destination too")
    p.add_argument("--timestamp", "-T", action="store_true", help="show each event's time since the ingress")
    p.add_argument("--header", "-H", action="append", metavar="'KEY: VALUE'",
                   help="a message header 'Key: value' (repeatable)")
    p.set_defaults(func=cmd_trace)
