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
from .errors import (
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from .partitions import (
    compose_group_stream_name,
    compose_key,
    compose_static_consumer_name,
    elastic_get_partition_filters,
    generate_partition_filters,
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
    "ElasticConsumerGroupConfig",
    "GroupConfigChangedError",
    "MemberMapping",
    "MemberNotInGroupError",
    "MessageHandler",
    "PartitioningFilter",
    "StaticConsumeContext",
    "StaticConsumerGroupConfig",
    "compose_group_stream_name",
    "compose_key",
    "compose_static_consumer_name",
    "create_static",
    "delete_static",
    "elastic_get_partition_filters",
    "generate_partition_filters",
    "get_static_config",
    "list_static_active_members",
    "list_static_groups",
    "partitioning_transform_destination",
    "static_consume",
    "static_get_partition_filters",
    "static_member_step_down",
    "strip_partition",
]
