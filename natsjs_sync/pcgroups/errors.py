"""The errors of partitioned consumer groups, all under :class:`~natsjs_sync.NatsError`.

::

    NatsError
     └── ConsumerGroupError
          ├── ConsumerGroupNotFoundError     no such group (or no bucket of that kind)
          ├── ConsumerGroupExistsError       created again with another config
          ├── ConsumerGroupConfigError       a config that breaks the rules (also a ValueError)
          ├── MemberNotInGroupError          a static member not named by the group
          └── GroupConfigChangedError        a running member saw a change it cannot follow

Errors of the layers below (JetStream, KV, the connection) pass through as
they are: a caller can still match them by ``err_code``.
"""

from __future__ import annotations

from ..errors import NatsError

__all__ = [
    "ConsumerGroupConfigError",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "GroupConfigChangedError",
    "MemberNotInGroupError",
]


class ConsumerGroupError(NatsError):
    """Something about a partitioned consumer group went wrong."""


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """The group (or the KV bucket groups of its kind live in) does not exist."""


class ConsumerGroupExistsError(ConsumerGroupError):
    """The group exists with another config; delete it and create it again to change it."""


class ConsumerGroupConfigError(ConsumerGroupError, ValueError):
    """A group config breaks the rules (partitions, members, mappings, filters)."""


class MemberNotInGroupError(ConsumerGroupError):
    """A static group's member name is neither in its members nor in its mappings."""


class GroupConfigChangedError(ConsumerGroupError):
    """A running member saw its group's fixed settings change; it stopped consuming."""
