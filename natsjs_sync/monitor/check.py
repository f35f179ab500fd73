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

import datetime
import enum
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._redact import without_userinfo
from ..errors import NatsError, NotFoundError
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


class CheckResult:
    """What one check found: messages at each level and performance data. Not thread-safe.

    The status is the worst level any message was added at (OK when there is none).

    Attributes:
        check: what was checked (``"connection"``, ``"stream"``, ...).
        name: which one (a stream's name, a URL), or ``None``.
        messages: ``(status, text)`` in the order they were found.
        perfdata: ``(label, value, unit, warn, crit)`` for the line's performance data.
    """

    def __init__(self, check: str, name: str | None = None):
        self.check = check
        self.name = name
        self.messages: list[tuple[Status, str]] = []
        self.perfdata: list[tuple[str, float, str, float | None, float | None]] = []

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

    def perf(self, label: str, value: float, unit: str = "", warn: float | None = None,
             crit: float | None = None) -> None:
        """Record a measurement for the performance data (``label=value[unit];warn;crit``)."""
        self.perfdata.append((label, value, unit, warn, crit))

    def line(self) -> str:
        """One line: the status word, what was checked, the findings (worst first), the perfdata."""
        status = self.status
        shown = sorted(self.messages, key=lambda m: -m[0])
        text = "; ".join(t for _, t in shown) or "no findings"
        subject = f"{self.check} {self.name}" if self.name else self.check
        out = f"{status.name} {subject}: {text}"
        if self.perfdata:
            out += " | " + " ".join(
                f"{label}={_num(value)}{unit};{'' if w is None else _num(w)};{'' if c is None else _num(c)}"
                for label, value, unit, w, c in self.perfdata
            )
        return out

    def __repr__(self) -> str:
        return f"<CheckResult {self.line()!r}>"


def _num(v: float) -> str:
    return f"{v:.6f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def _threshold(result: CheckResult, what: str, value: float, warn: float | None, crit: float | None,
               fmt: Callable[[float], str] = str, above: bool = True) -> None:
    """Compare ``value`` with the thresholds: ``above`` means bigger is worse."""
    def crossed(limit: float) -> bool:
        return value >= limit if above else value < limit

    if crit is not None and crossed(crit):
        result.critical(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(crit)}")
    elif warn is not None and crossed(warn):
        result.warning(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(warn)}")


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
    result = CheckResult("connection", without_credentials(url))
    options: dict[str, Any] = dict(name="natsjs-check", connect_timeout=timeout, allow_reconnect=False)
    options.update(connect_options)
    started = time.perf_counter()
    try:
        nc = connect(servers, **options)
    except (NatsError, OSError) as exc:
        result.critical(f"cannot connect: {without_credentials(str(exc))}")
        return result
    try:
        took = time.perf_counter() - started
        result.ok(f"connected to {nc.connected_url} in {_ms(took)}")
        result.perf("connect_time", round(took, 6), "s", connect_warn, connect_critical)
        _threshold(result, "connect time", took, connect_warn, connect_critical, _ms)
        rtt = nc.rtt(timeout)
        result.ok(f"rtt {_ms(rtt)}")
        result.perf("rtt", round(rtt, 6), "s", rtt_warn, rtt_critical)
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
        result.perf("request_time", round(req, 6), "s", req_warn, req_critical)
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
            memory / file storage limit in use (no limit: not checked).
        streams_warn, streams_critical, consumers_warn, consumers_critical: percent of
            the account's stream / consumer limit in use.
        replicas: check every stream's Raft group (no leader: CRITICAL; a replica
            offline or behind: WARNING).
        replica_lag_critical: a replica this many operations behind is CRITICAL.
        replica_seen_critical: a replica not heard from for this many seconds is CRITICAL.
        timeout: seconds for each JetStream request.

    Returns:
        CRITICAL when JetStream does not answer (not enabled, no meta leader).
    """
    result = CheckResult("jetstream")
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
        result.perf(what, used)
        pct = _percent(used, limit)
        if pct is not None:
            result.perf(f"{what}_pct", round(pct, 2), "%", warn, crit)
            _threshold(result, f"{what} use", pct, warn, crit, lambda v: f"{v:.0f}%")
    result.ok(f"{info.streams} streams, {info.consumers} consumers, {info.memory} B memory, "
              f"{info.storage} B storage")
    if replicas:
        try:
            for stream in js.list_streams():
                _check_group(result, f"stream {stream.config.name}", stream.cluster, replica_lag_critical,
                             replica_seen_critical)
        except (NatsError, OSError) as exc:
            result.critical(f"cannot list the streams: {exc}")
    return result


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
    state = info.state
    result.ok(f"{state.messages} messages, {state.consumer_count} consumers")
    result.perf("messages", state.messages, "", msgs_warn, msgs_critical)
    result.perf("bytes", state.bytes, "B")
    result.perf("consumers", state.consumer_count)
    _threshold(result, "messages", state.messages, msgs_warn, msgs_critical, above=False)
    if subjects_warn is not None or subjects_critical is not None:
        result.perf("subjects", state.num_subjects, "", subjects_warn, subjects_critical)
        _threshold(result, "subjects", state.num_subjects, subjects_warn, subjects_critical)
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
    timeout: float = 5.0,
) -> CheckResult:
    """A consumer: present, led, its replicas, and how far behind its readers are.

    Args:
        nc: a connected client of the stream's account.
        stream, consumer: which consumer.
        outstanding_ack_critical: this many messages delivered and not acked is CRITICAL.
        waiting_critical: this many pull requests waiting is CRITICAL.
        unprocessed_critical: this many messages not yet delivered is CRITICAL.
        redelivery_critical: this many messages redelivered and not acked is CRITICAL.
        last_delivery_critical, last_ack_critical: no delivery / no ack for this many
            seconds is CRITICAL (never delivered / acked counts as too long).
        timeout: seconds for the consumer's info.

    Returns:
        CRITICAL when the consumer is missing or has no leader; WARNING when a replica
        is offline or behind while it has one.
    """
    result = CheckResult("consumer", f"{stream}/{consumer}")
    try:
        info = nc.jetstream(timeout=timeout).consumer(stream, consumer).info()
    except NotFoundError:
        result.critical("consumer not found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"no answer about the consumer: {exc}")
        return result
    result.ok(f"{info.num_pending} unprocessed, {info.num_ack_pending} awaiting ack")
    for label, value, crit in (
        ("ack_pending", info.num_ack_pending, outstanding_ack_critical),
        ("waiting", info.num_waiting, waiting_critical),
        ("unprocessed", info.num_pending, unprocessed_critical),
        ("redelivered", info.num_redelivered, redelivery_critical),
    ):
        result.perf(label, value, "", None, crit)
        _threshold(result, label.replace("_", " "), value, None, crit)
    for what, t, limit in (("delivery", info.delivered.last_active, last_delivery_critical),
                           ("ack", info.ack_floor.last_active, last_ack_critical)):
        if limit is None:
            continue
        age = _age(t)
        if age is None:
            result.critical(f"no {what} yet")
        elif age >= limit:
            result.critical(f"last {what} {_secs(age)} ago")
    _check_group(result, "consumer", info.cluster, None, None)
    return result


# ---------------------------------------------------------------------------------------------- servers


def check_server(
    nc: Client,
    name: str,
    *,
    cpu_warn: float | None = None,
    cpu_critical: float | None = None,
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
        cpu_warn, cpu_critical: CPU use in percent.
        connections_warn, connections_critical: client connections.
        subscriptions_warn, subscriptions_critical: subscriptions.
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
    result.perf("memory", varz.mem, "B")
    result.perf("connections", varz.connections, "", connections_warn, connections_critical)
    result.perf("subscriptions", varz.subscriptions, "", subscriptions_warn, subscriptions_critical)
    _threshold(result, "cpu", varz.cpu, cpu_warn, cpu_critical, lambda v: f"{v:.0f}%")
    _threshold(result, "connections", varz.connections, connections_warn, connections_critical)
    _threshold(result, "subscriptions", varz.subscriptions, subscriptions_warn, subscriptions_critical)
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

    result = CheckResult("meta")
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
    result.perf("peers", size, "", None, expect)
    result.perf("peers_current", current)
    if expect is not None and size != expect:
        result.critical(f"{size} peers, {expect} expected")
    _check_peers(result, "the meta group", "peer", peers, size, lag_critical, seen_critical)
    return result


def worst(results: Iterable[CheckResult]) -> Status:
    """The worst status of several results (OK for none)."""
    return max((r.status for r in results), default=Status.OK)
