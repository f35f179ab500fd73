"""JetStream advisories and dead letters (see ``docs/advisories.rst``).

:class:`AdvisoryFeed` is a typed, iterable feed of ``$JS.EVENT.ADVISORY.>``;
:class:`DeadLetters` copies the messages of max-deliveries and terminated
advisories into a dead-letter stream, exactly once each.

Stands above the client in the import graph; nothing in the client imports it.
"""

from __future__ import annotations

from .deadletter import (
    DEFAULT_PREFIX,
    HEADER_CONSUMER,
    HEADER_DELIVERIES,
    HEADER_MISSING,
    HEADER_ORIGINAL_PREFIX,
    HEADER_REASON,
    HEADER_SEQUENCE,
    HEADER_STREAM,
    HEADER_SUBJECT,
    HEADER_TERM_REASON,
    HEADER_TIME,
    DeadLetterAdvisory,
    DeadLetterOutcome,
    DeadLetterResult,
    DeadLetters,
)
from .feed import DEFAULT_MAX_PENDING, AdvisoryFeed, advisory_subjects
from .models import (
    ADVISORY_PREFIX,
    Advisory,
    ConsumerActionAdvisory,
    ConsumerGroupPinnedAdvisory,
    ConsumerGroupUnpinnedAdvisory,
    ConsumerLeaderElectedAdvisory,
    ConsumerPauseAdvisory,
    ConsumerQuorumLostAdvisory,
    DomainLeaderElectedAdvisory,
    MaxDeliveriesAdvisory,
    NakAdvisory,
    PeerInfo,
    StreamActionAdvisory,
    StreamLeaderElectedAdvisory,
    StreamQuorumLostAdvisory,
    TerminatedAdvisory,
    UnknownAdvisory,
    decode_advisory,
)

__all__ = [
    "ADVISORY_PREFIX",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_PREFIX",
    "HEADER_CONSUMER",
    "HEADER_DELIVERIES",
    "HEADER_MISSING",
    "HEADER_ORIGINAL_PREFIX",
    "HEADER_REASON",
    "HEADER_SEQUENCE",
    "HEADER_STREAM",
    "HEADER_SUBJECT",
    "HEADER_TERM_REASON",
    "HEADER_TIME",
    "Advisory",
    "AdvisoryFeed",
    "ConsumerActionAdvisory",
    "ConsumerGroupPinnedAdvisory",
    "ConsumerGroupUnpinnedAdvisory",
    "ConsumerLeaderElectedAdvisory",
    "ConsumerPauseAdvisory",
    "ConsumerQuorumLostAdvisory",
    "DeadLetterAdvisory",
    "DeadLetterOutcome",
    "DeadLetterResult",
    "DeadLetters",
    "DomainLeaderElectedAdvisory",
    "MaxDeliveriesAdvisory",
    "NakAdvisory",
    "PeerInfo",
    "StreamActionAdvisory",
    "StreamLeaderElectedAdvisory",
    "StreamQuorumLostAdvisory",
    "TerminatedAdvisory",
    "UnknownAdvisory",
    "advisory_subjects",
    "decode_advisory",
]
