"""Group configs as stored in the KV buckets, and the rules they obey.

The JSON layout, the bucket names, the priority group name and the timer
rules are the ones of orbit.go's ``pcgroups`` (and natsio-pcgroups), so one
group can have members in Go, in natsio and here at once. Go's ``omitempty``
fields are left out when empty; fields this client does not know are kept in
``unknown_fields`` and written back by a read-modify-write.
"""

from __future__ import annotations

import json
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

    def to_json(self) -> dict[str, Any]:
        """The JSON object as orbit.go writes it (empty lists left out)."""
        out: dict[str, Any] = dict(self.unknown_fields or {})
        out["max_members"] = self.max_members
        _put_list(out, "filters", list(self.filters))
        _put_list(out, "members", list(self.members))
        _put_list(out, "member_mappings", [m.to_json() for m in self.member_mappings])
        return out

    def same_group(self, other: StaticConsumerGroupConfig) -> bool:
        """Whether ``other`` describes the same group (unknown fields aside)."""
        return (self.max_members, self.filters, self.members, self.member_mappings) == (
            other.max_members, other.filters, other.members, other.member_mappings)

    @classmethod
    def from_json(cls, data: bytes | dict[str, Any]) -> StaticConsumerGroupConfig:
        """Decode (and validate) a stored config.

        Raises:
            ConsumerGroupError: not a JSON object of the right shape.
            ConsumerGroupConfigError: it breaks the rules.
        """
        raw = _object(data)
        try:
            cfg = cls(max_members=int(raw.pop("max_members", 0)),
                      filters=tuple(str(f) for f in raw.pop("filters", None) or ()),
                      members=tuple(str(m) for m in raw.pop("members", None) or ()),
                      member_mappings=_mappings(raw.pop("member_mappings", None)),
                      unknown_fields=raw or None)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise ConsumerGroupError(f"a static consumer group config of the wrong shape: {exc}") from exc
        validate_static_config(cfg)
        return cfg


class ElasticConsumerGroupConfig(msgspec.Struct, frozen=True, kw_only=True):
    """An elastic group's config: partitions fixed, membership changed at run time.

    Attributes:
        max_members: the number of partitions.
        partitioning_filters: the filters copied into the group's work-queue
            stream, each with its partitioning wildcards; empty: every subject.
        max_buffered_msgs: the most messages the group's stream holds (0: no limit).
        max_buffered_bytes: the most bytes it holds (0: no limit).
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
        """What cannot change while the group lives (it defines the group's stream)."""
        return (self.max_members, self.partitioning_filters, self.max_buffered_msgs, self.max_buffered_bytes)

    def to_json(self) -> dict[str, Any]:
        """The JSON object as orbit.go writes it.

        ``partitioning_filters`` is always written (Go has no ``omitempty``
        there); the limits and the membership only when set. The limit of
        messages is spelled ``max_buffered_msg``, as Go tags it.
        """
        out: dict[str, Any] = dict(self.unknown_fields or {})
        out["max_members"] = self.max_members
        out["partitioning_filters"] = [f.to_json() for f in self.partitioning_filters]
        for key, value in (("max_buffered_msg", self.max_buffered_msgs),
                           ("max_buffered_bytes", self.max_buffered_bytes)):
            if value:
                out[key] = value
            else:
                out.pop(key, None)
        _put_list(out, "members", list(self.members))
        _put_list(out, "member_mappings", [m.to_json() for m in self.member_mappings])
        return out

    @classmethod
    def from_json(cls, data: bytes | dict[str, Any], revision: int = 0) -> ElasticConsumerGroupConfig:
        """Decode (and validate) a stored config.

        Raises:
            ConsumerGroupError: not a JSON object of the right shape.
            ConsumerGroupConfigError: it breaks the rules.
        """
        raw = _object(data)
        try:
            filters = tuple(PartitioningFilter(filter=str(f["filter"]),
                                               partitioning_wildcards=tuple(int(w) for w in
                                                                            f.get("partitioning_wildcards") or ()))
                            for f in raw.pop("partitioning_filters", None) or ())
            cfg = cls(max_members=int(raw.pop("max_members", 0)), partitioning_filters=filters,
                      max_buffered_msgs=int(raw.pop("max_buffered_msg", 0) or 0),
                      max_buffered_bytes=int(raw.pop("max_buffered_bytes", 0) or 0),
                      members=tuple(str(m) for m in raw.pop("members", None) or ()),
                      member_mappings=_mappings(raw.pop("member_mappings", None)),
                      revision=revision, unknown_fields=raw or None)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise ConsumerGroupError(f"an elastic consumer group config of the wrong shape: {exc}") from exc
        validate_elastic_config(cfg)
        return cfg


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


def _mappings(raw: Any) -> tuple[MemberMapping, ...]:
    return tuple(MemberMapping(member=str(m["member"]), partitions=tuple(int(p) for p in m.get("partitions") or ()))
                 for m in raw or ())


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
