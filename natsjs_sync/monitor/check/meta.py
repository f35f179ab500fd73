"""The meta group check: the JetStream meta group as its leader sees it, through the system account."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import NatsError
from ...jetstream.stream_config import PeerInfo
from .cluster import _check_peers, _current_peers
from .durations import _secs
from .result import CheckResult

if TYPE_CHECKING:
    from ...client import Client


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
    from ..client import SystemClient
    from ..errors import SystemAccountRequiredError

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
    peers = _meta_peers(meta.replicas)
    size = meta.cluster_size or 1 + len(peers)
    current = _current_peers(peers)
    result.ok(f"leader {meta.leader}, {current} of {size} peers current")
    result.perf("peers", size, "", expect, expect, description="Configured RAFT peers")
    result.perf("peers_current", current)
    _peer_counts(result, peers, lag_critical, seen_critical)
    if expect is not None and size != expect:
        result.critical(f"{size} peers, {expect} expected")
    _check_peers(result, "the meta group", "peer", peers, size, lag_critical, seen_critical)
    return result


def _meta_peers(replicas: Sequence[dict[str, Any]] | None) -> list[PeerInfo]:
    """The meta group's followers, as the server sent them, read into :class:`PeerInfo`."""
    # The meta group's peers come as the server sent them (``active`` in nanoseconds):
    # read as a stream's replicas are, so one set of rules judges both.
    return [PeerInfo(name=p.get("name", "?"), current=bool(p.get("current")), offline=bool(p.get("offline")),
                     lag=int(p.get("lag") or 0), active=float(p.get("active") or 0) / 1e9)
            for p in replicas or ()]


def _peer_counts(result: CheckResult, peers: Sequence[PeerInfo], lag_critical: int | None,
                 seen_critical: float | None) -> None:
    """The nats CLI's perfdata of the meta group's peers: how many are offline, not current, inactive, lagged."""
    for label, count, what in (
        ("peer_offline", sum(1 for p in peers if p.offline), "Offline RAFT peers"),
        ("peer_not_current", sum(1 for p in peers if not p.current), "RAFT peers that are not current"),
        ("peer_inactive", sum(1 for p in peers if seen_critical and p.active > seen_critical), "Inactive RAFT peers"),
        ("peer_lagged", sum(1 for p in peers if lag_critical and p.lag > lag_critical),
         "RAFT peers that are lagged more than configured threshold"),
    ):
        result.perf(label, count, description=what)
