"""The JSON documents of the service protocol (ADR-32): PING, INFO and STATS replies.

Each model is a frozen :class:`msgspec.Struct` with nats-py's ``to_dict()`` and
``from_dict()``. What we send follows nats.go field by field: every field is
always written (``last_error`` is ``""`` without an error, ``data`` is ``null``
without a stats handler), so nats-py's strict ``from_dict`` reads it too. What
we read is forgiving in the ways the other clients differ: nats.js leaves
``metadata``, ``last_error`` and ``data`` out, nats-py writes a ``null``
description, and nats.js may report a fractional average processing time.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Any, TypeVar

import msgspec

from ..errors import ProtocolError

DEFAULT_QUEUE_GROUP = "q"
"""The queue group of endpoints that set none."""

DEFAULT_PREFIX = "$SRV"
"""The root of the discovery subjects."""

INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

M = TypeVar("M", bound="_Model")


class ServiceVerb(str, Enum):
    """The discovery verbs: ``$SRV.<verb>[.<name>[.<id>]]``."""

    PING = "PING"
    STATS = "STATS"
    INFO = "INFO"


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds (``2024-05-01T12:00:00.123456Z``), a form
    nats.go, nats.js and nats-py's ``strptime`` all parse."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Model(msgspec.Struct, frozen=True, kw_only=True):
    def to_dict(self) -> dict[str, Any]:
        """The JSON object this model is sent as."""
        return {f: _plain(getattr(self, f)) for f in self.__struct_fields__}

    @classmethod
    def from_dict(cls: type[M], data: dict[str, Any]) -> M:
        """Read a decoded JSON object, as another service framework may have written it.

        Raises:
            ProtocolError: required fields are missing or have the wrong type.
        """
        if not isinstance(data, dict):
            raise ProtocolError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        try:
            return msgspec.convert(cls._normalize(data), cls)
        except msgspec.ValidationError as exc:
            raise ProtocolError(f"invalid {cls.__name__}: {exc}") from None

    @classmethod
    def from_json(cls: type[M], raw: bytes) -> M:
        """Decode one reply payload.

        Raises:
            ProtocolError: not JSON, or not this document.
        """
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"{cls.__name__}: the reply is not JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def _normalize(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = dict(data)
        for key in ("metadata", "description", "last_error", "queue_group", "endpoints"):
            if key in out and out[key] is None:
                del out[key]  # the field's default: {}, "", ""...
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Model):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return format_time(value)
    return value


class ServicePing(_Model, frozen=True, kw_only=True):
    """The PING reply: who answers (``io.nats.micro.v1.ping_response``)."""

    type: str = PING_RESPONSE_TYPE
    """The reply's schema, ``io.nats.micro.v1.ping_response``."""
    name: str
    """The service's name."""
    id: str
    """The id of this instance of the service (unique per running service)."""
    version: str
    """The service's version (semantic versioning)."""
    metadata: dict[str, str] = {}
    """The service's metadata."""


class EndpointInfo(_Model, frozen=True, kw_only=True):
    """One endpoint in an INFO reply."""

    name: str
    """The endpoint's name."""
    subject: str
    """The subject it listens on."""
    queue_group: str = ""
    """The queue group; ``""`` when the endpoint subscribes without one."""
    metadata: dict[str, str] = {}
    """The endpoint's metadata."""


class ServiceInfo(_Model, frozen=True, kw_only=True):
    """The INFO reply (``io.nats.micro.v1.info_response``)."""

    type: str = INFO_RESPONSE_TYPE
    """The reply's schema, ``io.nats.micro.v1.info_response``."""
    name: str
    """The service's name."""
    id: str
    """The id of this instance of the service (unique per running service)."""
    version: str
    """The service's version (semantic versioning)."""
    metadata: dict[str, str] = {}
    """The service's metadata."""
    description: str = ""
    """The service's description."""
    endpoints: list[EndpointInfo] = []
    """Each endpoint's name, subject, queue group and metadata."""

    @classmethod
    def _normalize(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = super()._normalize(data)
        if isinstance(out.get("endpoints"), list):
            out["endpoints"] = [EndpointInfo._normalize(e) if isinstance(e, dict) else e for e in out["endpoints"]]
        return out


class EndpointStats(_Model, frozen=True, kw_only=True):
    """One endpoint in a STATS reply. Times are in nanoseconds, as on the wire."""

    name: str
    """The endpoint's name."""
    subject: str
    """The subject it listens on."""
    queue_group: str = ""
    """The queue group; ``""`` when the endpoint subscribes without one."""
    num_requests: int = 0
    """Requests handled."""
    num_errors: int = 0
    """Requests answered with an error (or whose handler raised)."""
    last_error: str = ""
    """``code:description`` of the last error reply, or the last exception; ``""`` when none."""
    processing_time: int = 0
    """Nanoseconds spent in the handler, in total."""
    average_processing_time: int = 0
    """``processing_time / num_requests``, in nanoseconds."""
    data: Any = None
    """What the service's stats handler added for this endpoint (``None`` without one)."""
    """What the service's stats handler returned for this endpoint."""

    @classmethod
    def _normalize(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = super()._normalize(data)
        for key in ("processing_time", "average_processing_time"):
            if isinstance(out.get(key), float):
                out[key] = round(out[key])  # nats.js may send a fractional average
        return out


class ServiceStats(_Model, frozen=True, kw_only=True):
    """The STATS reply (``io.nats.micro.v1.stats_response``)."""

    type: str = STATS_RESPONSE_TYPE
    """The reply's schema, ``io.nats.micro.v1.stats_response``."""
    name: str
    """The service's name."""
    id: str
    """The id of this instance of the service (unique per running service)."""
    version: str
    """The service's version (semantic versioning)."""
    metadata: dict[str, str] = {}
    """The service's metadata."""
    started: datetime = _EPOCH
    """When the service started (or was last reset), in UTC."""
    endpoints: list[EndpointStats] = []
    """Each endpoint's counters."""

    @classmethod
    def _normalize(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = super()._normalize(data)
        if isinstance(out.get("endpoints"), list):
            out["endpoints"] = [EndpointStats._normalize(e) if isinstance(e, dict) else e for e in out["endpoints"]]
        return out


__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "EndpointInfo",
    "EndpointStats",
    "ServiceInfo",
    "ServicePing",
    "ServiceStats",
    "ServiceVerb",
    "format_time",
]
