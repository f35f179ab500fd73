"""The stream check: present, led, its replicas, messages, subjects, mirror and sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import NatsError, NotFoundError
from .cluster import _check_group
from .durations import _secs
from .metadata import STREAM_METADATA, _from_metadata
from .result import CheckResult
from .thresholds import _levels

if TYPE_CHECKING:
    from ...client import Client
    from ...jetstream.stream_config import ClusterInfo, StreamInfo, StreamState


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
    _check_messages(result, info.state, limits["msgs_warn"], limits["msgs_critical"], limits["subjects_warn"],
                    limits["subjects_critical"])
    _check_group(result, "stream", info.cluster, limits["peer_lag_critical"], limits["peer_seen_critical"])
    _check_peer_count(result, info.cluster, limits["peer_expect"])
    _check_sources(result, info, limits["lag_critical"], limits["seen_critical"], limits["min_sources"],
                   limits["max_sources"])
    return result


def _check_messages(result: CheckResult, state: StreamState, msgs_warn: int | None, msgs_critical: int | None,
                    subjects_warn: int | None, subjects_critical: int | None) -> None:
    """The stream's messages and subjects, against their thresholds."""
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


def _check_peer_count(result: CheckResult, cluster: ClusterInfo | None, peer_expect: int | None) -> None:
    """The stream's replicas, leader included, against the number expected (``None``: not checked)."""
    if peer_expect is not None:
        peers = 1 + len(cluster.replicas or ()) if cluster else 1
        result.perf("peers", peers)
        if peers != peer_expect:
            result.critical(f"{peers} replicas, {peer_expect} expected")


def _check_sources(result: CheckResult, info: StreamInfo, lag_critical: int | None, seen_critical: float | None,
                   min_sources: int | None, max_sources: int | None) -> None:
    """The stream's mirror and sources: how far behind, when last heard from, how many."""
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
