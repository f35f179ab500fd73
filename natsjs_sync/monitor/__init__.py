"""Monitoring through the system account: the servers' ``VARZ``, ``CONNZ``, ... over NATS,
and health checks built on them (see ``docs/monitoring.rst``).

Stands above the client in the import graph; nothing in the client imports it.
"""

from __future__ import annotations

from .check import (
    CheckResult,
    Status,
    check_connection,
    check_consumer,
    check_jetstream,
    check_meta,
    check_server,
    check_stream,
)
from .client import DEFAULT_STALL, DEFAULT_TIMEOUT, KINDS, ServerFilter, SystemClient
from .errors import MonitorError, MonitorResponseError, SystemAccountRequiredError
from .models import (
    AccountJetStream,
    Accountz,
    ConnInfo,
    Connz,
    Gatewayz,
    Healthz,
    Jsz,
    LeafInfo,
    Leafz,
    MetaClusterInfo,
    RouteInfo,
    Routez,
    ServerIdentity,
    ServerReply,
    Statsz,
    Subsz,
    Varz,
)

__all__ = [
    "DEFAULT_STALL",
    "DEFAULT_TIMEOUT",
    "KINDS",
    "AccountJetStream",
    "Accountz",
    "CheckResult",
    "ConnInfo",
    "Connz",
    "Gatewayz",
    "Healthz",
    "Jsz",
    "LeafInfo",
    "Leafz",
    "MetaClusterInfo",
    "MonitorError",
    "MonitorResponseError",
    "RouteInfo",
    "Routez",
    "ServerFilter",
    "ServerIdentity",
    "ServerReply",
    "Statsz",
    "Status",
    "Subsz",
    "SystemAccountRequiredError",
    "SystemClient",
    "Varz",
    "check_connection",
    "check_consumer",
    "check_jetstream",
    "check_meta",
    "check_server",
    "check_stream",
]
