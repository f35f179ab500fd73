"""What the server shows of a group's members: their consumers, and which are alive.

A member instance at work keeps pull requests waiting on its member's consumer
(``num_waiting``), and the instance the server sends to holds the pin of the
consumer's priority group (``pinned_client_id``) for as long as it pulls within
the pinned TTL. A member whose process died shows neither once its last pull
request is gone with its connection and its pin has timed out (after
``ack_wait``); an elastic member's consumer is then removed by the server too.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import msgspec

from ..errors import ConsumerNotFoundError
from ..jetstream import JetStream
from .config import PRIORITY_GROUP, MemberMapping
from .partitions import is_valid_name

__all__ = ["MemberState", "member_names", "member_states"]


class MemberState(msgspec.Struct, frozen=True, kw_only=True):
    """One member of a group as the server sees it now.

    Attributes:
        member: the member's name.
        partitions: the partitions the group's config gives it.
        consumer: the name of its consumer (static: ``"<group>-<member>"`` on the
            stream; elastic: the member's name on ``"<stream>-<group>"``).
        consumer_exists: whether that consumer exists.
        active: whether an instance is consuming: the consumer has pull
            requests waiting or an instance pinned.
        num_waiting: pull requests waiting on the consumer.
        pinned_client_id: the pin of the instance the server sends to ("": none).
        pinned_since: when that instance got the pin.
        num_ack_pending: messages delivered and not yet acknowledged.
        num_pending: messages of its partitions not yet delivered.
    """

    member: str
    partitions: tuple[int, ...]
    consumer: str
    consumer_exists: bool = False
    active: bool = False
    num_waiting: int = 0
    pinned_client_id: str = ""
    pinned_since: datetime.datetime | None = None
    num_ack_pending: int = 0
    num_pending: int = 0


def member_names(members: Sequence[str], member_mappings: Sequence[MemberMapping]) -> list[str]:
    """The members a config names, each once, in the stored order."""
    return list(dict.fromkeys(members)) or [m.member for m in member_mappings]


def member_states(js: JetStream, stream: str, consumers: Sequence[tuple[str, str, Sequence[int]]]
                  ) -> list[MemberState]:
    """The state of each ``(member, consumer name, partitions)`` (one consumer info request each).

    Raises:
        JetStreamError: the server could not answer.
    """
    states = []
    for member, name, partitions in consumers:
        base = MemberState(member=member, partitions=tuple(partitions), consumer=name)
        if not is_valid_name(name):
            # Written by a client that does not check names: no consumer can have it.
            states.append(base)
            continue
        try:
            info = js.consumer(stream, name).cached_info
        except ConsumerNotFoundError:
            states.append(base)
            continue
        pin = next((g for g in info.priority_groups or () if g.group == PRIORITY_GROUP), None)
        pinned = pin.pinned_client_id or "" if pin is not None else ""
        states.append(msgspec.structs.replace(
            base, consumer_exists=True, active=bool(info.num_waiting or pinned), num_waiting=info.num_waiting,
            pinned_client_id=pinned, pinned_since=pin.pinned_ts if pinned and pin is not None else None,
            num_ack_pending=info.num_ack_pending, num_pending=info.num_pending))
    return states
