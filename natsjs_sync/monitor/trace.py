"""Message tracing (ADR-41, nats-server 2.11+): publish a message with a trace
destination and collect what each server did with it.

A message with a ``Nats-Trace-Dest`` header makes every server it passes through
publish one :class:`TraceEvent` to that subject: how it came in (a client, a
route, a gateway, a leafnode), subject mappings, account imports and exports, the
JetStream stream that stored it, and every way out. With ``Nats-Trace-Only`` the
servers report where it would have gone without delivering it. The origin server
says how many servers it forwarded the message to (``hops``); each of them, in
turn, gets a hop id (``1``, ``2``, then ``1.1`` ...) that its own event carries, so
the events form a tree: :class:`MessageTrace` joins them, and :func:`trace_message`
waits until every announced hop has reported (or its timeout passes).

Needs no system account: the events go to a subject of the publisher's account
(an inbox). Stands above the client in the import graph.
"""

from __future__ import annotations

import datetime
import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import msgspec

from .._timeout import Deadline, check_seconds
from ..errors import FeatureNotSupportedError, TimeoutError
from ..protocol.headers import Headers
from .models import ServerIdentity, _Model, decode_as

#: The header naming the subject the trace events go to.
TRACE_DEST = "Nats-Trace-Dest"
#: The header asking the servers to trace only: report the deliveries, do none.
TRACE_ONLY = "Nats-Trace-Only"
#: The header with which a server receives a traced message from another server: its hop id.
TRACE_HOP = "Nats-Trace-Hop"
#: Headers :func:`trace_message` sets itself (refused in ``headers``), and ``Accept-Encoding``,
#: which would make the servers compress the events (``snappy`` cannot be read here).
_OWN_HEADERS = (TRACE_DEST, TRACE_ONLY, TRACE_HOP, "Accept-Encoding")
#: The oldest server that traces messages.
MIN_SERVER = (2, 11, 0)


class ConnectionKind:
    """The kinds of connection of nats-server (the ``kind`` of ingress and egress events)."""

    CLIENT = 0
    ROUTER = 1
    GATEWAY = 2
    SYSTEM = 3
    LEAF = 4
    JETSTREAM = 5
    ACCOUNT = 6

    NAMES = {0: "Client", 1: "Router", 2: "Gateway", 3: "System", 4: "Leafnode", 5: "JetStream", 6: "Account"}
    #: Each kind's connection-id prefix, as the server and the nats CLI show them (``cid:5``, ``rid:2``).
    ID_PREFIXES = {0: "cid", 1: "rid", 2: "gid", 4: "lid"}


class TraceRequest(_Model, frozen=True, kw_only=True):
    """The traced message as the server received it.

    Attributes:
        header: its headers (the server's view: each key with its list of values).
        msg_size: its size in bytes (headers and payload).
    """

    header: dict[str, list[str]] | None = None
    msg_size: int = msgspec.field(default=0, name="msgsize")


class TraceIngress(_Model, frozen=True, kw_only=True, tag_field="type", tag="in"):
    """How the message entered a server (always an event's first).

    Attributes:
        timestamp: when.
        kind: the connection's kind (:class:`ConnectionKind`): a client, a route, a gateway, a leafnode.
        cid: the connection's id on that server.
        name: the connection's name (a client's name; a route's or gateway's remote server).
        account: the account the message came in for.
        subject: the subject it was published to.
        error: why it went no further (a publish permission denied, a payload too large).
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    kind: int = 0
    cid: int = 0
    name: str = ""
    account: str = msgspec.field(default="", name="acc")
    subject: str = msgspec.field(default="", name="subj")
    error: str = ""


class TraceSubjectMapping(_Model, frozen=True, kw_only=True, tag_field="type", tag="sm"):
    """A subject mapping changed the message's subject.

    Attributes:
        timestamp: when.
        mapped_to: the subject it was mapped to.
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    mapped_to: str = msgspec.field(default="", name="to")


class TraceStreamExport(_Model, frozen=True, kw_only=True, tag_field="type", tag="se"):
    """The message crossed a stream export into another account.

    Attributes:
        timestamp: when.
        account: the importing account.
        to: the subject in that account.
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    account: str = msgspec.field(default="", name="acc")
    to: str = ""


class TraceServiceImport(_Model, frozen=True, kw_only=True, tag_field="type", tag="si"):
    """The message crossed a service import into the exporting account.

    Attributes:
        timestamp: when.
        account: the account of the service (the exporter).
        from_subject: the subject in the importing account.
        to: the subject in the service's account.
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    account: str = msgspec.field(default="", name="acc")
    from_subject: str = msgspec.field(default="", name="from")
    to: str = ""


class TraceJetStream(_Model, frozen=True, kw_only=True, tag_field="type", tag="js"):
    """The message reached a JetStream stream.

    Attributes:
        timestamp: when.
        stream: the stream's name.
        subject: the subject it was stored under.
        no_interest: an interest-retention stream did not store it: nobody would consume it.
        error: why it was not stored.
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    stream: str = ""
    subject: str = ""
    no_interest: bool = msgspec.field(default=False, name="nointerest")
    error: str = ""


class TraceEgress(_Model, frozen=True, kw_only=True, tag_field="type", tag="eg"):
    """A way the message left a server: to a client, or on to another server.

    Attributes:
        timestamp: when.
        kind: the connection's kind (:class:`ConnectionKind`).
        cid: the connection's id on that server.
        name: the connection's name (a client's; a route's, gateway's or leafnode's remote server).
        hop: for a route, gateway or leafnode: the hop id the next server's event carries.
        account: the account it was delivered in (when not the ingress's).
        subscription: for a client: the subscription's subject that matched.
        queue: for a client: its queue group.
        error: why it was not delivered (no echo, a permission, trace only to an old server).
    """

    timestamp: datetime.datetime | None = msgspec.field(default=None, name="ts")
    kind: int = 0
    cid: int = 0
    name: str = ""
    hop: str = ""
    account: str = msgspec.field(default="", name="acc")
    subscription: str = msgspec.field(default="", name="sub")
    queue: str = ""
    error: str = ""


#: One thing a server did with the message.
TraceStep = Union[TraceIngress, TraceSubjectMapping, TraceStreamExport, TraceServiceImport, TraceJetStream,
                  TraceEgress]
_STEP_TYPES: dict[str, type[Any]] = {"in": TraceIngress, "sm": TraceSubjectMapping, "se": TraceStreamExport,
                                     "si": TraceServiceImport, "js": TraceJetStream, "eg": TraceEgress}


class TraceEvent(_Model, frozen=True, kw_only=True):
    """What one server did with the message (one trace message from it).

    Attributes:
        server: the server.
        request: the message as it received it.
        hops: how many servers it forwarded the message to (each reports its own event).
        events: its steps, in order: the ingress first. A step of a type this
            client does not know (a newer server's) is left out.
    """

    server: ServerIdentity = msgspec.field(default_factory=ServerIdentity)
    request: TraceRequest = msgspec.field(default_factory=TraceRequest)
    hops: int = 0
    events: list[TraceStep] = msgspec.field(default_factory=list)

    @property
    def hop(self) -> str:
        """This server's hop id (``""`` on the origin server, else ``"1"``, ``"1.2"`` ...)."""
        values = (self.request.header or {}).get(TRACE_HOP) or [""]
        return values[0]

    @property
    def ingress(self) -> TraceIngress | None:
        """How the message came in."""
        return next((e for e in self.events if isinstance(e, TraceIngress)), None)

    @property
    def subject_mapping(self) -> TraceSubjectMapping | None:
        """The subject mapping applied, if one was."""
        return next((e for e in self.events if isinstance(e, TraceSubjectMapping)), None)

    @property
    def stream_exports(self) -> list[TraceStreamExport]:
        """The stream exports it crossed."""
        return [e for e in self.events if isinstance(e, TraceStreamExport)]

    @property
    def service_imports(self) -> list[TraceServiceImport]:
        """The service imports it crossed."""
        return [e for e in self.events if isinstance(e, TraceServiceImport)]

    @property
    def jetstream(self) -> TraceJetStream | None:
        """The stream that got it, if one did."""
        return next((e for e in self.events if isinstance(e, TraceJetStream)), None)

    @property
    def egresses(self) -> list[TraceEgress]:
        """Every way it left this server."""
        return [e for e in self.events if isinstance(e, TraceEgress)]

    @classmethod
    def decode(cls, data: bytes, headers: Mapping[str, str] | None = None) -> TraceEvent:
        """A trace message's payload (gzip-compressed when its headers say so).

        Raises:
            MonitorResponseError: not a trace event.
        """
        from .errors import MonitorResponseError

        try:
            if headers and headers.get("Content-Encoding", "").lower() == "gzip":
                data = gzip.decompress(data)
            obj = json.loads(data)
        except (ValueError, OSError, EOFError) as exc:
            raise MonitorResponseError(f"a trace event that is not JSON: {exc}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("events", []), list):
            raise MonitorResponseError("a trace event that is not a JSON object with a list of events")
        steps = [_step(e) for e in obj.get("events") or []
                 if isinstance(e, dict) and isinstance(e.get("type"), str) and e["type"] in _STEP_TYPES]
        event = decode_as({k: v for k, v in obj.items() if k != "events"}, cls)
        return msgspec.structs.replace(event, events=steps)


def _step(obj: dict[str, Any]) -> Any:
    step = decode_as(obj, _STEP_TYPES[obj["type"]])
    # The tag is the class, not an unknown field (it would be written twice on the way back).
    unknown = {k: v for k, v in (step.unknown_fields or {}).items() if k != "type"}
    return msgspec.structs.replace(step, unknown_fields=unknown or None)


@dataclass
class MessageTrace:
    """The events of one traced message, joined into the path it took. Not thread-safe
    (made by one call; read it as you like once returned).

    Attributes:
        subject: the subject it was published to.
        events: every server's event, as they arrived.
        complete: every server the message was forwarded to has reported (a server
            too old to trace, a lost event or the timeout leave it ``False``).
    """

    subject: str
    events: list[TraceEvent] = field(default_factory=list)
    complete: bool = False

    @property
    def origin(self) -> TraceEvent | None:
        """The event of the server the message was published to."""
        return next((e for e in self.events if not e.hop), None)

    def next_hop(self, egress: TraceEgress) -> TraceEvent | None:
        """The event of the server that ``egress`` forwarded the message to (a route's,
        gateway's or leafnode's), if it reported."""
        if not egress.hop:
            return None
        return next((e for e in self.events if e.hop == egress.hop), None)

    @property
    def expected(self) -> int:
        """How many events the servers announced so far: the origin's and one per hop."""
        return (1 if self.origin is not None else 0) + sum(e.hops for e in self.events)

    def walk(self) -> Iterator[tuple[int, TraceEvent]]:
        """The events in path order, each with its depth (the origin at 0, then the
        servers it forwarded to, depth first); events no hop leads to come last."""
        seen: set[int] = set()

        def visit(event: TraceEvent, depth: int) -> Iterator[tuple[int, TraceEvent]]:
            if id(event) in seen:
                return
            seen.add(id(event))
            yield depth, event
            for egress in event.egresses:
                nxt = self.next_hop(egress)
                if nxt is not None:
                    yield from visit(nxt, depth + 1)

        origin = self.origin
        if origin is not None:
            yield from visit(origin, 0)
        for event in self.events:
            if id(event) not in seen:
                yield from visit(event, 0)

    def deliveries(self) -> list[TraceEgress]:
        """Every egress to a client (a subscriber), on every server, errors included."""
        return [g for _, e in self.walk() for g in e.egresses if g.kind == ConnectionKind.CLIENT]


def _version(info: Mapping[str, Any]) -> tuple[int, ...]:
    text = str(info.get("version", "0.0.0")).split("-")[0]
    try:
        return tuple(int(p) for p in text.split("."))
    except ValueError:
        return (0,)


def trace_message(nc: Any, subject: str, data: bytes = b"", *, headers: Mapping[str, Any] | None = None,
                  deliver: bool = False, timeout: float = 2.0) -> MessageTrace:
    """Publish a traced message and collect every server's trace event.

    The message goes to ``subject`` with ``Nats-Trace-Dest`` set to a new inbox and,
    unless ``deliver``, ``Nats-Trace-Only`` (the nats CLI's ``nats trace`` default): the
    servers then report the subscribers it would reach without delivering it. Returns
    once every server the message was forwarded to has reported, or when ``timeout``
    passes (:attr:`MessageTrace.complete` says which).

    Args:
        nc: a connected :class:`~natsjs_sync.Client`.
        subject: where to publish.
        data: the payload.
        headers: extra headers (not the tracing ones, which this sets).
        deliver: deliver the message too (as ``nats trace --deliver``).
        timeout: seconds for the whole call: the flush that makes the servers know
            the inbox, and the wait for the events, share them.

    Returns:
        The events, joined into the message's path.

    Raises:
        FeatureNotSupportedError: the connected server is older than 2.11 (nothing sent).
        TimeoutError: no server reported at all within ``timeout`` (nor, at worst,
            confirmed the inbox's subscription).
        ValueError: ``headers`` holds a tracing header or ``Accept-Encoding``.
        TypeError, BadSubjectError, BadHeaderError: as :meth:`~natsjs_sync.Client.publish`.
    """
    seconds = check_seconds(timeout, "timeout")
    given = Headers(headers or {})
    for key in _OWN_HEADERS:
        if any(k.lower() == key.lower() for k in given):
            raise ValueError(f"headers must not hold {key}: trace_message sets the tracing headers itself")
    if _version(nc.server_info) < MIN_SERVER:
        raise FeatureNotSupportedError("message tracing", ".".join(map(str, MIN_SERVER)),
                                       str(nc.server_info.get("version", "")))
    inbox = nc.new_inbox()
    given[TRACE_DEST] = inbox
    if not deliver:
        given[TRACE_ONLY] = "true"
    result = MessageTrace(subject)
    deadline = Deadline(seconds)  # one budget: the flush and the wait for the events share it
    sub = nc.subscribe(inbox)
    try:
        nc.flush(timeout=deadline)  # the servers know the inbox before any event goes to it
        nc.publish(subject, data, headers=given)
        while not result.complete and not deadline.expired():
            try:
                msg = sub.next_msg(timeout=deadline)
            except TimeoutError:
                break
            result.events.append(TraceEvent.decode(msg.data, msg.headers))
            result.complete = result.origin is not None and len(result.events) >= result.expected
    finally:
        sub.unsubscribe()
    if not result.events:
        raise TimeoutError(f"no trace event for {subject} within {timeout} s")
    return result
