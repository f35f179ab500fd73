"""Raft groups (a stream's, a consumer's, the meta group): leader, quorum and the state of each peer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .durations import _secs

if TYPE_CHECKING:
    from ...jetstream.stream_config import ClusterInfo, PeerInfo
    from .result import CheckResult


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
