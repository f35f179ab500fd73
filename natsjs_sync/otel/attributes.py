"""Attribute names and span names of the messaging semantic conventions, as NATS fills them.

The standard names come from ``opentelemetry-semantic-conventions`` (so a
rename there is a rename here); the JetStream facts a reader of a trace needs,
which the conventions have no names for, live under the ``nats.`` prefix.
Span names must stay low-cardinality: a reply inbox is named ``(temporary)``
and a wildcard subscription by its pattern, never by the subject of each message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.semconv._incubating.attributes import messaging_attributes as _m
from opentelemetry.semconv.attributes import error_attributes as _e
from opentelemetry.semconv.attributes import server_attributes as _s

__all__ = [
    "ERROR_TYPE",
    "MESSAGING_BATCH_MESSAGE_COUNT",
    "MESSAGING_CLIENT_ID",
    "MESSAGING_CONSUMER_GROUP_NAME",
    "MESSAGING_DESTINATION_NAME",
    "MESSAGING_DESTINATION_SUBSCRIPTION_NAME",
    "MESSAGING_DESTINATION_TEMPLATE",
    "MESSAGING_DESTINATION_TEMPORARY",
    "MESSAGING_MESSAGE_BODY_SIZE",
    "MESSAGING_MESSAGE_ID",
    "MESSAGING_OPERATION_NAME",
    "MESSAGING_OPERATION_TYPE",
    "MESSAGING_SYSTEM",
    "NATS_ACK_KIND",
    "NATS_BATCH_ID",
    "NATS_BATCH_KIND",
    "NATS_CONSUMER",
    "NATS_CONSUMER_SEQUENCE",
    "NATS_DELIVERY_COUNT",
    "NATS_KV_BUCKET",
    "NATS_KV_KEY",
    "NATS_OBJECT_BUCKET",
    "NATS_OBJECT_NAME",
    "NATS_STREAM",
    "NATS_STREAM_SEQUENCE",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SYSTEM",
    "TEMPORARY",
    "destination_label",
    "is_temporary",
    "server_attributes",
]

MESSAGING_SYSTEM = _m.MESSAGING_SYSTEM
MESSAGING_OPERATION_NAME = _m.MESSAGING_OPERATION_NAME
MESSAGING_OPERATION_TYPE = _m.MESSAGING_OPERATION_TYPE
MESSAGING_DESTINATION_NAME = _m.MESSAGING_DESTINATION_NAME
MESSAGING_DESTINATION_TEMPLATE = _m.MESSAGING_DESTINATION_TEMPLATE
MESSAGING_DESTINATION_TEMPORARY = _m.MESSAGING_DESTINATION_TEMPORARY
MESSAGING_DESTINATION_SUBSCRIPTION_NAME = _m.MESSAGING_DESTINATION_SUBSCRIPTION_NAME
MESSAGING_CONSUMER_GROUP_NAME = _m.MESSAGING_CONSUMER_GROUP_NAME
MESSAGING_MESSAGE_ID = _m.MESSAGING_MESSAGE_ID
MESSAGING_MESSAGE_BODY_SIZE = _m.MESSAGING_MESSAGE_BODY_SIZE
MESSAGING_CLIENT_ID = _m.MESSAGING_CLIENT_ID
MESSAGING_BATCH_MESSAGE_COUNT = _m.MESSAGING_BATCH_MESSAGE_COUNT
SERVER_ADDRESS = _s.SERVER_ADDRESS
SERVER_PORT = _s.SERVER_PORT
ERROR_TYPE = _e.ERROR_TYPE

#: ``messaging.system`` for every span and metric of this client.
SYSTEM = "nats"

# JetStream facts (no conventional name exists for them).
NATS_STREAM = "nats.stream"
NATS_CONSUMER = "nats.consumer"
NATS_STREAM_SEQUENCE = "nats.stream.sequence"
NATS_CONSUMER_SEQUENCE = "nats.consumer.sequence"
NATS_DELIVERY_COUNT = "nats.delivery_count"
NATS_ACK_KIND = "nats.ack.kind"
NATS_KV_BUCKET = "nats.kv.bucket"
NATS_KV_KEY = "nats.kv.key"
NATS_OBJECT_BUCKET = "nats.object_store.bucket"
NATS_OBJECT_NAME = "nats.object_store.name"
NATS_BATCH_ID = "nats.batch.id"
NATS_BATCH_KIND = "nats.batch.kind"

#: The span-name label of a destination that exists for one exchange (a reply inbox).
TEMPORARY = "(temporary)"

_INBOX_PREFIXES = ("_INBOX.", "$JS.ACK.")


def is_temporary(subject: str) -> bool:
    """True for a reply inbox: a subject made for one request, never worth a span name of its own."""
    return subject.startswith("_INBOX.")


def destination_label(subject: str) -> str:
    """The low-cardinality destination of a span name.

    Args:
        subject: a subject or a subscription's pattern (wildcards are already
            low-cardinality: the pattern is the name).

    Returns:
        ``(temporary)`` for an inbox, otherwise the subject itself.
    """
    return TEMPORARY if is_temporary(subject) else subject


def server_attributes(url: str | None, client_id: int | None, name: str | None) -> Mapping[str, Any]:
    """``server.address``/``server.port`` of the connected server and the client's id.

    Args:
        url: the connected URL (``nats://host:port``), or None while disconnected.
        client_id: the id the server gave this connection.
        name: the connection's name (the client id when the server gave none).

    Returns:
        The attributes that are known (none of them may be).
    """
    attrs: dict[str, Any] = {}
    if url:
        parts = urlsplit(url if "://" in url else "nats://" + url)
        if parts.hostname:
            attrs[SERVER_ADDRESS] = parts.hostname
        if parts.port:
            attrs[SERVER_PORT] = parts.port
    if client_id is not None:
        attrs[MESSAGING_CLIENT_ID] = str(client_id)
    elif name:
        attrs[MESSAGING_CLIENT_ID] = name
    return attrs
