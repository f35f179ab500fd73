"""Which partitions a member owns, and the names and subjects groups use.

No I/O: every member computes the same assignment from the same config, so
members agree without talking to each other. The rules are orbit.go's, so a
Go or natsio member of the same group computes the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .config import ElasticConsumerGroupConfig, MemberMapping, StaticConsumerGroupConfig
from .errors import ConsumerGroupConfigError

__all__ = [
    "compose_group_stream_name",
    "compose_key",
    "compose_static_consumer_name",
    "elastic_get_partition_filters",
    "generate_partition_filters",
    "member_partitions",
    "partitioning_transform_destination",
    "require_member_names",
    "static_get_partition_filters",
    "strip_partition",
]


# What the server refuses in a stream or consumer name (and a KV key in a
# token): member names become consumer names, group names a key's token, a
# stream's name and a consumer name's prefix.
_NOT_IN_A_NAME = frozenset(".*>/\\")


def is_valid_name(name: object) -> bool:
    """Whether ``name`` can be a group's or a member's name: a non-empty NATS token
    without ``.``, ``*``, ``>``, ``/``, ``\\``, white space or control characters."""
    return (isinstance(name, str) and bool(name) and name.isprintable()
            and not any(c in _NOT_IN_A_NAME or c.isspace() for c in name))


def require_member_names(names: Iterable[object]) -> None:
    """Refuse a member name that would make an invalid consumer name (before anything is written).

    Raises:
        ConsumerGroupConfigError: (a ``ValueError``) the first invalid name.
    """
    for name in names:
        if not is_valid_name(name):
            raise ConsumerGroupConfigError(
                f"invalid member name {name!r}: a member name is a non-empty NATS name token, without '.', "
                "'*', '>', '/', '\\', white space or control characters")


def compose_key(stream: str, group: str) -> str:
    """The group's key in its KV bucket: ``"<stream>.<group>"``."""
    return f"{stream}.{group}"


def compose_static_consumer_name(group: str, member: str) -> str:
    """A static member's durable consumer on the stream: ``"<group>-<member>"``."""
    return f"{group}-{member}"


def compose_group_stream_name(stream: str, group: str) -> str:
    """An elastic group's work-queue stream: ``"<stream>-<group>"``."""
    return f"{stream}-{group}"


def strip_partition(subject: str) -> str:
    """The subject without its first token (the partition number); unchanged without a dot."""
    _, dot, rest = subject.partition(".")
    return rest if dot else subject


def member_partitions(members: Sequence[str], max_members: int, member_mappings: Sequence[MemberMapping],
                      member: str) -> list[int]:
    """The partitions ``member`` owns, in order (orbit.go's assignment rule).

    With ``members``, they are deduplicated, sorted and capped to
    ``max_members``; each gets a contiguous run of ``max_members // n``
    partitions and the rest are dealt one each from the front, so a member
    joining or leaving moves few partitions. Otherwise ``member_mappings`` say.

    Args:
        members: the membership list (wins when both are given).
        max_members: the number of partitions.
        member_mappings: an explicit assignment.
        member: whose partitions.

    Returns:
        The partition numbers; empty when it owns none.
    """
    if members:
        chosen = sorted(dict.fromkeys(members))[:max_members]
        count = len(chosen)
        per = max_members // count
        even = count * per
        return [p for p in range(max_members)
                if (chosen[(p // per) % count] if p < even else chosen[(p - even) % count]) == member]
    return [p for m in member_mappings if m.member == member for p in m.partitions]


def generate_partition_filters(members: Sequence[str], max_members: int, member_mappings: Sequence[MemberMapping],
                               member: str, subject_filter: str = ">") -> list[str]:
    """The consumer filters of ``member``: ``"<partition>.<subject_filter>"`` for each partition it owns.

    The partitions are :func:`member_partitions`'. With ``member_mappings`` the
    filters are ``"<partition>.>"`` whatever ``subject_filter`` is (orbit.go's
    rule, kept for agreement with its members).

    Args:
        members: the membership list (wins when both are given).
        max_members: the number of partitions.
        member_mappings: an explicit assignment.
        member: whose filters.
        subject_filter: the filter that follows the partition token.

    Returns:
        The filters, in partition order; empty when it owns none.
    """
    tail = subject_filter if members else ">"
    return [f"{p}.{tail}" for p in member_partitions(members, max_members, member_mappings, member)]


def _combined(per_filter: list[list[str]]) -> list[str]:
    # Mappings give "<p>.>" for every filter; the server refuses overlapping
    # filters, so the same filter is asked for once.
    return list(dict.fromkeys(f for group in per_filter for f in group))


def static_get_partition_filters(config: StaticConsumerGroupConfig, member: str) -> list[str]:
    """The consumer filters of ``member`` in a static group (one per partition and filter)."""
    if not config.filters:
        return generate_partition_filters(config.members, config.max_members, config.member_mappings, member)
    return _combined([generate_partition_filters(config.members, config.max_members, config.member_mappings,
                                                 member, f) for f in config.filters])


def elastic_get_partition_filters(config: ElasticConsumerGroupConfig, member: str) -> list[str]:
    """The consumer filters of ``member`` on an elastic group's work-queue stream."""
    if not config.partitioning_filters:
        return generate_partition_filters(config.members, config.max_members, config.member_mappings, member)
    return _combined([generate_partition_filters(config.members, config.max_members, config.member_mappings,
                                                 member, pf.filter) for pf in config.partitioning_filters])


def partitioning_transform_destination(subject_filter: str, partitioning_wildcards: Sequence[int],
                                       max_members: int) -> str:
    """The subject transform destination that puts the partition number in front.

    ``"foo.*.*"`` with wildcards ``[1]`` over 4 partitions gives
    ``"{{Partition(4,1)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}"``; without
    partitioning wildcards the whole subject picks the partition.
    """
    tokens = subject_filter.split(".")
    n = 0
    for i, tok in enumerate(tokens):
        if tok == "*":
            n += 1
            tokens[i] = f"{{{{Wildcard({n})}}}}"
    rest = ".".join(tokens)
    if not partitioning_wildcards:
        return f"{{{{Partition({max_members})}}}}.{rest}"
    keys = ",".join(str(w) for w in partitioning_wildcards)
    return f"{{{{Partition({max_members},{keys})}}}}.{rest}"
