"""Health checks in the spirit of ``nats server check``: a status, a line, an exit code.

Each check returns a :class:`CheckResult` whose :attr:`~CheckResult.status` is a
Nagios status (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and whose
:meth:`~CheckResult.line` is one line starting with the status word, with Nagios
performance data after ``|``; so a check can sit in a cron job, a Nagios or
Icinga service, or a Kubernetes probe (``natsjs-sync server check ...``).

A check never raises for what it checks: a server that cannot be reached, a
stream that is missing, a request that times out are CRITICAL results. Only
arguments a check cannot use raise (``ValueError``).

What counts as degraded and what as down:

- a replica (of a stream, a consumer) that is offline or behind, while the group
  still has a leader and a quorum of current peers, is WARNING: the asset works,
  with less redundancy;
- no leader, fewer current peers than a quorum, the asset missing, the server
  unreachable: CRITICAL;
- a threshold given by the caller and crossed: the level that threshold names.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import enum
import json
import math
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._redact import without_userinfo
from ..errors import (
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    MsgNotFoundError,
    NatsError,
    NotFoundError,
)
from ..jetstream.stream_config import PeerInfo

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.stream_config import ClusterInfo


class Status(enum.IntEnum):
    """A Nagios status; its value is the exit code of the check."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


#: The output formats of a check, as ``nats server check --format`` names them.
FORMATS = ("nagios", "json", "prometheus", "text")
#: The prefix of every Prometheus metric name (``nats server check --namespace``'s default).
DEFAULT_NAMESPACE = "nats_server_check"


class CheckResult:
    """What one check found: messages at each level and performance data. Not thread-safe.

    The status is the worst level any message was added at (OK when there is none). The
    result renders as the nats CLI's ``server check`` renders its own (:meth:`render`), so
    what reads one (Nagios, a JSON parser, a Prometheus textfile collector) reads the other.

    Attributes:
        check: the check suite, as the nats CLI names it (``"connections"``, ``"stream"``,
            ``"kv"``, ...): the middle of every Prometheus metric name.
        name: which one (a stream's name, ``"Connection"``), as the nats CLI names it: the
            first word after the status in Nagios text, ``check_name`` in JSON, the ``item``
            label in Prometheus; ``None``: the suite's name.
        messages: ``(status, text)`` in the order they were found.
        perfdata: ``(label, value, unit, warn, crit)`` for the performance data (a threshold
            ``None`` or 0 is not set, as in the nats CLI).
        help: a description of some of the perfdata labels (the Prometheus ``HELP`` text).
    """

    def __init__(self, check: str, name: str | None = None):
        self.check = check
        self.name = name
        self.messages: list[tuple[Status, str]] = []
        self.perfdata: list[tuple[str, float, str, float | None, float | None]] = []
        self.help: dict[str, str] = {}

    @property
    def status(self) -> Status:
        """The worst status found (OK when nothing was added)."""
        return max((s for s, _ in self.messages), default=Status.OK)

    def add(self, status: Status, text: str) -> None:
        """Record a finding at ``status``."""
        self.messages.append((status, text))

    def ok(self, text: str) -> None:
        """Record a finding at OK."""
        self.add(Status.OK, text)

    def warning(self, text: str) -> None:
        """Record a finding at WARNING."""
        self.add(Status.WARNING, text)

    def critical(self, text: str) -> None:
        """Record a finding at CRITICAL."""
        self.add(Status.CRITICAL, text)

    def unknown(self, text: str) -> None:
        """Record a finding at UNKNOWN."""
        self.add(Status.UNKNOWN, text)

    def ok_unless_bad(self, text: str) -> None:
        """Record a finding at OK when no warning or critical one was recorded before."""
        if self.status == Status.OK:
            self.ok(text)

    def perf(self, label: str, value: float, unit: str = "", warn: float | None = None,
             crit: float | None = None, description: str | None = None) -> None:
        """Record a measurement for the performance data (``label=value[unit];warn;crit``);
        ``description`` is its Prometheus ``HELP`` text."""
        self.perfdata.append((label, value, unit, warn, crit))
        if description:
            self.help[label] = description

    def _texts(self, status: Status) -> list[str]:
        return [t for s, t in self.messages if s == status]

    @property
    def _item(self) -> str:
        return self.check if self.name is None else self.name

    def line(self) -> str:
        """The Nagios plugin output: ``render("nagios")``."""
        return self.render("nagios")

    def render(self, fmt: str = "nagios", namespace: str = DEFAULT_NAMESPACE) -> str:
        """The result as the nats CLI's ``server check --format`` renders it.

        - ``nagios``: one line, ``STATUS NAME Crit:... Warn:... OK:... | perfdata``
          (``Unknown:...`` for a check that could not run);
        - ``json``: ``status``, ``check_suite``, ``check_name``, ``warning``, ``critical``,
          ``ok`` (each left out when empty; ``unknown`` too), ``perf_data`` (``name``,
          ``value``, ``warning``, ``critical``, ``unit``);
        - ``prometheus``: one gauge per perfdata label, ``<namespace>_<check>_<label>{item="NAME"}``,
          and ``<namespace>_<check>_status_code{item="NAME",status="OK"}`` (the exit code),
          in the text exposition format, sorted by name;
        - ``text``: for people: the status, a table of the findings and one of the metrics.

        Raises:
            ValueError: an unknown format.
        """
        if fmt == "nagios":
            return self._nagios()
        if fmt == "json":
            return self._json()
        if fmt == "prometheus":
            return self._prometheus(namespace)
        if fmt == "text":
            return self._text()
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")

    def exit_code(self, fmt: str = "nagios") -> int:
        """The process's exit code for ``fmt``: the Nagios code of the status, except in
        Prometheus format, always 0 (a scraper reads the status from the ``status_code`` metric)."""
        return 0 if fmt == "prometheus" else int(self.status)

    def _perf_items(self) -> list[tuple[str, float, str, float, float]]:
        return [(label, float(value), unit, float(w or 0), float(c or 0))
                for label, value, unit, w, c in self.perfdata]

    def _nagios(self) -> str:
        parts = [self._item]
        parts += [f"Unknown:{t}" for t in self._texts(Status.UNKNOWN)]
        parts += [f"Crit:{t}" for t in self._texts(Status.CRITICAL)]
        parts += [f"Warn:{t}" for t in self._texts(Status.WARNING)]
        parts += [f"OK:{t}" for t in self._texts(Status.OK)]
        out = f"{self.status.name} {' '.join(parts)}"
        if self.perfdata:
            out += " | " + " ".join(_nagios_perf(*item) for item in self._perf_items())
        return out

    def _json(self) -> str:
        doc: dict[str, Any] = {"status": self.status.name, "check_suite": self.check, "check_name": self._item}
        for key, status in (("warning", Status.WARNING), ("critical", Status.CRITICAL), ("ok", Status.OK),
                            ("unknown", Status.UNKNOWN)):
            texts = self._texts(status)
            if texts:
                doc[key] = texts
        doc["perf_data"] = [
            {"name": label, "value": _json_number(value), "warning": _json_number(w), "critical": _json_number(c),
             **({"unit": unit} if unit else {})}
            for label, value, unit, w, c in self._perf_items()
        ]
        # As Go's encoding/json writes it: <, >, & and the line separators escaped (a parser reads the
        # same text either way).
        text = json.dumps(doc, indent=2, ensure_ascii=False)
        for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                              ("\u2029", "\\u2029")):
            text = text.replace(char, escaped)
        return text

    def _prometheus(self, namespace: str) -> str:
        item = _prom_label(self._item.replace('"', "."))
        families: dict[str, tuple[str, list[str]]] = {}
        for label, value, _unit, _w, _c in self._perf_items():
            name = _metric_name(namespace, self.check, label)
            help_text = self.help.get(label) or f"Data about the NATS CLI check {self.check}"
            families.setdefault(name, (help_text, []))[1].append(f'{name}{{item="{item}"}} {_go_float(value)}')
        name = _metric_name(namespace, self.check, "status_code")
        families[name] = (f"Nagios compatible status code for {self.check}",
                          [f'{name}{{item="{item}",status="{self.status.name}"}} {int(self.status)}'])
        out = []
        for name in sorted(families):
            help_text, samples = families[name]
            out.append(f"# HELP {name} {_prom_help(help_text)}")
            out.append(f"# TYPE {name} gauge")
            out.extend(samples)
        return "\n".join(out) + "\n"

    def _text(self) -> str:
        out = [f"{self._item}: {self.status.name}", ""]
        rows = [(s.name.capitalize() if s != Status.OK else "OK", t)
                for status in (Status.OK, Status.WARNING, Status.CRITICAL, Status.UNKNOWN)
                for s, t in self.messages if s == status]
        if rows:
            out += ["Status Detail", "", _table(("Status", "Message"), rows), ""]
        if self.perfdata:
            metrics = [(label, _human(value), unit, _human(c) if c else "", _human(w) if w else "",
                        self.help.get(label, "")) for label, value, unit, w, c in self._perf_items()]
            out += ["Check Metrics", "", _table(("Metric", "Value", "Unit", "Critical Threshold",
                                                 "Warning Threshold", "Description"), metrics), ""]
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<CheckResult {self.line()!r}>"


def _nagios_perf(label: str, value: float, unit: str, warn: float, crit: float) -> str:
    """One perfdata item as the nats CLI writes it: whole numbers, but seconds to 4 decimals;
    thresholds only when set (0 is not set)."""
    def num(v: float) -> str:
        return f"{v:.4f}" if unit == "s" else f"{v:.0f}"

    if " " in label or "\t" in label:
        label = f"'{label}'"
    out = f"{label}={num(value)}{unit}"
    if warn or crit:
        out += f";{num(warn)}" if warn else ";"
        if crit:
            out += f";{num(crit)}"
    return out


def _json_number(v: float) -> int | float:
    """A whole float as an int: Go writes ``3``, not ``3.0``."""
    return int(v) if v.is_integer() else v


def _go_float(v: float) -> str:
    """A float as Go's ``strconv.FormatFloat(v, 'g', -1, 64)`` writes it (the Prometheus
    text format's numbers): the shortest digits, with an exponent below 1e-4 and from 1e6
    (``%g``'s rule for the shortest precision: ``1e+06``, ``1.5e-05``)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    sign, digits, exp = decimal.Decimal(repr(v)).normalize().as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    point = len(text) + exp  # the decimal point's place after the first digit's
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        e = point - 1
        body = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        body = "0." + "0" * -point + text
    elif point >= len(text):
        body = text + "0" * (point - len(text))
    else:
        body = text[:point] + "." + text[point:]
    return ("-" if sign else "") + body


def _metric_name(*parts: str) -> str:
    """Prometheus's ``BuildFQName``: the non-empty parts joined by ``_``."""
    return "_".join(p for p in parts if p)


def _prom_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _prom_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _human(v: float) -> str:
    """A number for people: thousands separated, at most 3 decimals."""
    return f"{v:,.0f}" if v.is_integer() else f"{v:,.3f}".rstrip("0").rstrip(".")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]

    def row(cells: Sequence[str]) -> str:
        return "│ " + " │ ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " │"

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    return "\n".join([rule("╭", "┬", "╮"), row(header), rule("├", "┼", "┤"), *map(row, rows),
                      rule("╰", "┴", "╯")])


def _threshold(result: CheckResult, what: str, value: float, warn: float | None, crit: float | None,
               fmt: Callable[[float], str] = str, above: bool = True) -> None:
    """Compare ``value`` with the thresholds: ``above`` means bigger is worse."""
    def crossed(limit: float) -> bool:
        return value >= limit if above else value < limit

    if crit is not None and crossed(crit):
        result.critical(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(crit)}")
    elif warn is not None and crossed(warn):
        result.warning(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(warn)}")


def _levels(result: CheckResult, what: str, value: int, warn: int | None, crit: int | None,
            more_is_worse: bool) -> None:
    """Compare ``value`` with thresholds as the nats CLI's stream check does: reaching one (``>=``,
    or ``<=`` when fewer is worse) crosses it; a threshold of 0 or less (or ``None``) is not set."""
    def crossed(limit: int | None) -> bool:
        return limit is not None and limit > 0 and (value >= limit if more_is_worse else value <= limit)

    sign = ">=" if more_is_worse else "<="
    if crossed(crit):
        result.critical(f"{what} {value} {sign} {crit}")
    elif crossed(warn):
        result.warning(f"{what} {value} {sign} {warn}")


def without_credentials(url: str) -> str:
    """``url`` (a URL, a comma-separated list, or a message quoting them) without the
    ``user:password@`` (or ``token@``) of its URLs, whatever a password holds: a check's
    line ends up in logs and dashboards."""
    return without_userinfo(url)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s"


# ---------------------------------------------------------------------------------------------- connection


def check_connection(
    servers: str | Sequence[str],
    *,
    connect_warn: float | None = 0.5,
    connect_critical: float | None = 1.0,
    rtt_warn: float | None = 0.5,
    rtt_critical: float | None = 1.0,
    req_warn: float | None = 0.5,
    req_critical: float | None = 1.0,
    timeout: float = 5.0,
    **connect_options: Any,
) -> CheckResult:
    """Connect, measure the round trip, and send a request to ourselves through the server.

    Args:
        servers: the server URL(s).
        connect_warn, connect_critical: seconds to connect.
        rtt_warn, rtt_critical: seconds of the round trip (PING/PONG).
        req_warn, req_critical: seconds of a request answered through the server.
        timeout: seconds allowed for the connection and for each step after it.
        connect_options: passed to :func:`natsjs_sync.connect` (``user``,
            ``user_credentials``, ``tls``, ...).

    Returns:
        CRITICAL when the server cannot be reached, refuses us, or a step fails;
        the threshold's level when a time crosses one; OK otherwise.
    """
    from .._connect import connect

    url = servers if isinstance(servers, str) else ",".join(servers)
    result = CheckResult("connections", "Connection")
    options: dict[str, Any] = dict(name="natsjs-check", connect_timeout=timeout, allow_reconnect=False)
    options.update(connect_options)
    started = time.perf_counter()
    try:
        nc = connect(servers, **options)
    except (NatsError, OSError) as exc:
        result.critical(f"cannot connect to {without_credentials(url)}: {without_credentials(str(exc))}")
        return result
    try:
        took = time.perf_counter() - started
        result.ok(f"connected to {nc.connected_url} in {_ms(took)}")
        result.perf("connect_time", round(took, 6), "s", connect_warn, connect_critical,
                    description="Time taken to connect to NATS")
        _threshold(result, "connect time", took, connect_warn, connect_critical, _ms)
        rtt = nc.rtt(timeout)
        result.ok(f"rtt {_ms(rtt)}")
        result.perf("rtt", round(rtt, 6), "s", rtt_warn, rtt_critical,
                    description="The round-trip-time of the connection")
        _threshold(result, "rtt", rtt, rtt_warn, rtt_critical, _ms)
        inbox = nc.new_inbox()
        sub = nc.subscribe(inbox, cb=lambda msg: msg.respond(msg.data))
        try:
            started = time.perf_counter()
            nc.request(inbox, b"check", timeout=timeout)
            req = time.perf_counter() - started
        finally:
            sub.unsubscribe()
        result.ok(f"request {_ms(req)}")
        result.perf("request_time", round(req, 6), "s", req_warn, req_critical,
                    description="Time taken for a full Request-Reply operation")
        _threshold(result, "request time", req, req_warn, req_critical, _ms)
    except (NatsError, OSError) as exc:
        result.critical(f"connected, then failed: {exc}")
    finally:
        nc.close()
    return result


# ---------------------------------------------------------------------------------------------- JetStream


def _percent(used: int, limit: int) -> float | None:
    return None if limit is None or limit <= 0 else 100.0 * used / limit


def _current_peers(peers: Sequence[PeerInfo]) -> int:
    """The peers of a Raft group that are current, the leader (not in ``peers``) included."""
    return 1 + sum(1 for p in peers if p.current and not p.offline)


def _check_peers(result: CheckResult, group: str, label: str, peers: Sequence[PeerInfo], size: int,
                 lag_critical: int | None, seen_critical: float | None) -> None:
    """The followers of a led Raft group (a stream's, a consumer's, the meta group): fewer current
    peers than a quorum is CRITICAL, a peer offline or not current WARNING, one past a threshold CRITICAL.

    Args:
        result: where the findings go.
        group: the group as the quorum finding names it (``"stream"``, ``"the meta group"``).
        label: what precedes a peer's name in its findings (``"stream replica"``, ``"peer"``).
        peers: the followers, the leader not among them.
        size: the group's size, leader included.
        lag_critical, seen_critical: operations behind, and seconds since last heard from,
            that make a peer CRITICAL (``None``: not checked).
    """
    # A leader cut off from its followers keeps calling itself leader for a while; without a
    # quorum of current peers (the leader is one) nothing can be written: that is down, not degraded.
    current = _current_peers(peers)
    if current < size // 2 + 1:
        result.critical(f"{group} has lost its quorum ({current} of {size} peers current)")
    for peer in peers:
        if peer.offline:
            result.warning(f"{label} {peer.name} is offline")
        elif not peer.current:
            result.warning(f"{label} {peer.name} is not current")
        if lag_critical is not None and peer.lag >= lag_critical:
            result.critical(f"{label} {peer.name} is {peer.lag} operations behind")
        if seen_critical is not None and peer.active >= seen_critical:
            result.critical(f"{label} {peer.name} last seen {_secs(peer.active)} ago")


def _check_group(result: CheckResult, what: str, cluster: ClusterInfo | None, lag_critical: int | None,
                 seen_critical: float | None) -> None:
    """A Raft group (a stream's or a consumer's): no leader or no quorum is CRITICAL, a replica
    down or behind WARNING."""
    if cluster is None:
        return
    if not cluster.leader:
        result.critical(f"{what} has no leader")
        return
    peers = list(cluster.replicas or ())
    _check_peers(result, what, f"{what} replica", peers, 1 + len(peers), lag_critical, seen_critical)


def check_jetstream(
    nc: Client,
    *,
    mem_warn: float | None = 75,
    mem_critical: float | None = 90,
    store_warn: float | None = 75,
    store_critical: float | None = 90,
    streams_warn: float | None = None,
    streams_critical: float | None = None,
    consumers_warn: float | None = None,
    consumers_critical: float | None = None,
    replicas: bool = True,
    replica_lag_critical: int | None = None,
    replica_seen_critical: float | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """The account's JetStream: reachable, within its limits, its streams' replicas healthy.

    Args:
        nc: a connected client of the account.
        mem_warn, mem_critical, store_warn, store_critical: percent of the account's
            memory / file storage limit in use (no limit: 0%).
        streams_warn, streams_critical, consumers_warn, consumers_critical: percent of
            the account's stream / consumer limit in use. As the nats CLI's: the whole
            percent over a threshold (not at it) crosses it; a threshold below 0 (or
            ``None``) is off; a warning threshold not below the critical one is CRITICAL.
        replicas: check every stream's Raft group (no leader: CRITICAL; a replica
            offline or behind: WARNING).
        replica_lag_critical: a replica this many operations behind is CRITICAL.
        replica_seen_critical: a replica not heard from for this many seconds is CRITICAL.
        timeout: seconds for each JetStream request.

    Returns:
        CRITICAL when JetStream does not answer (not enabled, no meta leader).
    """
    result = CheckResult("jetstream", "JetStream")
    js = nc.jetstream(timeout=timeout)
    try:
        info = js.account_info()
    except (NatsError, OSError) as exc:
        result.critical(f"JetStream is not available: {exc}")
        return result
    limits = info.limits
    for what, used, limit, warn, crit in (
        ("memory", info.memory, limits.max_memory, mem_warn, mem_critical),
        ("storage", info.storage, limits.max_storage, store_warn, store_critical),
        ("streams", info.streams, limits.max_streams, streams_warn, streams_critical),
        ("consumers", info.consumers, limits.max_consumers, consumers_warn, consumers_critical),
    ):
        unit = "B" if what in ("memory", "storage") else ""
        result.perf(what, used, unit, description=f"JetStream {what} resource usage")
        # The nats CLI's rules: whole percent (0 without a limit), always written so a dashboard
        # finds every series; a threshold below 0 is off; over a threshold (not at it) crosses it.
        pct = int(_percent(used, limit) or 0)
        w = -1.0 if warn is None or warn < 0 else warn
        c = -1.0 if crit is None or crit < 0 else crit
        result.perf(f"{what}_pct", pct, "%", max(w, 0), max(c, 0),
                    description=f"JetStream {what} resource usage in percent")
        if w >= 0 and c >= 0 and w >= c:
            result.critical(f"{what}: invalid thresholds, warning {w:g}% not below critical {c:g}%")
        elif pct > 100:
            result.critical(f"{what}: {pct}% exceeds the account's limit")
        elif c >= 0 and pct > c:
            result.critical(f"{what} use {pct}% > {c:g}%")
        elif w >= 0 and pct > w:
            result.warning(f"{what} use {pct}% > {w:g}%")
    result.ok(f"{info.streams} streams, {info.consumers} consumers, {info.memory} B memory, "
              f"{info.storage} B storage")
    if replicas:
        try:
            streams = list(js.list_streams())
        except (NatsError, OSError) as exc:
            result.critical(f"cannot list the streams: {exc}")
            return result
        for stream in streams:
            _check_group(result, f"stream {stream.config.name}", stream.cluster, replica_lag_critical,
                         replica_seen_critical)
        _replica_counts(result, streams, replica_lag_critical, replica_seen_critical)
    return result


def _replica_counts(result: CheckResult, streams: Sequence[Any], lag_critical: int | None,
                    seen_critical: float | None) -> None:
    """The nats CLI's perfdata of the streams' replicas: how many streams are healthy, without a
    leader, short of replicas, with a replica lagging, unseen or offline (the findings are
    :func:`_check_group`'s)."""
    counts = dict.fromkeys(("ok", "no_leader", "missing_replicas", "lagged", "not_seen", "fail"), 0)
    for info in streams:
        cluster = info.cluster
        if info.config.num_replicas <= 1:
            counts["ok"] += 1
        elif cluster is None:
            counts["fail"] += 1
        elif not cluster.leader:
            counts["no_leader"] += 1
        elif len(cluster.replicas or ()) != info.config.num_replicas - 1:
            counts["missing_replicas"] += 1
        else:
            healthy = True
            for peer in cluster.replicas or ():
                if peer.offline:
                    counts["fail"] += 1
                elif seen_critical and peer.active > seen_critical:
                    counts["not_seen"] += 1
                elif lag_critical and peer.lag > lag_critical:
                    counts["lagged"] += 1
                else:
                    continue
                healthy = False
            counts["ok"] += healthy
    helps = {"ok": "Streams with healthy cluster state", "no_leader": "Streams with no leader elected",
             "missing_replicas": "Streams where there are fewer known replicas than configured",
             "lagged": "Streams with lagged replicas", "not_seen": "Streams with replicas not seen recently",
             "fail": "Streams unhealthy cluster state"}
    for key, count in counts.items():
        warn_crit: tuple[float | None, float | None] = (None, None)
        unit = ""
        if key == "lagged":
            warn_crit = (None, lag_critical)
        elif key == "not_seen":
            warn_crit, unit = (None, seen_critical), "s"
        result.perf(f"replicas_{key}", count, unit, *warn_crit, description=helps[key])


def _age(t: datetime.datetime | None) -> float | None:
    if t is None or t.year < 1970:
        return None
    return (datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()


def check_stream(
    nc: Client,
    stream: str,
    *,
    peer_expect: int | None = None,
    peer_lag_critical: int | None = None,
    peer_seen_critical: float | None = None,
    msgs_warn: int | None = None,
    msgs_critical: int | None = None,
    subjects_warn: int | None = None,
    subjects_critical: int | None = None,
    lag_critical: int | None = None,
    seen_critical: float | None = None,
    min_sources: int | None = None,
    max_sources: int | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A stream: present, led, its replicas, messages, subjects, mirror and sources.

    Each threshold not given (``None``) is read from the stream's metadata under the nats
    CLI's key (:data:`~natsjs_sync.monitor.STREAM_METADATA`, ``io.nats.monitor.msgs-warn: 10``).

    Args:
        nc: a connected client of the stream's account.
        stream: the stream's name.
        peer_expect: the number of replicas (leader included) expected; a different
            number is CRITICAL (default: not checked).
        peer_lag_critical, peer_seen_critical: a replica this many operations behind,
            or not heard from for this many seconds, is CRITICAL.
        msgs_warn, msgs_critical: fewer messages than this is WARNING / CRITICAL.
        subjects_warn, subjects_critical: more distinct subjects than this.
        lag_critical, seen_critical: a mirror or source this many messages behind, or
            not heard from for this many seconds, is CRITICAL.
        min_sources, max_sources: the number of sources expected.
        timeout: seconds for the stream's info.

    Returns:
        CRITICAL when the stream is missing or has no leader; WARNING when a replica
        is offline or behind while it has one.
    """
    result = CheckResult("stream", stream)
    try:
        info = nc.jetstream(timeout=timeout).stream(stream).info()
    except NotFoundError:
        result.critical("stream not found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"no answer about the stream: {exc}")
        return result
    limits = _from_metadata(result, info.config.metadata, STREAM_METADATA, dict(
        peer_expect=peer_expect, peer_lag_critical=peer_lag_critical, peer_seen_critical=peer_seen_critical,
        msgs_warn=msgs_warn, msgs_critical=msgs_critical, subjects_warn=subjects_warn,
        subjects_critical=subjects_critical, lag_critical=lag_critical, seen_critical=seen_critical,
        min_sources=min_sources, max_sources=max_sources))
    if limits is None:
        return result
    peer_expect, peer_lag_critical, peer_seen_critical = (
        limits["peer_expect"], limits["peer_lag_critical"], limits["peer_seen_critical"])
    msgs_warn, msgs_critical = limits["msgs_warn"], limits["msgs_critical"]
    subjects_warn, subjects_critical = limits["subjects_warn"], limits["subjects_critical"]
    lag_critical, seen_critical = limits["lag_critical"], limits["seen_critical"]
    min_sources, max_sources = limits["min_sources"], limits["max_sources"]
    state = info.state
    result.ok(f"{state.messages} messages, {state.consumer_count} consumers")
    result.perf("messages", state.messages, "", msgs_warn, msgs_critical)
    result.perf("bytes", state.bytes, "B")
    result.perf("consumers", state.consumer_count)
    # The nats CLI's rules: as few messages as a threshold (or fewer) crosses it; subjects cross
    # theirs from below when the warning threshold is under the critical one, else from above
    # (a threshold of 0 or less is not set, and the unset one counts as 0 in that comparison).
    _levels(result, "messages", state.messages, msgs_warn, msgs_critical, more_is_worse=False)
    if subjects_warn is not None or subjects_critical is not None:
        result.perf("subjects", state.num_subjects, "", subjects_warn, subjects_critical)
        _levels(result, "subjects", state.num_subjects, subjects_warn, subjects_critical,
                more_is_worse=(subjects_warn or 0) < (subjects_critical or 0))
    _check_group(result, "stream", info.cluster, peer_lag_critical, peer_seen_critical)
    if peer_expect is not None:
        peers = 1 + len(info.cluster.replicas or ()) if info.cluster else 1
        result.perf("peers", peers)
        if peers != peer_expect:
            result.critical(f"{peers} replicas, {peer_expect} expected")
    sources = ([info.mirror] if info.mirror else []) + list(info.sources or ())
    for source in sources:
        if lag_critical is not None and source.lag >= lag_critical:
            result.critical(f"source {source.name} is {source.lag} messages behind")
        if seen_critical is not None and source.active >= seen_critical:
            result.critical(f"source {source.name} last seen {_secs(source.active)} ago")
    if min_sources is not None or max_sources is not None:
        result.perf("sources", len(sources))
        if min_sources is not None and len(sources) < min_sources:
            result.critical(f"{len(sources)} sources, at least {min_sources} expected")
        if max_sources is not None and len(sources) > max_sources:
            result.critical(f"{len(sources)} sources, at most {max_sources} expected")
    return result


#: The metadata keys the nats CLI reads a stream check's thresholds from (``io.nats.monitor.*``)
#: and the :func:`check_stream` parameter each one sets (an argument given wins).
STREAM_METADATA: dict[str, str] = {
    "io.nats.monitor.lag-critical": "lag_critical",
    "io.nats.monitor.seen-critical": "seen_critical",
    "io.nats.monitor.min-sources": "min_sources",
    "io.nats.monitor.max-sources": "max_sources",
    "io.nats.monitor.peer-expect": "peer_expect",
    "io.nats.monitor.peer-lag-critical": "peer_lag_critical",
    "io.nats.monitor.peer-seen-critical": "peer_seen_critical",
    "io.nats.monitor.msgs-warn": "msgs_warn",
    "io.nats.monitor.msgs-critical": "msgs_critical",
    "io.nats.monitor.subjects-warn": "subjects_warn",
    "io.nats.monitor.subjects-critical": "subjects_critical",
}
#: The metadata keys the nats CLI reads a consumer check's thresholds from, and the
#: :func:`check_consumer` parameter each one sets (an argument given wins).
CONSUMER_METADATA: dict[str, str] = {
    "io.nats.monitor.outstanding-ack-critical": "outstanding_ack_critical",
    "io.nats.monitor.waiting-critical": "waiting_critical",
    "io.nats.monitor.unprocessed-critical": "unprocessed_critical",
    "io.nats.monitor.last-delivery-critical": "last_delivery_critical",
    "io.nats.monitor.last-ack-critical": "last_ack_critical",
    "io.nats.monitor.redelivery-critical": "redelivery_critical",
    "io.nats.monitor.pinned": "pinned",
}
_DURATION_PARAMS = {"seen_critical", "peer_seen_critical", "last_delivery_critical", "last_ack_critical"}
_GO_INT = re.compile(r"[+-]?[0-9]+")
#: The longest Go ``time.Duration`` in seconds: where Go's ``time.Since`` saturates.
_MAX_GO_DURATION = (2**63 - 1) / 1e9
_GO_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_META_DURATION = re.compile(r"([0-9]*(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h|w|W|d|D|M|y|Y)")
_META_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
               "w": 7 * 86400.0, "W": 7 * 86400.0, "d": 86400.0, "D": 86400.0, "M": 30 * 86400.0,
               "y": 365 * 86400.0, "Y": 365 * 86400.0}


def metadata_duration(text: str) -> float:
    """Seconds from a duration as the nats CLI reads one from metadata: Go's units and ``d``,
    ``w``, ``M`` (30 days) and ``y`` (365 days), as in ``"1h30m"`` or ``"2d"``.

    Raises:
        ValueError: not such a duration.
    """
    text = text.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _META_DURATION.finditer(text):
        if m.start() != pos or m.group(1) in ("", "."):
            break
        total += float(m.group(1)) * _META_UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"invalid duration {text!r}")
    return total


def _from_metadata(result: CheckResult, metadata: dict[str, str] | None, keys: dict[str, str],
                   given: dict[str, Any]) -> dict[str, Any] | None:
    """``given`` with the thresholds not given (``None``) taken from ``metadata``; ``None`` (and a
    CRITICAL finding) when a value there cannot be read."""
    values = dict(given)
    for key, param in keys.items():
        text = (metadata or {}).get(key)
        if text is None or values.get(param) is not None:
            continue
        try:
            if param in _DURATION_PARAMS:
                values[param] = metadata_duration(text)
            elif param == "pinned":
                values[param] = _GO_BOOL[text]
            elif _GO_INT.fullmatch(text):
                values[param] = int(text)
            else:
                raise ValueError(f"invalid number {text!r}")
        except (KeyError, ValueError) as exc:
            result.critical(f"could not configure based on metadata: {key}: {exc}")
            return None
    return values


def _go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` writes it (``1m2.5s``, ``150ms``, ``0s``)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)

    def frac(value: int, unit: int) -> str:
        whole, part = divmod(value, unit)
        digits = str(part).rjust(len(str(unit)) - 1, "0").rstrip("0")
        return f"{whole}.{digits}" if digits else str(whole)

    if ns < 1000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{frac(ns, 1000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{frac(ns, 1_000_000)}ms"
    hours, ns = divmod(ns, 3600 * 10**9)
    minutes, ns = divmod(ns, 60 * 10**9)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return f"{sign}{out}{frac(ns, 10**9)}s"


def _human_duration(seconds: float) -> str:
    """A duration as the nats CLI shows one to people: ``1y2d3h4m5s``, ``2h0m0s``, ``5.00s``, ``150ms``."""
    if seconds < 1e-3:
        return _go_duration(round(seconds, 6))
    if seconds < 1:
        return _go_duration(round(seconds, 3))
    secs = int(seconds)
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if hours:
        return f"{hours}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{seconds:.2f}s"


def _go_time(t: datetime.datetime) -> str:
    """A UTC time as Go's ``time.Time.String`` writes it: ``2100-01-01 00:00:00 +0000 UTC``."""
    t = t.astimezone(datetime.timezone.utc)
    fraction = f".{t.microsecond:06d}".rstrip("0").rstrip(".")
    return f"{t:%Y-%m-%d %H:%M:%S}{fraction} +0000 UTC"


def check_consumer(
    nc: Client,
    stream: str,
    consumer: str,
    *,
    outstanding_ack_critical: int | None = None,
    waiting_critical: int | None = None,
    unprocessed_critical: int | None = None,
    redelivery_critical: int | None = None,
    last_delivery_critical: float | None = None,
    last_ack_critical: float | None = None,
    pinned: bool | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A consumer, as ``nats server check consumer`` sees it: how far behind its readers are.

    Each threshold not given (``None``) is read from the consumer's metadata under the nats
    CLI's key (:data:`~natsjs_sync.monitor.CONSUMER_METADATA`, ``io.nats.monitor.waiting-critical: 20``); a
    threshold of 0 or less is not checked.

    Args:
        nc: a connected client of the stream's account.
        stream, consumer: which consumer.
        outstanding_ack_critical: this many messages delivered and not acked is CRITICAL.
        waiting_critical: this many pull requests waiting is CRITICAL.
        unprocessed_critical: this many messages not yet delivered is CRITICAL.
        redelivery_critical: this many messages redelivered and not acked is CRITICAL.
        last_delivery_critical, last_ack_critical: no delivery / no ack for this many
            seconds is CRITICAL (never delivered / acked counts as too long).
        pinned: the consumer must have the ``pinned_client`` priority policy and each of
            its priority groups a pinned client.
        timeout: seconds for the consumer's info.

    Returns:
        CRITICAL when the consumer cannot be loaded or has no leader; WARNING when a
        replica is offline or behind while it has one.
    """
    result = CheckResult("consumer", f"{stream}_{consumer}")
    try:
        info = nc.jetstream(timeout=timeout).consumer(stream, consumer).info()
    except (NatsError, OSError) as exc:
        result.critical(f"could not load info: {exc}")
        return result
    given = dict(outstanding_ack_critical=outstanding_ack_critical, waiting_critical=waiting_critical,
                 unprocessed_critical=unprocessed_critical, redelivery_critical=redelivery_critical,
                 last_delivery_critical=last_delivery_critical, last_ack_critical=last_ack_critical,
                 pinned=pinned)
    limits = _from_metadata(result, info.config.metadata, CONSUMER_METADATA, given)
    if limits is None:
        return result
    delivered_age, acked_age = _age(info.delivered.last_active), _age(info.ack_floor.last_active)
    result.perf("ack_pending", info.num_ack_pending, "", None, limits["outstanding_ack_critical"],
                description="The number of messages waiting to be Acknowledged")
    result.perf("pull_waiting", info.num_waiting, "", None, limits["waiting_critical"],
                description="The number of waiting Pull requests")
    result.perf("pending", info.num_pending, "", None, limits["unprocessed_critical"],
                description="The number of messages that have not yet been consumed")
    result.perf("redelivered", info.num_redelivered, "", None, limits["redelivery_critical"],
                description="The number of messages currently being redelivered")
    if delivered_age is not None:
        result.perf("last_delivery", round(delivered_age, 6), "s", None, limits["last_delivery_critical"],
                    description="Seconds since the last message was delivered")
    if acked_age is not None:
        result.perf("last_ack", round(acked_age, 6), "s", None, limits["last_ack_critical"],
                    description="Seconds since the last message was acknowledged")
    for what, value, crit in (("Ack Pending", info.num_ack_pending, limits["outstanding_ack_critical"]),
                              ("Waiting Pulls", info.num_waiting, limits["waiting_critical"]),
                              ("Unprocessed Messages", info.num_pending, limits["unprocessed_critical"]),
                              ("Redelivered", info.num_redelivered, limits["redelivery_critical"])):
        if crit is not None and crit > 0:
            result.add(Status.CRITICAL if value >= crit else Status.OK, f"{what}: {value}")
    for what, none, age, t, crit in (
        ("delivery", "No deliveries", delivered_age, info.delivered.last_active, limits["last_delivery_critical"]),
        ("ack", "No acks", acked_age, info.ack_floor.last_active, limits["last_ack_critical"]),
    ):
        if crit is None or crit <= 0:
            continue
        if age is None or t is None:
            result.critical(none)
        elif age >= crit:
            result.critical(f"Last {what} {_go_duration(age)} ago")
        else:
            result.ok(f"Last {what} {_go_time(t)}")
    _check_pinned(result, info, bool(limits["pinned"]))
    _check_group(result, "consumer", info.cluster, None, None)
    return result


def _check_pinned(result: CheckResult, info: Any, required: bool) -> None:
    """A consumer's priority groups: how many have a pinned client (``--pinned``: all of them)."""
    config = info.config
    groups = list(config.priority_groups or ())
    states = list(info.priority_groups or ())
    pinned = sum(1 for g in states if g.pinned_client_id)
    if config.priority_policy == "pinned_client":
        result.perf("pinned_groups", pinned, description="The number of consumers groups with pinned clients")
        result.perf("groups", len(groups), description="The total number of consumers groups")
    if not required:
        return
    if not states or not groups or config.priority_policy != "pinned_client":
        result.critical("Not pinned client priority mode")
    elif pinned != len(groups):
        result.critical(f"{pinned} / {len(groups)} pinned clients")
    else:
        result.ok(f"{pinned} pinned clients")


# ---------------------------------------------------------------------------------------------- messages, KV


#: A subject without wildcards, as nats-server's ``IsValidLiteralSubject`` takes it: no empty token,
#: no white space, no token that is ``*`` or ``>`` (``a*`` is a literal token).
_LITERAL_SUBJECT = re.compile(r"(?:(?![*>](?:\.|$))[^\s.]+)(?:\.(?![*>](?:\.|$))[^\s.]+)*")


#: RE2's POSIX classes (``[[:alpha:]]``) as ranges of a Python character set: ASCII, as RE2's.
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ", "cntrl": r"\x00-\x1f\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": r"!-/:-@\[-`{-~",
    "space": r"\t\n\v\f\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
#: RE2's ``\s``: no vertical tab, which Python's has.
_RE2_SPACE = r"\t\n\f\r "


def _go_regexp(pattern: str) -> re.Pattern[bytes]:
    r"""``pattern`` in Go's (RE2's) syntax, compiled for Python's ``re`` with the same meaning where
    the two differ in ways a monitoring pattern meets: ``$`` is the end of the text unless ``m``
    is set (Python's also matches before a final newline), ``\z``, ``\Q...\E``, ``(?<name>...)``,
    ``[[:alpha:]]``, and ``\s`` without the vertical tab.

    Raises:
        re.error: the pattern does not compile (``\pL`` and ``[[:^alpha:]]`` included).
    """
    out: list[str] = []
    i, n, multiline = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            escape = pattern[i + 1]
            if escape == "Q":  # a literal up to \E (or the end)
                end = pattern.find("\\E", i + 2)
                out.append(re.escape(pattern[i + 2:] if end < 0 else pattern[i + 2:end]))
                i = n if end < 0 else end + 2
                continue
            out.append({"z": r"\Z", "s": f"[{_RE2_SPACE}]", "S": f"[^{_RE2_SPACE}]"}.get(escape, c + escape))
            i += 2
        elif c == "[":
            i = _go_class(pattern, i, out)
        elif c == "$":
            out.append("$" if multiline else r"\Z")
            i += 1
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
        else:
            flags = re.match(r"\(\?([a-zA-Z]*)(?:-[a-zA-Z]*)?[:)]", pattern[i:]) if c == "(" else None
            multiline = multiline or bool(flags and "m" in flags.group(1))
            out.append(c)
            i += 1
    with warnings.catch_warnings():  # Python's hints about sets it may read differently one day
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile("".join(out).encode())


def _go_class(pattern: str, i: int, out: list[str]) -> int:
    """Translate the character class at ``pattern[i]`` (``[``) into ``out``; the index after it."""
    n, j = len(pattern), i + 1
    parts = ["["]
    if pattern.startswith("^", j):
        parts.append("^")
        j += 1
    if pattern.startswith("]", j):  # a leading ] is a member
        parts.append(r"\]")
        j += 1
    while j < n and pattern[j] != "]":
        if pattern.startswith("[:", j) and (end := pattern.find(":]", j + 2)) >= 0:
            name = pattern[j + 2:end]
            if name in _POSIX_CLASSES:
                parts.append(_POSIX_CLASSES[name])
                j = end + 2
                continue
            if name.startswith("^") and name[1:] in _POSIX_CLASSES:
                raise re.error(f"negated POSIX class [:{name}:] inside a class is not supported")
        if pattern[j] == "\\" and j + 1 < n:
            parts.append(_RE2_SPACE if pattern[j + 1] == "s" else pattern[j:j + 2])
            j += 2
            continue
        parts.append("\\" + pattern[j] if pattern[j] in "[&~|" else pattern[j])  # members in RE2
        j += 1
    if j >= n:
        raise re.error("missing closing ]")
    out.append("".join(parts) + "]")
    return j + 1


def check_message(
    nc: Client,
    stream: str,
    *,
    subject: str = ">",
    age_warn: float | None = None,
    age_critical: float | None = None,
    content: str = ".",
    body_timestamp: bool = False,
    timeout: float = 5.0,
) -> CheckResult:
    """The last message of a stream on a subject, as ``nats server check message`` sees it:
    there is one, it is recent enough, its body matches.

    Args:
        nc: a connected client of the stream's account.
        stream: the stream holding the message.
        subject: the subject (a literal one; a wildcard is CRITICAL, as in the nats CLI,
            whose default ``>`` this is).
        age_warn, age_critical: a message older than this many seconds is WARNING /
            CRITICAL (0 or ``None``: not checked).
        content: a regular expression the body must contain a match of.
        body_timestamp: the body is a Unix time in seconds, the message's age is taken
            from it instead of the time the stream stored it.
        timeout: seconds for the request.

    Returns:
        CRITICAL when there is no message, it cannot be read, it is too old or does not match.
    """
    result = CheckResult("message", "Stream Message")
    if not _LITERAL_SUBJECT.fullmatch(subject):
        result.critical(f"Check failed: invalid subject {json.dumps(subject)}")
        return result
    try:
        msg = nc.jetstream(timeout=timeout).stream(stream).get_last_msg_for_subject(subject)
    except MsgNotFoundError:
        result.critical("no message found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"msg load failed: {exc}")
        return result
    if body_timestamp:
        text = msg.data.strip()
        unix = int(text) if _GO_INT.fullmatch(text.decode("latin-1")) else None
        if unix is None or not -(2**63) <= unix < 2**63:  # Go's ParseInt(body, 10, 64)
            why = "is not a whole number" if unix is None else "is out of range"
            result.critical(f"invalid timestamp body: {text.decode('utf-8', 'replace')!r} {why}")
            return result
        # Any Unix time in range has an age, as Go's time.Since gives one (saturated at its
        # Duration's ±292 years): no calendar date is built, years past 9999 or before 1 included.
        age: float | None = max(-_MAX_GO_DURATION, min(time.time() - unix, _MAX_GO_DURATION))
    else:
        age = _age(msg.time) if msg.time is not None else None
    if age is None:
        result.critical("the message has no time")
        return result
    age = round(age, 3)
    result.perf("age", age, "s", age_warn, age_critical, description="The age of the message")
    result.perf("size", len(msg.data), "B", description="The size of the message")
    if age_critical and age > age_critical:
        result.critical(f"{_go_duration(age)} old")
    elif age_warn and age > age_warn:
        result.warning(f"{_go_duration(age)} old")
    if content:
        try:
            pattern = _go_regexp(content)
        except re.error as exc:
            result.critical(f"content regex compile failed: {exc}")
            return result
        if not pattern.search(msg.data):
            result.critical(f"does not match regex: {content}")
    result.ok_unless_bad(f"Valid message on {stream} > {subject}")
    return result


def check_kv(
    nc: Client,
    bucket: str,
    *,
    key: str | None = None,
    values_warn: int | None = None,
    values_critical: int | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A key-value bucket, as ``nats server check kv`` sees it: it exists, a key has a value,
    the number of values is within thresholds.

    The values thresholds are the nats CLI's: at or above them is WARNING / CRITICAL, unless
    ``values_critical`` is below ``values_warn`` (or only ``values_warn`` is given): then at
    or *below* them. A negative threshold (or ``None``) is not checked.

    Args:
        nc: a connected client of the bucket's account.
        bucket: the bucket's name.
        key: a key that must have a value (not deleted, not purged).
        values_warn, values_critical: thresholds of the number of values stored (history
            and delete markers included).
        timeout: seconds for each request.

    Returns:
        CRITICAL when the bucket or the key is missing, or a critical threshold is crossed.
    """
    result = CheckResult("kv", bucket)
    try:
        kv = nc.jetstream(timeout=timeout).key_value(bucket)
    except BucketNotFoundError:
        result.critical(f"bucket {bucket} not found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"could not load bucket: {exc}")
        return result
    result.ok(f"bucket {bucket}")
    try:
        status = kv.status()
    except (NatsError, OSError) as exc:
        result.critical(f"could not obtain bucket status: {exc}")
        return result
    warn = -1 if values_warn is None or values_warn < 0 else values_warn
    crit = -1 if values_critical is None or values_critical < 0 else values_critical
    values = status.values
    result.perf("values", values, "", max(warn, 0), max(crit, 0),
                description="How many values are stored in the bucket")
    if key:
        try:
            kv.get(key)
        except KeyDeletedError as exc:
            op = getattr(exc, "op", "DEL")
            result.critical(f"key {key} is {'purged' if op == 'PURGE' else 'deleted'}")
        except KeyNotFoundError:
            result.critical(f"key {key} not found")
        except (NatsError, OSError, ValueError) as exc:
            result.critical(f"key {key} not loaded: {exc}")
        else:
            result.ok(f"key {key} found")
    if warn > -1 or crit > -1:
        # The nats CLI's rule: a critical threshold below the warning one inverts the check.
        if crit < warn:
            crossed_crit, crossed_warn = crit > -1 and values <= crit, warn > -1 and values <= warn
        else:
            crossed_crit, crossed_warn = crit > -1 and values >= crit, warn > -1 and values >= warn
        level = Status.CRITICAL if crossed_crit else Status.WARNING if crossed_warn else Status.OK
        result.add(level, f"{values} values")
    result.perf("bytes", status.bytes, "B", description="Bytes stored in the bucket")
    result.perf("replicas", status.stream_info.config.num_replicas)
    return result


def check_request(
    nc: Client,
    subject: str,
    *,
    payload: str = "",
    headers: dict[str, str] | None = None,
    match_payload: str | None = None,
    match_headers: dict[str, str] | None = None,
    response_warn: float | None = None,
    response_critical: float | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A request-reply service, as ``nats server check request`` sees it: it answers, in time,
    with the expected body and headers.

    Args:
        nc: a connected client.
        subject: where to send the request.
        payload: the request's body.
        headers: the request's headers.
        match_payload: a regular expression the reply's body must contain a match of.
        match_headers: headers the reply must have, with these values.
        response_warn, response_critical: an answer slower than this many seconds is
            WARNING / CRITICAL (0 or ``None``: not checked).
        timeout: seconds to wait for the answer.

    Returns:
        CRITICAL when nobody answers in ``timeout`` or the answer is not the one expected.
    """
    result = CheckResult("request", subject)
    if not subject:
        result.critical("no subject specified")
        return result
    started = time.perf_counter()
    try:
        reply = nc.request(subject, payload.encode(), timeout=timeout, headers=headers or None)
        error: Exception | None = None
    except (NatsError, OSError, TimeoutError) as exc:
        error = exc
    took = round(time.perf_counter() - started, 3)
    result.perf("time", took, "s", response_warn, response_critical, description="How long the request took")
    if error is not None:
        result.critical(f"could not send request: {error}")
        return result
    if match_payload:
        try:
            pattern = _go_regexp(match_payload)
        except re.error as exc:
            result.critical(f"content regex compile failed: {exc}")
            return result
        if not pattern.search(reply.data):
            result.critical("response does not match regexp")
    for key, want in (match_headers or {}).items():
        got = (reply.headers.get(key) if reply.headers else None) or ""
        if got != want:
            result.critical(f"invalid header {json.dumps(key)} = {json.dumps(got)}")
    if response_critical and took > response_critical:
        result.critical(f"response took {_go_duration(took)}")
    elif response_warn and took > response_warn:
        result.warning(f"response took {_go_duration(took)}")
    result.ok_unless_bad("Valid response")
    return result


# ---------------------------------------------------------------------------------------------- credentials


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
    from ..nkeys import decode_public, ed25519_verify

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


# ---------------------------------------------------------------------------------------------- servers


def check_server(
    nc: Client,
    name: str,
    *,
    cpu_warn: float | None = None,
    cpu_critical: float | None = None,
    memory_warn: int | None = None,
    memory_critical: int | None = None,
    connections_warn: int | None = None,
    connections_critical: int | None = None,
    subscriptions_warn: int | None = None,
    subscriptions_critical: int | None = None,
    uptime_warn: float | None = None,
    uptime_critical: float | None = None,
    js_required: bool = False,
    auth_required: bool = False,
    tls_required: bool = False,
    timeout: float = 5.0,
) -> CheckResult:
    """One server of the cluster, by name, through the system account: it answers, and says it is healthy.

    Args:
        nc: a connected client of a system-account user (any server of the cluster).
        name: the server's name.
        cpu_warn, cpu_critical: CPU use in percent (a critical threshold below the
            warning one is CRITICAL, as in the nats CLI).
        memory_warn, memory_critical: memory use in bytes (likewise).
        connections_warn, connections_critical: client connections; a critical
            threshold below the warning one checks at or *below* them, as the nats CLI.
        subscriptions_warn, subscriptions_critical: subscriptions (likewise).
        uptime_warn, uptime_critical: up for less than this many seconds (it restarted).
        js_required, auth_required, tls_required: CRITICAL unless it has JetStream,
            requires authentication, requires TLS.
        timeout: seconds to wait for the server's answers.

    Returns:
        CRITICAL when the server does not answer or its ``HEALTHZ`` is not ok;
        UNKNOWN when the user is not in the system account.
    """
    from .client import ServerFilter, SystemClient
    from .errors import SystemAccountRequiredError

    result = CheckResult("server", name)
    client = SystemClient(nc, timeout=timeout)
    try:
        answers = [r for r in client.varz(servers=ServerFilter(name=name), expected=1) if r.server.name == name]
        if not answers:
            result.critical(f"server {name} did not answer within {_secs(timeout)}")
            return result
        varz = answers[0].data
        health = client.healthz(server=answers[0].server.id)[0].data
    except SystemAccountRequiredError as exc:
        result.unknown(str(exc))
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"no answer from server {name}: {exc}")
        return result
    if health.ok:
        result.ok(f"healthy, version {varz.version}, up {varz.uptime}")
    else:
        result.critical(f"unhealthy ({health.status}): {health.error or health.errors or health.status_code}")
    result.perf("cpu", varz.cpu, "%", cpu_warn, cpu_critical)
    result.perf("mem", varz.mem, "", memory_warn, memory_critical, description="NATS Server memory usage in bytes")
    result.perf("connections", varz.connections, "", connections_warn, connections_critical)
    result.perf("subscriptions", varz.subscriptions, "", subscriptions_warn, subscriptions_critical)
    # The nats CLI's rules: a critical threshold below the warning one is a mistake for CPU and
    # memory, and turns the check of connections and subscriptions around (too few is worse).
    for what, value, warn, crit, fmt, invertible in (
        ("cpu", varz.cpu, cpu_warn, cpu_critical, lambda v: f"{v:.0f}%", False),
        ("memory", varz.mem, memory_warn, memory_critical, lambda v: f"{v:.0f} B", False),
        ("connections", varz.connections, connections_warn, connections_critical, str, True),
        ("subscriptions", varz.subscriptions, subscriptions_warn, subscriptions_critical, str, True),
    ):
        if warn is not None and crit is not None and crit < warn:
            if not invertible:
                result.critical(f"{what}: invalid thresholds, critical {fmt(crit)} below warning {fmt(warn)}")
            elif value <= crit:
                result.critical(f"{what} {fmt(value)} <= {fmt(crit)}")
            elif value <= warn:
                result.warning(f"{what} {fmt(value)} <= {fmt(warn)}")
        else:
            _threshold(result, what, value, warn, crit, fmt)
    if varz.start is not None and varz.now is not None:
        up = (varz.now - varz.start).total_seconds()
        result.perf("uptime", round(up, 3), "s", uptime_warn, uptime_critical)
        _threshold(result, "uptime", up, uptime_warn, uptime_critical, _secs, above=False)
    extra = varz.unknown_fields or {}
    if js_required and not varz.jetstream:
        result.critical("JetStream is not enabled")
    if auth_required and not extra.get("auth_required"):
        result.critical("authentication is not required")
    if tls_required and not extra.get("tls_required"):
        result.critical("TLS is not required")
    return result


def check_meta(
    nc: Client,
    *,
    expect: int | None = None,
    lag_critical: int | None = None,
    seen_critical: float | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """The JetStream meta group, as its leader sees it, through the system account.

    Args:
        nc: a connected client of a system-account user.
        expect: the number of servers the meta group should have; another is CRITICAL.
        lag_critical: a peer this many operations behind is CRITICAL.
        seen_critical: a peer not heard from for this many seconds is CRITICAL.
        timeout: seconds to wait for the leader's answer.

    Returns:
        CRITICAL when no meta leader answers or a quorum of peers is not current;
        WARNING when a peer is offline or behind while the group has its quorum;
        UNKNOWN when the user is not in the system account.
    """
    from .client import SystemClient
    from .errors import SystemAccountRequiredError

    result = CheckResult("meta", "JetStream Meta Cluster")
    try:
        answers = SystemClient(nc, timeout=timeout).jsz(leader_only=True, expected=1)
    except SystemAccountRequiredError as exc:
        result.unknown(str(exc))
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"no answer from the meta leader: {exc}")
        return result
    meta = answers[0].data.meta_cluster if answers else None
    if meta is None or not meta.leader:
        result.critical(f"no meta leader answered within {_secs(timeout)}")
        return result
    # The meta group's peers come as the server sent them (``active`` in nanoseconds):
    # read as a stream's replicas are, so one set of rules judges both.
    peers = [PeerInfo(name=p.get("name", "?"), current=bool(p.get("current")), offline=bool(p.get("offline")),
                      lag=int(p.get("lag") or 0), active=float(p.get("active") or 0) / 1e9)
             for p in meta.replicas or ()]
    size = meta.cluster_size or 1 + len(peers)
    current = _current_peers(peers)
    result.ok(f"leader {meta.leader}, {current} of {size} peers current")
    result.perf("peers", size, "", expect, expect, description="Configured RAFT peers")
    result.perf("peers_current", current)
    for label, count, what in (
        ("peer_offline", sum(1 for p in peers if p.offline), "Offline RAFT peers"),
        ("peer_not_current", sum(1 for p in peers if not p.current), "RAFT peers that are not current"),
        ("peer_inactive", sum(1 for p in peers if seen_critical and p.active > seen_critical), "Inactive RAFT peers"),
        ("peer_lagged", sum(1 for p in peers if lag_critical and p.lag > lag_critical),
         "RAFT peers that are lagged more than configured threshold"),
    ):
        result.perf(label, count, description=what)
    if expect is not None and size != expect:
        result.critical(f"{size} peers, {expect} expected")
    _check_peers(result, "the meta group", "peer", peers, size, lag_critical, seen_critical)
    return result


def worst(results: Iterable[CheckResult]) -> Status:
    """The worst status of several results (OK for none)."""
    return max((r.status for r in results), default=Status.OK)
