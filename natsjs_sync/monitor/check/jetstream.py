"""The account's JetStream check: reachable, within its limits, its streams' replicas healthy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import NatsError
from .cluster import _check_group
from .result import CheckResult
from .thresholds import _percent

if TYPE_CHECKING:
    from ...client import Client


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
