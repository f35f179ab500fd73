"""JetStream advisories as typed models, one per schema ``type`` the server sends.

The server publishes an advisory on ``$JS.EVENT.ADVISORY.>`` when something
happens to a stream or a consumer: a message reached its consumer's
``max_deliver``, was terminated or NAKed, a stream or consumer was created,
updated or deleted, a leader was elected. Each carries its schema name in
``type`` (``io.nats.jetstream.advisory.v1.max_deliver``); the field names are
the server's (nats-server ``server/jetstream_events.go``, jsm.go's
``api/jetstream/advisory``). An advisory of a type this client does not model
decodes to :class:`UnknownAdvisory`, which keeps the JSON as it came.

Every model is a frozen ``msgspec.Struct`` that keeps the JSON fields it does
not model in ``unknown_fields`` (a newer server's additions are never lost).
Times are ``datetime``; durations are what the server sends (nanoseconds).
"""

from __future__ import annotations

import datetime
from typing import Any, ClassVar, Union

import msgspec

from ..errors import InvalidResponseError
from ..jetstream._api import capture_unknown

__all__ = [
    "ADVISORY_PREFIX",
    "Advisory",
    "ConsumerActionAdvisory",
    "ConsumerGroupPinnedAdvisory",
    "ConsumerGroupUnpinnedAdvisory",
    "ConsumerLeaderElectedAdvisory",
    "ConsumerPauseAdvisory",
    "ConsumerQuorumLostAdvisory",
    "DomainLeaderElectedAdvisory",
    "MaxDeliveriesAdvisory",
    "NakAdvisory",
    "PeerInfo",
    "StreamActionAdvisory",
    "StreamLeaderElectedAdvisory",
    "StreamQuorumLostAdvisory",
    "TerminatedAdvisory",
    "UnknownAdvisory",
    "decode_advisory",
]

#: The subject prefix of every JetStream advisory (``$JS.EVENT.ADVISORY.>`` receives them all).
ADVISORY_PREFIX = "$JS.EVENT.ADVISORY"


class _Event(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of every advisory (the server's ``TypedEvent``)."""

    #: The schema name this model decodes (the class's, not the instance's ``type``).
    SCHEMA: ClassVar[str] = ""

    #: The schema name, e.g. ``"io.nats.jetstream.advisory.v1.max_deliver"``.
    type: str = ""
    #: A unique id of this advisory (a NUID).
    id: str = ""
    #: When the server made it.
    timestamp: datetime.datetime | None = None
    #: The JetStream domain of the server, if it has one.
    domain: str | None = None
    #: JSON fields this client does not model, as they came.
    unknown_fields: dict[str, Any] | None = None


class PeerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A replica of a clustered stream or consumer, as a leader-election advisory lists it.

    Attributes:
        name: the server's name.
        current: caught up and seen recently.
        offline: not seen recently.
        active: nanoseconds since it was last seen active.
        lag: operations it is behind.
        peer: the peer's unique id.
    """

    name: str = ""
    current: bool = False
    offline: bool = False
    active: int = 0
    lag: int = 0
    peer: str = ""
    unknown_fields: dict[str, Any] | None = None


class MaxDeliveriesAdvisory(_Event, frozen=True, kw_only=True):
    """A message reached its consumer's ``max_deliver`` without being acknowledged: a dead letter.

    Sent on ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>``.

    Attributes:
        stream: the stream of the message.
        consumer: the consumer that delivered it.
        stream_seq: the message's sequence in the stream.
        deliveries: how many times it was delivered.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.max_deliver"
    stream: str = ""
    consumer: str = ""
    stream_seq: int = 0
    deliveries: int = 0


class TerminatedAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer's client terminated a message (``msg.term()``): it is not delivered again.

    Sent on ``$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.<stream>.<consumer>``.

    Attributes:
        stream: the stream of the message.
        consumer: the consumer that delivered it.
        consumer_seq: the delivery's consumer sequence.
        stream_seq: the message's sequence in the stream.
        deliveries: how many times it was delivered.
        reason: the reason given with the term, if any.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.terminated"
    stream: str = ""
    consumer: str = ""
    consumer_seq: int = 0
    stream_seq: int = 0
    deliveries: int = 0
    reason: str = ""


class NakAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer's client NAKed a message (it is delivered again).

    Sent on ``$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.<stream>.<consumer>``.

    Attributes:
        stream: the stream of the message.
        consumer: the consumer that delivered it.
        consumer_seq: the delivery's consumer sequence.
        stream_seq: the message's sequence in the stream.
        deliveries: how many times it was delivered.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.nak"
    stream: str = ""
    consumer: str = ""
    consumer_seq: int = 0
    stream_seq: int = 0
    deliveries: int = 0


class StreamActionAdvisory(_Event, frozen=True, kw_only=True):
    """A stream was created, updated or deleted.

    Sent on ``$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<stream>``.

    Attributes:
        stream: the stream.
        action: ``"create"``, ``"modify"`` or ``"delete"``.
        template: the stream template it came from (old servers).
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.stream_action"
    stream: str = ""
    action: str = ""
    template: str | None = None


class ConsumerActionAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer was created, updated or deleted.

    Sent on ``$JS.EVENT.ADVISORY.CONSUMER.{CREATED,DELETED}.<stream>.<consumer>``.

    Attributes:
        stream: the consumer's stream.
        consumer: the consumer's name.
        action: ``"create"``, ``"modify"`` or ``"delete"``.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_action"
    stream: str = ""
    consumer: str = ""
    action: str = ""


class ConsumerPauseAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer was paused or resumed.

    Attributes:
        stream: the consumer's stream.
        consumer: the consumer's name.
        paused: paused now (False: resumed).
        pause_until: when the pause ends.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_pause"
    stream: str = ""
    consumer: str = ""
    paused: bool = False
    pause_until: datetime.datetime | None = None


class ConsumerGroupPinnedAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer's priority group pinned a new client.

    Attributes:
        account: the account (clustered servers say).
        stream: the consumer's stream.
        consumer: the consumer's name.
        group: the priority group.
        pinned_id: the id of the pinned client.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_group_pinned"
    account: str | None = None
    stream: str = ""
    consumer: str = ""
    group: str = ""
    pinned_id: str = ""


class ConsumerGroupUnpinnedAdvisory(_Event, frozen=True, kw_only=True):
    """A consumer's priority group lost its pinned client.

    Attributes:
        account: the account (clustered servers say).
        stream: the consumer's stream.
        consumer: the consumer's name.
        group: the priority group.
        reason: ``"admin"`` (unpinned by a request) or ``"timeout"``.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_group_unpinned"
    account: str | None = None
    stream: str = ""
    consumer: str = ""
    group: str = ""
    reason: str = ""


class StreamLeaderElectedAdvisory(_Event, frozen=True, kw_only=True):
    """A clustered stream elected a leader.

    Attributes:
        account: the account (clustered servers say).
        stream: the stream.
        leader: the new leader's server name.
        replicas: the replicas.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.stream_leader_elected"
    account: str | None = None
    stream: str = ""
    leader: str = ""
    replicas: list[PeerInfo] | None = None


class ConsumerLeaderElectedAdvisory(_Event, frozen=True, kw_only=True):
    """A clustered consumer elected a leader.

    Attributes:
        account: the account (clustered servers say).
        stream: the consumer's stream.
        consumer: the consumer's name.
        leader: the new leader's server name.
        replicas: the replicas.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_leader_elected"
    account: str | None = None
    stream: str = ""
    consumer: str = ""
    leader: str = ""
    replicas: list[PeerInfo] | None = None


class DomainLeaderElectedAdvisory(_Event, frozen=True, kw_only=True):
    """The JetStream meta group (of a domain) elected a leader.

    Attributes:
        leader: the new leader's server name.
        replicas: the meta group's peers.
        cluster: the leader's cluster.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.domain_leader_elected"
    leader: str = ""
    replicas: list[PeerInfo] | None = None
    cluster: str = ""


class StreamQuorumLostAdvisory(_Event, frozen=True, kw_only=True):
    """A clustered stream lost its quorum and is stalled.

    Attributes:
        account: the account (clustered servers say).
        stream: the stream.
        replicas: the replicas.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.stream_quorum_lost"
    account: str | None = None
    stream: str = ""
    replicas: list[PeerInfo] | None = None


class ConsumerQuorumLostAdvisory(_Event, frozen=True, kw_only=True):
    """A clustered consumer lost its quorum and is stalled.

    Attributes:
        account: the account (clustered servers say).
        stream: the consumer's stream.
        consumer: the consumer's name.
        replicas: the replicas.
    """

    SCHEMA: ClassVar[str] = "io.nats.jetstream.advisory.v1.consumer_quorum_lost"
    account: str | None = None
    stream: str = ""
    consumer: str = ""
    replicas: list[PeerInfo] | None = None


class UnknownAdvisory(msgspec.Struct, frozen=True, kw_only=True):
    """An advisory of a type this client does not model (an API audit, a snapshot, a newer
    server's kind): its ``type`` and the JSON as it came.

    Attributes:
        type: the schema name (``""`` when the JSON had none).
        subject: the subject it arrived on.
        raw: the decoded JSON object.
    """

    type: str = ""
    subject: str = ""
    raw: dict[str, Any] = msgspec.field(default_factory=dict)


#: Any advisory :func:`decode_advisory` returns.
Advisory = Union[
    MaxDeliveriesAdvisory, TerminatedAdvisory, NakAdvisory, StreamActionAdvisory, ConsumerActionAdvisory,
    ConsumerPauseAdvisory, ConsumerGroupPinnedAdvisory, ConsumerGroupUnpinnedAdvisory,
    StreamLeaderElectedAdvisory, ConsumerLeaderElectedAdvisory, DomainLeaderElectedAdvisory,
    StreamQuorumLostAdvisory, ConsumerQuorumLostAdvisory, UnknownAdvisory,
]

_BY_SCHEMA: dict[str, type[_Event]] = {cls.SCHEMA: cls for cls in (
    MaxDeliveriesAdvisory, TerminatedAdvisory, NakAdvisory, StreamActionAdvisory, ConsumerActionAdvisory,
    ConsumerPauseAdvisory, ConsumerGroupPinnedAdvisory, ConsumerGroupUnpinnedAdvisory,
    StreamLeaderElectedAdvisory, ConsumerLeaderElectedAdvisory, DomainLeaderElectedAdvisory,
    StreamQuorumLostAdvisory, ConsumerQuorumLostAdvisory)}


def decode_advisory(data: bytes, subject: str = "") -> Advisory:
    """An advisory's JSON -> its model; a type this client does not model -> :class:`UnknownAdvisory`.

    Args:
        data: the message's payload.
        subject: the subject it arrived on (kept in an :class:`UnknownAdvisory`).

    Raises:
        InvalidResponseError: not a JSON object, or a known type whose fields do not fit its model
            (never msgspec's own error).
    """
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InvalidResponseError(f"advisory on {subject!r} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidResponseError(f"advisory on {subject!r} is not a JSON object")
    kind = doc.get("type")
    cls = _BY_SCHEMA.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return UnknownAdvisory(type=kind if isinstance(kind, str) else "", subject=subject, raw=doc)
    try:
        result: Advisory = msgspec.convert(capture_unknown(doc, cls), cls, strict=False)  # type: ignore[assignment]
    except msgspec.ValidationError as exc:
        raise InvalidResponseError(f"cannot decode a {cls.__name__} on {subject!r}: {exc}") from exc
    return result
