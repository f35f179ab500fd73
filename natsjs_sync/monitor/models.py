"""What the servers' monitoring requests answer, as typed models.

Every model is a frozen ``msgspec.Struct`` that keeps the JSON fields it does
not model in ``unknown_fields`` (as the server sent them), so a newer server's
additions are never lost: the server's monitoring documents grow with each
release, and this client models the fields worth a name. Durations are what
the server sends: Go durations in nanoseconds (``int``) or text such as
``"1m2s"`` (``uptime``, ``idle``, ``rtt``); times are ``datetime``.

The shapes follow nats-server's ``/varz``, ``/connz``, ... monitoring
endpoints, which the ``$SYS.REQ.SERVER.*`` requests answer with too.
"""

from __future__ import annotations

import datetime
from typing import Any, Generic, TypeVar, cast

import msgspec

from ..jetstream._api import capture_unknown
from .errors import MonitorResponseError

T = TypeVar("T")

#: The field of every model holding the JSON keys it does not model.
UNKNOWN = "unknown_fields"


class _Model(msgspec.Struct, frozen=True, kw_only=True):
    #: JSON fields of the server's answer this client does not model, as they came.
    unknown_fields: dict[str, Any] | None = None


class ServerIdentity(_Model, frozen=True, kw_only=True):
    """Which server answered (the ``server`` block of every answer).

    Attributes:
        name: the server's name (its id when it was given none).
        id: the server's id (an nkey, ``N...``): the token of ``$SYS.REQ.SERVER.<id>.<kind>``.
        host: the host it listens on.
        cluster: its cluster's name, if it is in one.
        domain: its JetStream domain, if it has one.
        version: its version (``"2.11.0"``).
        tags: its configured tags.
        jetstream: JetStream is enabled on it.
        seq: the sequence of this event from that server.
        time: the server's clock when it answered.
    """

    name: str = ""
    id: str = ""
    host: str = ""
    cluster: str | None = None
    domain: str | None = None
    version: str = msgspec.field(default="", name="ver")
    tags: list[str] | None = None
    jetstream: bool = False
    seq: int = 0
    time: datetime.datetime | None = None


class Varz(_Model, frozen=True, kw_only=True):
    """A server's general state and configuration (``VARZ``, as ``/varz``).

    Attributes:
        server_id, server_name, version, host, port: who it is and where it listens.
        start, now, uptime: when it started, its clock, and how long it has run (text).
        connections, total_connections: client connections now, and since it started.
        routes, leafnodes, remotes: route, leaf node and remote server counts.
        subscriptions, slow_consumers: subscriptions now; slow consumers seen.
        in_msgs, out_msgs, in_bytes, out_bytes: traffic since it started.
        mem, cores, cpu: resident memory in bytes, CPU cores, CPU use in percent.
        max_payload, max_connections: its limits.
        cluster, gateway, leaf, jetstream: those sections of its configuration and state.
        tags: its tags.
    """

    server_id: str = ""
    server_name: str = ""
    version: str = ""
    proto: int = 0
    git_commit: str = ""
    go: str = ""
    host: str = ""
    port: int = 0
    max_connections: int = 0
    max_payload: int = 0
    ping_interval: int = 0
    start: datetime.datetime | None = None
    now: datetime.datetime | None = None
    uptime: str = ""
    mem: int = 0
    cores: int = 0
    cpu: float = 0.0
    connections: int = 0
    total_connections: int = 0
    routes: int = 0
    remotes: int = 0
    leafnodes: int = 0
    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    slow_consumers: int = 0
    subscriptions: int = 0
    config_load_time: datetime.datetime | None = None
    tags: list[str] | None = None
    system_account: str | None = None
    cluster: dict[str, Any] | None = None
    gateway: dict[str, Any] | None = None
    leaf: dict[str, Any] | None = None
    jetstream: dict[str, Any] | None = None


class ConnInfo(_Model, frozen=True, kw_only=True):
    """One connection of ``CONNZ``.

    Attributes:
        cid: the connection's id on that server.
        kind, type: ``"Client"``; ``"nats"``, ``"websocket"``, ``"mqtt"``, ...
        ip, port: the peer's address.
        start, last_activity, stop: when it connected, was last active, and closed.
        rtt, uptime, idle: round-trip time, time connected, time idle (text).
        pending_bytes: bytes waiting to be written to it.
        in_msgs, out_msgs, in_bytes, out_bytes: its traffic.
        subscriptions: how many subscriptions it has.
        subscriptions_list: their subjects (``subscriptions=True``).
        name, lang, version: what the client said about itself.
        account, authorized_user: who it is (``auth=True`` for the user).
        reason: why it closed (closed connections).
    """

    cid: int = 0
    kind: str = ""
    type: str = ""
    ip: str = ""
    port: int = 0
    start: datetime.datetime | None = None
    last_activity: datetime.datetime | None = None
    stop: datetime.datetime | None = None
    rtt: str = ""
    uptime: str = ""
    idle: str = ""
    pending_bytes: int = 0
    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    subscriptions: int = 0
    subscriptions_list: list[str] | None = None
    name: str = ""
    lang: str = ""
    version: str = ""
    account: str = ""
    authorized_user: str = ""
    reason: str = ""


class _Page(_Model, frozen=True, kw_only=True):
    """The head every server-wide monitoring page starts with (nats-server writes
    ``server_id`` and ``now`` first in ``CONNZ``, ``SUBSZ``, ``GATEWAYZ``, ...).

    Attributes:
        server_id: the id of the server that answered.
        now: that server's clock when it answered.
    """

    server_id: str = ""
    now: datetime.datetime | None = None


class Connz(_Page, frozen=True, kw_only=True):
    """A page of a server's connections (``CONNZ``, as ``/connz``).

    Attributes:
        server_id, now: who answered, and its clock.
        num_connections: connections on this page.
        total: connections matching the request, on every page.
        offset, limit: where this page starts and its size.
        connections: the page.
    """

    num_connections: int = 0
    total: int = 0
    offset: int = 0
    limit: int = 0
    connections: list[ConnInfo] = msgspec.field(default_factory=list)


class Subsz(_Page, frozen=True, kw_only=True):
    """A server's subscription routing state (``SUBSZ``, as ``/subsz``).

    Attributes:
        num_subscriptions: subscriptions in its routing table.
        num_cache, num_inserts, num_removes, num_matches, cache_hit_rate,
            max_fanout, avg_fanout: the table's statistics.
        total, offset, limit: paging of ``subscriptions_list``.
        subscriptions_list: the subscriptions (``subscriptions=True``), as the server sent them.
    """

    num_subscriptions: int = 0
    num_cache: int = 0
    num_inserts: int = 0
    num_removes: int = 0
    num_matches: int = 0
    cache_hit_rate: float = 0.0
    max_fanout: int = 0
    avg_fanout: float = 0.0
    total: int = 0
    offset: int = 0
    limit: int = 0
    subscriptions_list: list[dict[str, Any]] | None = None


class RouteInfo(_Model, frozen=True, kw_only=True):
    """One route of ``ROUTEZ``: a connection to another server of the cluster.

    Attributes:
        rid: the route's id on this server.
        remote_id, remote_name: the server at the other end.
        did_solicit, is_configured: this server dialled it; it is in the configuration.
        ip, port: the other end's address.
        start, last_activity, rtt, uptime, idle: as for a connection.
        pending_size, in_msgs, out_msgs, in_bytes, out_bytes, subscriptions: its traffic.
    """

    rid: int = 0
    remote_id: str = ""
    remote_name: str = ""
    did_solicit: bool = False
    is_configured: bool = False
    ip: str = ""
    port: int = 0
    start: datetime.datetime | None = None
    last_activity: datetime.datetime | None = None
    rtt: str = ""
    uptime: str = ""
    idle: str = ""
    pending_size: int = 0
    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    subscriptions: int = 0


class Routez(_Model, frozen=True, kw_only=True):
    """A server's routes to the rest of its cluster (``ROUTEZ``, as ``/routez``)."""

    server_id: str = ""
    server_name: str = ""
    now: datetime.datetime | None = None
    num_routes: int = 0
    routes: list[RouteInfo] = msgspec.field(default_factory=list)


class Gatewayz(_Page, frozen=True, kw_only=True):
    """A server's gateways to other clusters (``GATEWAYZ``, as ``/gatewayz``).

    Attributes:
        name: this cluster's gateway name (none without gateways).
        outbound_gateways, inbound_gateways: per remote cluster, as the server sent them.
    """

    name: str = ""
    host: str = ""
    port: int = 0
    outbound_gateways: dict[str, Any] = msgspec.field(default_factory=dict)
    inbound_gateways: dict[str, Any] = msgspec.field(default_factory=dict)


class LeafInfo(_Model, frozen=True, kw_only=True):
    """One leaf node connection of ``LEAFZ``."""

    name: str = ""
    is_spoke: bool = False
    account: str = ""
    ip: str = ""
    port: int = 0
    rtt: str = ""
    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    subscriptions: int = 0
    subscriptions_list: list[str] | None = None


class Leafz(_Page, frozen=True, kw_only=True):
    """A server's leaf node connections (``LEAFZ``, as ``/leafz``)."""

    leafnodes: int = 0
    leafs: list[LeafInfo] = msgspec.field(default_factory=list)


class Accountz(_Page, frozen=True, kw_only=True):
    """A server's accounts (``ACCOUNTZ``, as ``/accountz``).

    Attributes:
        system_account: the name of the system account.
        accounts: the accounts' names (when no ``account`` was asked for).
        account_detail: one account's details (``account=...``), as the server sent them.
    """

    system_account: str = ""
    accounts: list[str] | None = None
    account_detail: dict[str, Any] | None = None


class MetaClusterInfo(_Model, frozen=True, kw_only=True):
    """The JetStream meta group as one server sees it.

    Attributes:
        name: the cluster's name.
        leader: the meta leader's server name (empty while there is none).
        peer: this server's peer id.
        cluster_size: the number of servers in the meta group.
        pending: meta proposals not yet applied.
        replicas: the other peers (``name``, ``current``, ``offline``, ``active``, ``lag``).
    """

    name: str = ""
    leader: str = ""
    peer: str = ""
    cluster_size: int = 0
    pending: int = 0
    replicas: list[dict[str, Any]] | None = None


class Jsz(_Page, frozen=True, kw_only=True):
    """A server's JetStream state (``JSZ``, as ``/jsz``).

    Attributes:
        disabled: JetStream is off on that server.
        config: its JetStream configuration (store directory, limits, domain).
        memory, storage, reserved_memory, reserved_storage: bytes used and reserved.
        accounts, ha_assets, streams, consumers, messages, bytes: totals on that server.
        api: API request counters and the API level.
        meta_cluster: the meta group as this server sees it (clustered servers).
        account_details: per account (``accounts=True`` or ``account=...``), as sent.
    """

    disabled: bool = False
    config: dict[str, Any] | None = None
    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    accounts: int = 0
    ha_assets: int = 0
    api: dict[str, Any] | None = None
    streams: int = 0
    consumers: int = 0
    messages: int = 0
    bytes: int = 0
    meta_cluster: MetaClusterInfo | None = None
    account_details: list[dict[str, Any]] | None = None


class Healthz(_Model, frozen=True, kw_only=True):
    """A server's health (``HEALTHZ``, as ``/healthz``).

    Attributes:
        status: ``"ok"``, or what is wrong (``"unavailable"``, ``"error"``).
        status_code: 200 when healthy, else the HTTP status ``/healthz`` would answer.
        error: what is wrong, when something is.
        errors: each problem found (``details=True``), as the server sent them.
    """

    status: str = ""
    status_code: int = 0
    error: str | None = None
    errors: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        """True when the server says it is healthy."""
        return self.status == "ok"


class Statsz(_Model, frozen=True, kw_only=True):
    """A server's statistics (``STATSZ``; the event servers also publish on their own).

    Attributes:
        start: when it started.
        mem, cores, cpu: resident memory in bytes, CPU cores, CPU use in percent.
        connections, total_connections, active_accounts, subscriptions: counts now.
        sent, received: ``msgs`` and ``bytes`` counters.
        slow_consumers: slow consumers seen.
        active_servers: the servers it knows to be up in its cluster.
        routes, gateways: per route and gateway, as the server sent them.
        jetstream: its JetStream statistics and meta group, as sent.
    """

    start: datetime.datetime | None = None
    mem: int = 0
    cores: int = 0
    cpu: float = 0.0
    connections: int = 0
    total_connections: int = 0
    active_accounts: int = 0
    subscriptions: int = 0
    sent: dict[str, Any] | None = None
    received: dict[str, Any] | None = None
    slow_consumers: int = 0
    active_servers: int = 0
    routes: list[dict[str, Any]] | None = None
    gateways: list[dict[str, Any]] | None = None
    jetstream: dict[str, Any] | None = None


class AccountJetStream(_Model, frozen=True, kw_only=True):
    """One account's JetStream use on one server (``$SYS.REQ.ACCOUNT.<account>.JSZ``).

    Attributes:
        name, id: the account.
        memory, storage, reserved_memory, reserved_storage: bytes used and reserved.
        accounts, ha_assets: as in :class:`Jsz`.
        api: its API request counters.
        stream_detail: its streams (``streams=True``), as the server sent them.
    """

    name: str = ""
    id: str = ""
    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    accounts: int = 0
    ha_assets: int = 0
    api: dict[str, Any] | None = None
    stream_detail: list[dict[str, Any]] | None = None


class ServerReply(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    """One server's answer to a monitoring request.

    Attributes:
        server: who answered.
        data: what it answered (a :class:`Varz`, :class:`Connz`, ...).
        elapsed: seconds from the request leaving this client to this answer
            being read (an upper bound of that server's round trip).
    """

    server: ServerIdentity
    data: T
    elapsed: float = 0.0


def decode_as(obj: Any, type_: type[T]) -> T:
    """Decoded JSON -> ``type_``; every key a model does not know is kept in its ``unknown_fields``.

    Raises:
        MonitorResponseError: the JSON does not fit ``type_`` (never msgspec's own error).
    """
    if type_ is dict or type_ is Any:
        if not isinstance(obj, dict):
            raise MonitorResponseError(f"expected a JSON object, got {type(obj).__name__}")
        return cast(T, obj)
    try:
        return msgspec.convert(capture_unknown(obj, type_), type_, strict=False)
    except msgspec.ValidationError as exc:
        raise MonitorResponseError(f"cannot decode a {getattr(type_, '__name__', type_)}: {exc}") from exc
