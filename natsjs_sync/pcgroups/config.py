"""Group configs as stored in the KV buckets, and the rules they obey.

The JSON layout, the bucket names, the priority group name and the timer
rules are the ones of orbit.go's ``pcgroups`` (and natsio-pcgroups), so one
group can have members in Go, in natsio and here at once. Go's ``omitempty``
fields are left out when empty; fields this client does not know are kept in
``unknown_fields``. Configs are compared by meaning (``null``, ``[]`` and a
missing list are the same; so are the "no limit" sizes ``0`` and ``-1``), and a
read-modify-write keeps the stored spelling of every field it did not change:
orbit.go's members compare the fixed part of a config exactly and would stop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .errors import ConsumerGroupConfigError, ConsumerGroupError

__all__ = [
    "CONSUMER_IDLE_TIMEOUT_FACTOR",
    "DEFAULT_ACK_WAIT",
    "ELASTIC_BUCKET",
    "MIN_PULL_EXPIRY_PINNED_TTL",
    "PRIORITY_GROUP",
    "PULL_TIMEOUT_DIVIDER",
    "STATIC_BUCKET",
    "ElasticConsumerGroupConfig",
    "MemberMapping",
    "PartitioningFilter",
    "StaticConsumerGroupConfig",
    "normalised_filters",
    "validate_elastic_config",
    "validate_static_config",
]

#: The KV bucket holding static group configs, keyed ``"<stream>.<group>"``.
STATIC_BUCKET = "static-consumer-groups"
#: The KV bucket holding elastic group configs, keyed ``"<stream>.<group>"``.
ELASTIC_BUCKET = "elastic-consumer-groups"
#: The priority group every member consumer has and every pull names.
PRIORITY_GROUP = "PCG"
#: Seconds; the ack wait of a member consumer when the caller gives none.
DEFAULT_ACK_WAIT = 5.0
#: Seconds; the pinned TTL and the pull expiry are never shorter.
MIN_PULL_EXPIRY_PINNED_TTL = 1.0
#: A pull request lives ``ack_wait / PULL_TIMEOUT_DIVIDER`` seconds.
PULL_TIMEOUT_DIVIDER = 2
#: An elastic member consumer is removed by the server after ``ack_wait * factor`` idle seconds.
CONSUMER_IDLE_TIMEOUT_FACTOR = 1


class MemberMapping(msgspec.Struct, frozen=True, kw_only=True):
    """An explicit assignment of partitions to one member.

    Attributes:
        member: the member's name.
        partitions: the partition numbers it owns (each in ``[0, max_members)``).
    """

    member: str
    partitions: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON object (both fields always written, as Go does)."""
        return {"member": self.member, "partitions": list(self.partitions)}


class PartitioningFilter(msgspec.Struct, frozen=True, kw_only=True):
    """An elastic group's subject filter and the wildcards that key its partitions.

    Attributes:
        filter: a subject filter with ``*`` wildcards or a trailing ``>``.
        partitioning_wildcards: 1-based indexes of the ``*`` tokens whose values
            choose the partition; empty: the whole subject does.
    """

    filter: str
    partitioning_wildcards: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON object (both fields always written, as Go does)."""
        return {"filter": self.filter, "partitioning_wildcards": list(self.partitioning_wildcards)}


# How each stored field is read. The same readers say whether two spellings
# mean the same (``null``, ``[]`` and an absent list; ``-1`` and ``0`` limits).
def _names(raw: Any) -> tuple[str, ...]:
    return tuple(str(m) for m in raw or ())


def _mappings(raw: Any) -> tuple[MemberMapping, ...]:
    return tuple(MemberMapping(member=str(m["member"]), partitions=tuple(int(p) for p in m.get("partitions") or ()))
                 for m in raw or ())


def _pfilters(raw: Any) -> tuple[PartitioningFilter, ...]:
    return tuple(PartitioningFilter(filter=str(f["filter"]),
                                    partitioning_wildcards=tuple(int(w) for w in f.get("partitioning_wildcards") or ()))
                 for f in raw or ())


def normalised_filters(filters: Sequence[PartitioningFilter]) -> tuple[PartitioningFilter, ...]:
    """``filters`` as decoded configs hold them: tuples of ints, whatever sequence the caller gave.

    A filter given with ``partitioning_wildcards=[1]`` is the same group as the
    ``(1,)`` read back from the bucket (the order of the wildcards matters: it
    is the order of the partitioning key).
    """
    return tuple(PartitioningFilter(filter=str(f.filter),
                                    partitioning_wildcards=tuple(int(w) for w in f.partitioning_wildcards or ()))
                 for f in filters)


def _limit(raw: Any) -> int:
    # Go and its CLI write "no limit" as 0 (left out), natsio-pcgroups as -1.
    value = int(raw or 0)
    return value if value > 0 else 0


_STATIC_FIELDS: dict[str, Callable[[Any], Any]] = {
    "max_members": lambda raw: int(raw or 0), "filters": _names, "members": _names, "member_mappings": _mappings}
_ELASTIC_FIELDS: dict[str, Callable[[Any], Any]] = {
    "max_members": lambda raw: int(raw or 0), "partitioning_filters": _pfilters, "max_buffered_msg": _limit,
    "max_buffered_bytes": _limit, "members": _names, "member_mappings": _mappings}


def _membership(members: tuple[str, ...], mappings: tuple[MemberMapping, ...]) -> tuple[Any, ...]:
    """What a membership means: who owns which partitions (order and repeats aside)."""
    return (tuple(sorted(set(members))),
            tuple(sorted((m.member, tuple(sorted(m.partitions))) for m in mappings)))


class StaticConsumerGroupConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A static group's config: members and partition count fixed at creation.

    Attributes:
        max_members: the number of partitions (and the most members that get any).
        filters: the subject filters the group covers (without the partition
            token); empty: the whole stream.
        members: the members, partitions shared out evenly; or
        member_mappings: an explicit assignment (never both).
        unknown_fields: JSON fields this client does not model, kept as read.
    """

    max_members: int
    filters: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    member_mappings: tuple[MemberMapping, ...] = ()
    unknown_fields: dict[str, Any] | None = None

    def is_in_membership(self, member: str) -> bool:
        """Whether ``member`` is named in the members or the mappings."""
        return member in self.members or any(m.member == member for m in self.member_mappings)

    def to_json(self, as_stored: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON object as orbit.go writes it (empty lists left out).

        Args:
            as_stored: the object this config was read from: each field that
                still means the same keeps its stored spelling (a read-modify-write
                changes only what it changed).
        """
        out: dict[str, Any] = dict(self.unknown_fields or {})
        out["max_members"] = self.max_members
        _put_list(out, "filters", list(self.filters))
        _put_list(out, "members", list(self.members))
        _put_list(out, "member_mappings", [m.to_json() for m in self.member_mappings])
        return out if as_stored is None else _as_stored(out, as_stored, _STATIC_FIELDS)

    def same_group(self, other: StaticConsumerGroupConfig) -> bool:
        """Whether ``other`` means the same group: partitions, filters and who owns what
        (spelling, order, repeats and unknown fields aside)."""
        return (self.max_members == other.max_members and set(self.filters) == set(other.filters)
                and _membership(self.members, self.member_mappings) == _membership(other.members,
                                                                                    other.member_mappings))

    @classmethod
    def from_json(cls, data: bytes | dict[str, Any]) -> StaticConsumerGroupConfig:
        """Decode (and validate) a stored config.

        Raises:
            ConsumerGroupError: not a JSON object of the right shape.
            ConsumerGroupConfigError: it breaks the rules.
        """
        fields, unknown = _decode(data, _STATIC_FIELDS, "a static")
        cfg = cls(**fields, unknown_fields=unknown)
        validate_static_config(cfg)
        return cfg


class ElasticConsumerGroupConfig(msgspec.Struct, frozen=True, kw_only=True):
    """An elastic group's config: partitions fixed, membership changed at run time.

    Attributes:
        max_members: the number of partitions.
        partitioning_filters: the filters copied into the group's work-queue
            stream, each with its partitioning wildcards; empty: every subject.
        max_buffered_msgs: the most messages the group's stream holds (0: no
            limit; a stored -1, natsio-pcgroups' spelling, reads as 0).
        max_buffered_bytes: the most bytes it holds (0: no limit, as above).
        members: the members, partitions shared out evenly; or
        member_mappings: an explicit assignment (never both).
        revision: the KV revision it was read at (0: not read from the bucket).
        unknown_fields: JSON fields this client does not model, kept as read.
    """

    max_members: int
    partitioning_filters: tuple[PartitioningFilter, ...] = ()
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: tuple[str, ...] = ()
    member_mappings: tuple[MemberMapping, ...] = ()
    revision: int = 0
    unknown_fields: dict[str, Any] | None = None

    def is_in_membership(self, member: str) -> bool:
        """Whether ``member`` is named in the members or the mappings."""
        return member in self.members or any(m.member == member for m in self.member_mappings)

    def fixed_part(self) -> tuple[Any, ...]:
        """What cannot change while the group lives (it defines the group's stream), by meaning:
        any "no limit" spelling of a buffer size is 0, wildcard indexes given as a list are
        the tuple read back from the bucket."""
        return (self.max_members, normalised_filters(self.partitioning_filters), _limit(self.max_buffered_msgs),
                _limit(self.max_buffered_bytes))

    def same_membership(self, other: ElasticConsumerGroupConfig) -> bool:
        """Whether ``other`` gives every member the same partitions (order and repeats aside)."""
        return _membership(self.members, self.member_mappings) == _membership(other.members, other.member_mappings)

    def to_json(self, as_stored: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON object as orbit.go writes it.

        ``partitioning_filters`` is always written (Go has no ``omitempty``
        there), ``null`` when there are none (Go's nil slice, which natsio also
        reads as its default); the limits and the membership only when set.
        The limit of messages is spelled ``max_buffered_msg``, as Go tags it.

        Args:
            as_stored: the object this config was read from: each field that
                still means the same keeps its stored spelling (``null`` stays
                ``null``, ``-1`` stays ``-1``), so a membership change rewrites
                only the membership and members in other clients, which compare
                the rest exactly, go on running.
        """
        out: dict[str, Any] = dict(self.unknown_fields or {})
        out["max_members"] = self.max_members
        out["partitioning_filters"] = [f.to_json() for f in self.partitioning_filters] or None
        for key, value in (("max_buffered_msg", self.max_buffered_msgs),
                           ("max_buffered_bytes", self.max_buffered_bytes)):
            if value > 0:
                out[key] = value
            else:
                out.pop(key, None)
        _put_list(out, "members", list(self.members))
        _put_list(out, "member_mappings", [m.to_json() for m in self.member_mappings])
        return out if as_stored is None else _as_stored(out, as_stored, _ELASTIC_FIELDS)

    @classmethod
    def from_json(cls, data: bytes | dict[str, Any], revision: int = 0) -> ElasticConsumerGroupConfig:
        """Decode (and validate) a stored config.

        Raises:
            ConsumerGroupError: not a JSON object of the right shape.
            ConsumerGroupConfigError: it breaks the rules.
        """
        fields, unknown = _decode(data, _ELASTIC_FIELDS, "an elastic")
        fields["max_buffered_msgs"] = fields.pop("max_buffered_msg")
        cfg = cls(**fields, revision=revision, unknown_fields=unknown)
        validate_elastic_config(cfg)
        return cfg


def _decode(data: bytes | dict[str, Any], readers: dict[str, Callable[[Any], Any]],
            kind: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the known fields read, the unknown ones as they are) of a stored config."""
    raw = _object(data)
    try:
        fields = {key: read(raw.pop(key, None)) for key, read in readers.items()}
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ConsumerGroupError(f"{kind} consumer group config of the wrong shape: {exc}") from exc
    return fields, raw or None


def _as_stored(out: dict[str, Any], stored: dict[str, Any], readers: dict[str, Callable[[Any], Any]]
               ) -> dict[str, Any]:
    """``out`` with the spelling of ``stored`` (key order, ``null``, ``[]``, left out, ``-1``)
    for every field whose meaning did not change."""
    keep = {key for key, read in readers.items() if read(stored.get(key)) == read(out.get(key))}
    result = {}
    for key, value in stored.items():
        if key in keep:
            result[key] = value
        elif key in out:
            result[key] = out[key]
    for key, value in out.items():
        if key not in result and key not in keep:
            result[key] = value
    return result


def _put_list(out: dict[str, Any], key: str, value: list[Any]) -> None:
    # Go's omitempty: an empty list is not written at all.
    if value:
        out[key] = value
    else:
        out.pop(key, None)


def _object(data: bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(data, dict):
        return dict(data)
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise ConsumerGroupError(f"a consumer group config that is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConsumerGroupError("a consumer group config that is not a JSON object")
    return raw


def _validate_membership(max_members: int, members: tuple[str, ...], mappings: tuple[MemberMapping, ...]) -> None:
    if max_members < 1:
        raise ConsumerGroupConfigError("the max number of members must be >= 1")
    if members and mappings:
        raise ConsumerGroupConfigError("either members or member mappings must be provided, not both")
    if not mappings:
        return  # members are forgiving: deduplicated and capped when partitions are assigned
    if len(mappings) > max_members:
        raise ConsumerGroupConfigError("the number of member mappings must be between 1 and the max number of members")
    names: set[str] = set()
    seen: set[int] = set()
    for mapping in mappings:
        if mapping.member in names:
            raise ConsumerGroupConfigError("member names must be unique")
        names.add(mapping.member)
        for p in mapping.partitions:
            if p in seen:
                raise ConsumerGroupConfigError("partition numbers must be used only once")
            if p < 0 or p >= max_members:
                raise ConsumerGroupConfigError(
                    "partition numbers must be between 0 and one less than the max number of members")
            seen.add(p)
    if len(seen) != max_members:
        raise ConsumerGroupConfigError("the mappings must assign every partition exactly once")


def validate_static_config(config: StaticConsumerGroupConfig) -> None:
    """Check a static group config.

    Raises:
        ConsumerGroupConfigError: the first rule it breaks.
    """
    _validate_membership(config.max_members, config.members, config.member_mappings)


def validate_elastic_config(config: ElasticConsumerGroupConfig) -> None:
    """Check an elastic group config (partitioning filters, then membership).

    Raises:
        ConsumerGroupConfigError: the first rule it breaks.
    """
    if config.max_members < 1:
        raise ConsumerGroupConfigError("the max number of members must be >= 1")
    for pf in config.partitioning_filters:
        if not pf.filter:
            raise ConsumerGroupConfigError("partitioning filters must have a non-empty filter")
        tokens = pf.filter.split(".")
        stars = tokens.count("*")
        if stars == 0 and tokens[-1] != ">":
            raise ConsumerGroupConfigError("partitioning filters must have at least one * wildcard or end with >")
        if len(pf.partitioning_wildcards) > stars:
            raise ConsumerGroupConfigError(
                "the number of partitioning wildcards must not be larger than the number of * wildcards")
        if len(set(pf.partitioning_wildcards)) != len(pf.partitioning_wildcards):
            raise ConsumerGroupConfigError("partitioning wildcard indexes must be unique")
        if any(w < 1 or w > stars for w in pf.partitioning_wildcards):
            raise ConsumerGroupConfigError(
                "partitioning wildcard indexes must be between 1 and the number of * wildcards in the filter")
    _validate_membership(config.max_members, config.members, config.member_mappings)
