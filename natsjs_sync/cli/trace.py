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


class _Drawing:
    """``nats trace``'s drawing of one trace, made event by event, and its egresses counted by kind.
    Not thread-safe."""

    def __init__(self, trace: Any, timestamps: bool):
        self.trace = trace
        self.timestamps = timestamps
        origin = trace.origin
        #: The first server's ingress: what ``--timestamp`` counts from.
        self.start = origin.ingress.timestamp if origin is not None and origin.ingress is not None else None
        self.lines: list[str] = []
        self.counts: Counter[str] = Counter()

    def stamp(self, line: str, at: datetime.datetime | None) -> str:
        """``line``, after the time since the first ingress when timestamps are asked for."""
        if not self.timestamps:
            return line
        if self.start is None or at is None:
            return f"[?] {line}"
        since = (at - self.start).total_seconds()
        return f"[{'Skew' if since < 0 else f'{since * 1e6:.0f}µs'}] {line}"

    def event(self, depth: int, event: Any) -> None:
        """Draw one server's event, indented by its ``depth`` in the path."""
        pad = "    " * depth
        self._ingress(pad, event)
        self._rewrites(pad, event)
        self._jetstream(pad, event)
        self._egresses(pad, event)

    def _ingress(self, pad: str, event: Any) -> None:
        from ..monitor.trace import ConnectionKind

        ingress = event.ingress
        if ingress is None:
            return
        head = _conn(ingress.kind, ingress.cid, ingress.name)
        cluster = event.server.cluster if ingress.kind in (ConnectionKind.CLIENT, ConnectionKind.GATEWAY) else ""
        pairs = _pairs(cluster=cluster or "", server=event.server.name, version=event.server.version)
        self.lines.append(pad + self.stamp(" ".join(p for p in (head, pairs) if p), ingress.timestamp))
        if ingress.error:
            self.lines.append(pad + f"--X Error: {ingress.error}")

    def _rewrites(self, pad: str, event: Any) -> None:
        """The subject mapping, service imports and stream exports the message went through."""
        mapping = event.subject_mapping
        if mapping is not None:
            self.lines.append(pad + self.stamp(f"    Mapping {_pairs(subject=mapping.mapped_to)}", mapping.timestamp))
        for si in event.service_imports:
            pairs = _pairs(**{"from": si.from_subject}, to=si.to, account=si.account)
            self.lines.append(pad + self.stamp(f"    Service Import {pairs}", si.timestamp))
        for se in event.stream_exports:
            pairs = _pairs(subject=se.to, account=se.account)
            self.lines.append(pad + self.stamp(f"    Stream Export {pairs}", se.timestamp))

    def _jetstream(self, pad: str, event: Any) -> None:
        from ..monitor.trace import ConnectionKind

        js = event.jetstream
        if js is None:
            return
        action = "no interest" if js.no_interest else ("not stored" if js.error else "stored")
        pairs = _pairs(action=action, stream=js.stream, subject=js.subject)
        self.lines.append(pad + self.stamp(f"--J JetStream {pairs}", js.timestamp))
        if js.error:
            self.lines.append(pad + f"--X Error: {js.error}")
        self.counts[_kind(ConnectionKind.JETSTREAM)] += 1

    def _egresses(self, pad: str, event: Any) -> None:
        from ..monitor.trace import ConnectionKind

        ingress = event.ingress
        if not event.egresses and ingress is not None and ingress.kind == ConnectionKind.CLIENT and not ingress.error:
            self.lines.append(pad + "--X No active interest")
        for eg in event.egresses:
            parts = [_ARROWS.get(eg.kind, "-->"), _conn(eg.kind, eg.cid, eg.name),
                     _pairs(account=eg.account, subject=eg.subscription, queue=eg.queue)]
            self.lines.append(pad + self.stamp(" ".join(p for p in parts if p), eg.timestamp))
            if eg.error:
                self.lines.append(pad + f"  --X Error: {eg.error}")
            self.counts[_kind(eg.kind)] += 1
            if eg.hop and self.trace.next_hop(eg) is None:
                self.lines.append(pad + "    (no trace event from that server)")

    def summary(self) -> list[str]:
        """The legend, the egresses counted by kind, and a warning when several streams stored the message."""
        from ..monitor.trace import ConnectionKind

        out = ["", "Legend: Client: --C Router: --> Gateway: ==> Leafnode: ~~> JetStream: --J Error: --X"]
        if self.counts:
            out += ["", "Egress Count:", ""]
            width = max(len(k) for k in self.counts)
            out += [f"   {kind:>{width}}: {n}" for kind, n in sorted(self.counts.items())]
        streams = self.counts[_kind(ConnectionKind.JETSTREAM)]
        if streams > 1:
            out += ["", f"WARNING: The message was received by {streams} streams"]
        return out


def render(trace: Any, timestamps: bool = False) -> list[str]:
    """The lines of ``nats trace``'s drawing of a :class:`~natsjs_sync.monitor.MessageTrace`."""
    drawing = _Drawing(trace, timestamps)
    for depth, event in trace.walk():
        drawing.event(depth, event)
    return drawing.lines + drawing.summary()


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
