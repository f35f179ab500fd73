"""Attribute names and span names of the messaging semantic conventions, as NATS fills them.

Every name is written here as a string of the conventions' version
:data:`SCHEMA_VERSION`, the version the instrumentation's schema URL declares:
a name is not taken from ``opentelemetry-semantic-conventions``, whose releases
add and rename them (its oldest release the ``otel`` extra allows lacks some
of these), so what is emitted changes only with :data:`SCHEMA_VERSION`. The
JetStream facts a reader of a trace needs, which the conventions have no
names for, live in the system's own namespace ``messaging.nats.``, as the
conventions ask of system-specific attributes. Span names and metric attributes
stay low-cardinality: a temporary destination (a reply inbox, by the client's
own inbox prefix whatever it is, or by an inbox prefix seen in the reply
subjects of received messages; a JetStream ack subject) is named by its
template (``_INBOX.>``), never by the subject of each exchange.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_INBOX_PREFIX",
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
    "NATS_API_SUBJECT",
    "NATS_BATCH_ID",
    "NATS_BATCH_KIND",
    "NATS_CLIENT_NAME",
    "NATS_CONNECTION_STATE",
    "NATS_CONSUMER",
    "NATS_CONSUMER_SEQUENCE",
    "NATS_DELIVERY_COUNT",
    "NATS_DUPLICATE",
    "NATS_KV_BUCKET",
    "NATS_KV_KEY",
    "NATS_OBJECT_BUCKET",
    "NATS_OBJECT_NAME",
    "NATS_SPARK_ATTEMPT_NUMBER",
    "NATS_SPARK_DUPLICATES",
    "NATS_SPARK_FIRST_SEQUENCE",
    "NATS_SPARK_LAST_SEQUENCE",
    "NATS_SPARK_PARTITION_ID",
    "NATS_SPARK_TASK_ATTEMPT_ID",
    "NATS_STREAM",
    "NATS_STREAM_SEQUENCE",
    "NATS_TRACE_ACCOUNT",
    "NATS_TRACE_CONNECTION_ID",
    "NATS_TRACE_CONNECTION_KIND",
    "NATS_TRACE_CONNECTION_NAME",
    "NATS_TRACE_HOP",
    "NATS_TRACE_HOPS",
    "NATS_TRACE_NO_INTEREST",
    "NATS_TRACE_SERVER_CLUSTER",
    "NATS_TRACE_SERVER_ID",
    "NATS_TRACE_SERVER_NAME",
    "SCHEMA_URL",
    "SCHEMA_VERSION",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SYSTEM",
    "destination",
    "destination_label",
    "inbox_of",
    "is_temporary",
    "server_attributes",
    "span_name",
]

#: The version of the OpenTelemetry semantic conventions every name, span kind and span name follows.
SCHEMA_VERSION = "1.44.0"
#: The schema URL of the tracer and meter.
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SCHEMA_VERSION}"

MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_DESTINATION_TEMPLATE = "messaging.destination.template"
MESSAGING_DESTINATION_TEMPORARY = "messaging.destination.temporary"
MESSAGING_DESTINATION_SUBSCRIPTION_NAME = "messaging.destination.subscription.name"
MESSAGING_CONSUMER_GROUP_NAME = "messaging.consumer.group.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_MESSAGE_BODY_SIZE = "messaging.message.body.size"
MESSAGING_CLIENT_ID = "messaging.client.id"
MESSAGING_BATCH_MESSAGE_COUNT = "messaging.batch.message_count"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

#: ``messaging.system`` for every span and metric of this client.
SYSTEM = "nats"

# JetStream facts (no conventional name exists for them): the system's namespace, messaging.nats.
NATS_STREAM = "messaging.nats.stream"
NATS_CONSUMER = "messaging.nats.consumer"
NATS_STREAM_SEQUENCE = "messaging.nats.stream.sequence"
NATS_CONSUMER_SEQUENCE = "messaging.nats.consumer.sequence"
NATS_DELIVERY_COUNT = "messaging.nats.delivery_count"
NATS_ACK_KIND = "messaging.nats.ack.kind"
NATS_KV_BUCKET = "messaging.nats.kv.bucket"
NATS_KV_KEY = "messaging.nats.kv.key"
NATS_OBJECT_BUCKET = "messaging.nats.object_store.bucket"
NATS_OBJECT_NAME = "messaging.nats.object_store.name"
NATS_BATCH_ID = "messaging.nats.batch.id"
NATS_BATCH_KIND = "messaging.nats.batch.kind"
NATS_DUPLICATE = "messaging.nats.duplicate"
NATS_API_SUBJECT = "messaging.nats.api.subject"
NATS_CLIENT_NAME = "messaging.nats.client.name"
NATS_CONNECTION_STATE = "messaging.nats.connection.state"
NATS_SPARK_PARTITION_ID = "messaging.nats.spark.partition_id"
NATS_SPARK_ATTEMPT_NUMBER = "messaging.nats.spark.attempt_number"
NATS_SPARK_TASK_ATTEMPT_ID = "messaging.nats.spark.task_attempt_id"
NATS_SPARK_FIRST_SEQUENCE = "messaging.nats.spark.first_sequence"
NATS_SPARK_LAST_SEQUENCE = "messaging.nats.spark.last_sequence"
NATS_SPARK_DUPLICATES = "messaging.nats.duplicates"
# Message tracing (ADR-41): the server that reported, and the connections of its steps.
NATS_TRACE_SERVER_NAME = "messaging.nats.trace.server.name"
NATS_TRACE_SERVER_ID = "messaging.nats.trace.server.id"
NATS_TRACE_SERVER_CLUSTER = "messaging.nats.trace.server.cluster"
NATS_TRACE_HOP = "messaging.nats.trace.hop"
NATS_TRACE_HOPS = "messaging.nats.trace.hops"
NATS_TRACE_ACCOUNT = "messaging.nats.trace.account"
NATS_TRACE_CONNECTION_KIND = "messaging.nats.trace.connection.kind"
NATS_TRACE_CONNECTION_ID = "messaging.nats.trace.connection.id"
NATS_TRACE_CONNECTION_NAME = "messaging.nats.trace.connection.name"
NATS_TRACE_NO_INTEREST = "messaging.nats.trace.no_interest"

#: The prefix of the reply inboxes a client makes unless told otherwise (``inbox_prefix``).
DEFAULT_INBOX_PREFIX = "_INBOX"
# A JetStream delivery's reply subject: one per message, answered once (acks).
_ACK_PREFIX = "$JS.ACK"
# A direct get of the last message of a subject names that subject after the stream:
# as many destinations as subjects, so the template stops at the stream.
_DIRECT_GET = re.compile(r"^(\$JS\.(?:[^.]+\.)?API\.DIRECT\.GET\.[^.]+)\.")


def _temporary_prefix(subject: str, inbox_prefix: str, reply_prefixes: tuple[str, ...] = ()) -> str | None:
    """The prefix that makes ``subject`` a temporary destination, or None."""
    for prefix in (inbox_prefix, DEFAULT_INBOX_PREFIX, _ACK_PREFIX):
        if subject.startswith(prefix) and subject[len(prefix):len(prefix) + 1] == ".":
            return prefix
    if reply_prefixes and subject.startswith(reply_prefixes):
        # Only an inbox under a learned prefix (the prefix, then a NUID token): any client may send
        # any reply subject, and one such as ``orders.<nuid>`` must not make ``orders.created`` temporary.
        learned = inbox_of(subject)
        if learned is not None and learned + "." in reply_prefixes:
            return learned
    return None


# A NUID (22 characters of base 62): the token that makes an inbox unique to its client.
_NUID = re.compile(r"^[0-9A-Za-z]{22}$")


def inbox_of(reply: str) -> str | None:
    """The inbox prefix of a reply subject made by any client, or None when it is not an inbox.

    Clients make a reply inbox as ``<prefix>.<nuid>`` or, for requests sharing one
    subscription, ``<prefix>.<nuid>.<token>``: the prefix is what comes before
    the first NUID token (``_INBOX``, or a custom ``inbox_prefix``). A reply
    subject with no such token (a durable reply subject an application chose)
    is no inbox.

    Args:
        reply: a received message's reply subject.
    """
    tokens = reply.split(".")
    for i, token in enumerate(tokens):
        if i and _NUID.match(token):
            return ".".join(tokens[:i])
    return None


def is_temporary(subject: str, inbox_prefix: str = DEFAULT_INBOX_PREFIX) -> bool:
    """True for a destination made for one exchange: a reply inbox or a JetStream ack subject.

    Args:
        subject: a subject or a subscription's pattern.
        inbox_prefix: the client's inbox prefix (the default one and ``$JS.ACK`` count too).
    """
    return _temporary_prefix(subject, inbox_prefix) is not None


def destination(subject: str, inbox_prefix: str = DEFAULT_INBOX_PREFIX, *,
                temporary: bool = False, reply_prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The destination attributes of ``subject``, as the conventions' span name reads them.

    ``messaging.destination.name`` is the subject itself. A temporary
    destination (see :func:`is_temporary`, an inbox under one of
    ``reply_prefixes``: the prefix, then a NUID token, or ``temporary=True``: a reply subject, whatever its
    prefix) also gets ``messaging.destination.temporary`` and, when its prefix
    is one of those (never one read in the subject alone: the sender chose it),
    ``messaging.destination.template`` ``<prefix>.>``; a JetStream
    direct get by subject gets the template of its stream. Metrics keep the
    template and never the name of a subject.

    Args:
        subject: the subject (not a pattern).
        inbox_prefix: the client's inbox prefix.
        temporary: the caller knows the subject is a reply subject.
        reply_prefixes: inbox prefixes of other clients, each ending with ``.``.
    """
    attrs: dict[str, Any] = {MESSAGING_DESTINATION_NAME: subject}
    prefix = _temporary_prefix(subject, inbox_prefix, reply_prefixes)
    if prefix is not None or temporary:
        attrs[MESSAGING_DESTINATION_TEMPORARY] = True
        if prefix is not None:
            attrs[MESSAGING_DESTINATION_TEMPLATE] = f"{prefix}.>"
    elif subject.startswith("$JS."):
        direct = _DIRECT_GET.match(subject)
        if direct is not None:
            attrs[MESSAGING_DESTINATION_TEMPLATE] = f"{direct.group(1)}.>"
    return attrs


def destination_label(attrs: Mapping[str, Any]) -> str:
    """The ``{destination}`` of a span name, by the conventions: the template when there
    is one, else the name of a destination that is not temporary, else nothing.

    Args:
        attrs: attributes made by :func:`destination`.

    Returns:
        The label, or ``""`` (the span name is then the operation alone).
    """
    template = attrs.get(MESSAGING_DESTINATION_TEMPLATE)
    if template is not None:
        return str(template)
    if attrs.get(MESSAGING_DESTINATION_TEMPORARY):
        return ""
    return str(attrs.get(MESSAGING_DESTINATION_NAME, ""))


def span_name(operation: str, attrs: Mapping[str, Any]) -> str:
    """``{messaging.operation.name} {destination}``, or the operation alone without a destination."""
    label = destination_label(attrs)
    return f"{operation} {label}" if label else operation


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
