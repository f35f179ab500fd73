"""Partitioned consumer groups (ADR "(Partitioned) Consumer Groups for JetStream").

A group splits a stream's subjects into ``max_members`` partitions and gives
each partition to exactly one member at a time, in order. Static groups fix
members and partitions when made; elastic groups keep their membership in a
KV bucket and rebalance when members are added or removed. The KV layout,
consumer names, subject transforms and headers are orbit.go's ``pcgroups``
ones, so members in Go, in natsio and here can share one group.

Needs nats-server 2.11+ (priority groups with pinned clients).
"""

from .config import (
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    STATIC_BUCKET,
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)
from .elastic import (
    ElasticConsumeContext,
    add_members,
    create_elastic,
    delete_elastic,
    delete_member_mappings,
    delete_members,
    elastic_consume,
    elastic_is_in_membership_and_active,
    elastic_member_step_down,
    get_elastic_config,
    list_elastic_active_members,
    list_elastic_groups,
    list_elastic_members,
    set_member_mappings,
)
from .errors import (
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from .members import MemberState
from .partitions import (
    compose_group_stream_name,
    compose_key,
    compose_static_consumer_name,
    elastic_get_partition_filters,
    generate_partition_filters,
    member_partitions,
    partitioning_transform_destination,
    static_get_partition_filters,
    strip_partition,
)
from .session import ConsumerGroupConsumeContext, MessageHandler
from .static import (
    StaticConsumeContext,
    create_static,
    delete_static,
    get_static_config,
    list_static_active_members,
    list_static_groups,
    list_static_members,
    static_consume,
    static_member_step_down,
)

__all__ = [
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "ConsumerGroupConfigError",
    "ConsumerGroupConsumeContext",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "ElasticConsumeContext",
    "ElasticConsumerGroupConfig",
    "GroupConfigChangedError",
    "MemberMapping",
    "MemberNotInGroupError",
    "MemberState",
    "MessageHandler",
    "PartitioningFilter",
    "StaticConsumeContext",
    "StaticConsumerGroupConfig",
    "add_members",
    "compose_group_stream_name",
    "compose_key",
    "compose_static_consumer_name",
    "create_elastic",
    "create_static",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_consume",
    "elastic_get_partition_filters",
    "elastic_is_in_membership_and_active",
    "elastic_member_step_down",
    "generate_partition_filters",
    "get_elastic_config",
    "get_static_config",
    "list_elastic_active_members",
    "list_elastic_groups",
    "list_elastic_members",
    "list_static_active_members",
    "list_static_groups",
    "list_static_members",
    "member_partitions",
    "partitioning_transform_destination",
    "set_member_mappings",
    "static_consume",
    "static_get_partition_filters",
    "static_member_step_down",
    "strip_partition",
]
