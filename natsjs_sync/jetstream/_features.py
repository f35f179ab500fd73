"""What the connected server can do (ADR-44), checked before anything is sent.

An older server does not refuse what it does not know: it drops an unknown
stream or consumer field, stores a header it does not understand as a plain
header, and leaves an unknown API subject unanswered. ``publish(ttl=1)`` on
2.10 stores a message that never expires; ``pause_consumer`` on 2.10 waits for
its timeout. So every option or call that needs a newer server is looked up in
:data:`FEATURES` first, and :class:`~natsjs_sync.errors.FeatureNotSupportedError`
names the feature and the version it needs.

The version is the one the connected server announced in its INFO. In a
cluster of mixed versions (an upgrade in progress, an older leafnode) it is
the best a client can know without asking the asset's host, which is what the
reference clients do too; the check itself needs no request.

Beside each version is the JetStream API level (ADR-44) the feature needs,
which is what ``Nats-Required-Api-Level`` asks the answering server for
(:func:`level_headers`). A server's level (``AccountInfo.api.level``) is 0
before 2.11, 1 for 2.11, 2 for 2.12.0 to 2.12.4, 3 from 2.12.5 (which added
only a snapshot option), 4 for 2.14 and 5 for 2.15: a feature's level is that
of the first release that has it, or lower where the server's own rule
(``jetstream_versioning.go``, the ``_nats.req.level`` of a stream or consumer)
says so: any priority policy, ``prioritized`` included, needs 1. Asking for a
higher level than a feature needs makes servers that have it refuse it
(2.12.0 to 2.12.4 refused 2.12's features when asked for 3).

The versions here were checked against real servers 2.10.26, 2.11.0, 2.11.11,
2.12.0, 2.12.4, 2.12.8, 2.14.6 and 2.15.1 (each feature used on the first
version listed, and found dropped, ignored or refused on the one before;
tests/compat/test_server_versions.py runs the first release of each minor).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..errors import FeatureNotSupportedError


class Version(NamedTuple):
    """A server version as ``(major, minor, patch)``."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: object) -> Version | None:
    """``"2.11.3"``, ``"v2.12.0-RC.1"`` -> :class:`Version`; ``None`` when it is not a version."""
    if not isinstance(text, str):
        return None
    m = _VERSION_RE.match(text.strip())
    if m is None:
        return None
    return Version(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


class Feature(NamedTuple):
    """A server capability: what it is called in errors and the server it needs."""

    name: str
    version: Version
    api_level: int


def _f(name: str, version: str, api_level: int) -> Feature:
    v = parse_version(version)
    assert v is not None
    return Feature(name, v, api_level)


#: Feature key -> what it is and the first server version (and API level) that has it.
FEATURES: dict[str, Feature] = {
    # 2.11, API level 1
    "msg_ttl": _f("per-message TTL (allow_msg_ttl, Nats-TTL)", "2.11.0", 1),
    "limit_markers": _f("subject delete markers (subject_delete_marker_ttl, KV limit_marker_ttl)", "2.11.0", 1),
    "priority_groups": _f("consumer priority groups (priority_policy overflow/pinned_client)", "2.11.0", 1),
    "consumer_pause": _f("consumer pause (pause_until, pause/resume)", "2.11.0", 1),
    "consumer_unpin": _f("consumer unpin", "2.11.0", 1),
    "direct_get_batch": _f("batched direct get (batch, multi_last)", "2.11.0", 1),
    "expected_last_subject_seq_subject": _f("expected last subject sequence for another subject", "2.11.0", 1),
    # 2.12, API level 2 (2.12.5 reports 3, for a snapshot option only); any priority policy needs 1
    "priority_prioritized": _f("consumer priority policy 'prioritized'", "2.12.0", 1),
    "counters": _f("message counters (allow_msg_counter, Nats-Incr)", "2.12.0", 2),
    "atomic_batch": _f("atomic batch publish (allow_atomic)", "2.12.0", 2),
    "msg_schedules": _f("message schedules (allow_msg_schedules, @at)", "2.12.0", 2),
    "persist_mode": _f("stream persist mode", "2.12.0", 2),
    "required_api_level": _f("Nats-Required-Api-Level", "2.12.0", 2),
    # 2.14, API level 4
    "schedule_patterns": _f("message schedules with @every, cron, source, time zone or schedule TTL", "2.14.0", 4),
    "fast_batch": _f("fast batch publish (allow_batched)", "2.14.0", 4),
    "atomic_batch_eob": _f("atomic batch commit without a final message (eob)", "2.14.0", 4),
    "consumer_reset": _f("consumer reset", "2.14.0", 4),
    "ack_flow_control": _f("consumer ack policy 'flow_control'", "2.14.0", 4),
    "source_consumer": _f("durable stream sourcing (source consumer)", "2.14.0", 4),
}


def server_version(info: dict[str, Any]) -> Version | None:
    """The version in a server's INFO (``nc.server_info``), or ``None``."""
    return parse_version(info.get("version"))


def supports(info: dict[str, Any], key: str) -> bool:
    """Whether the server of this INFO has feature ``key`` (unknown versions: assume yes)."""
    v = server_version(info)
    return v is None or v >= FEATURES[key].version


def require(info: dict[str, Any], *keys: str) -> None:
    """Raise unless the server of this INFO has every feature in ``keys``.

    A server that announced no version (a proxy, a test double) is trusted:
    the server then answers for itself.

    Raises:
        FeatureNotSupportedError: naming the first feature it lacks.
    """
    v = server_version(info)
    if v is None:
        return
    for key in keys:
        feature = FEATURES[key]
        if v < feature.version:
            raise FeatureNotSupportedError(feature.name, str(feature.version), str(info.get("version", "")))


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


def stream_config_features(cfg: Any) -> list[str]:
    """The feature keys a :class:`StreamConfig` uses."""
    keys = []
    if cfg.allow_msg_ttl:
        keys.append("msg_ttl")
    if cfg.subject_delete_marker_ttl:
        keys.append("limit_markers")
    if cfg.allow_msg_counter:
        keys.append("counters")
    if cfg.allow_atomic:
        keys.append("atomic_batch")
    if cfg.allow_msg_schedules:
        keys.append("msg_schedules")
    if cfg.persist_mode is not None and _value(cfg.persist_mode) != "default":
        keys.append("persist_mode")
    if cfg.allow_batched:
        keys.append("fast_batch")
    sources = list(cfg.sources or []) + ([cfg.mirror] if cfg.mirror is not None else [])
    if any(s.consumer is not None for s in sources):
        keys.append("source_consumer")
    return keys


def consumer_config_features(cfg: Any) -> list[str]:
    """The feature keys a :class:`ConsumerConfig` uses."""
    keys = []
    policy = _value(cfg.priority_policy)
    if policy == "prioritized":
        keys.append("priority_prioritized")
    elif (policy not in (None, "none")) or cfg.priority_groups or cfg.priority_timeout:
        keys.append("priority_groups")
    if cfg.pause_until is not None:
        keys.append("consumer_pause")
    if _value(cfg.ack_policy) == "flow_control":
        keys.append("ack_flow_control")
    return keys


#: ADR-44: the header with which an API request asks the answering server for a minimum API level.
REQUIRED_API_LEVEL = "Nats-Required-Api-Level"


def level_headers(info: dict[str, Any], keys: Iterable[str]) -> dict[str, str] | None:
    """Headers that make the *answering* server refuse an API request it cannot honour.

    The client checks the connected server's version itself (:func:`require`),
    but in a cluster another server may answer (the stream's leader, the meta
    leader), and during a rolling upgrade it may be older. Servers of 2.12+
    honour ``Nats-Required-Api-Level`` and answer "minimum api level required"
    instead of dropping a setting they do not know.
    """
    level = max((FEATURES[k].api_level for k in keys), default=0)
    if level < 1 or not supports(info, "required_api_level"):
        return None
    return {REQUIRED_API_LEVEL: str(level)}


def require_all(info: dict[str, Any], keys: Iterable[str]) -> None:
    """:func:`require` for an iterable of keys."""
    require(info, *keys)
