"""JetStream API plumbing: ``$JS.API.*`` requests, JSON, durations, errors.

Durations are seconds (``float``) in every Python-facing struct and
nanoseconds (``int``) on the wire; :func:`to_wire` and :func:`from_wire` convert
the keys in :data:`DURATION_KEYS` wherever they appear. Errors are mapped by
the server's ``err_code``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from .._core.spi import CoreLink, link
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import JetStreamError, JetStreamNotEnabledError, NoRespondersError, jetstream_error

if TYPE_CHECKING:
    from ..client import Client

T = TypeVar("T")

DEFAULT_API_PREFIX = "$JS.API"
DEFAULT_TIMEOUT = 5.0

#: JSON keys holding durations, whatever struct they are in.
DURATION_KEYS = frozenset(
    {
        "max_age",
        "duplicate_window",
        "ack_wait",
        "idle_heartbeat",
        "inactive_threshold",
        "max_expires",
        "backoff",
        "subject_delete_marker_ttl",
        "priority_timeout",
        "expires",
        "pause_remaining",
        "heartbeat",
    }
)

_NS = 1_000_000_000
_encoder = msgspec.json.Encoder()
_decode = msgspec.json.decode


def _secs_to_ns(v: Any) -> Any:
    if isinstance(v, list):
        return [_secs_to_ns(x) for x in v]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return round(v * _NS)
    return v


def _ns_to_secs(v: Any) -> Any:
    if isinstance(v, list):
        return [_ns_to_secs(x) for x in v]
    if isinstance(v, int) and not isinstance(v, bool):
        return v / _NS
    return v


def rfc3339(t: datetime.datetime) -> str:
    """UTC time for the server; a naive datetime is taken as local time (as Python does)."""
    return t.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _walk(obj: Any, convert: Any) -> Any:
    if isinstance(obj, dict):
        return {k: (convert(v) if k in DURATION_KEYS else _walk(v, convert)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, convert) for v in obj]
    if isinstance(obj, datetime.datetime):
        return rfc3339(obj)
    return obj


def to_wire(obj: Any) -> Any:
    """Structs and dicts -> JSON-ready builtins with durations in nanoseconds and times in UTC."""
    return _walk(msgspec.to_builtins(obj, builtin_types=(datetime.datetime,)), _secs_to_ns)


def from_wire(obj: Any, type_: type[T]) -> T:
    """Decoded JSON -> ``type_`` with durations in seconds; unknown fields ignored."""
    return msgspec.convert(_walk(obj, _ns_to_secs), type_, strict=False)


def encode_json(obj: Any) -> bytes:
    """JSON of builtins already in wire form (no duration conversion)."""
    return _encoder.encode(obj)


def encode(obj: Any) -> bytes:
    return _encoder.encode(to_wire(obj)) if obj is not None else b""


class JetStreamAPI:
    """Sends ``$JS.API`` requests for one account/domain. Thread-safe."""

    def __init__(self, nc: Client, prefix: str = DEFAULT_API_PREFIX, domain: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT):
        if domain:
            prefix = f"$JS.{domain}.API"
        self.nc = nc
        self.core: CoreLink = link(nc)
        self.prefix = prefix.rstrip(".")
        self.domain = domain
        self.timeout = timeout

    def subject(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    def deadline(self, timeout: TimeoutArg) -> Deadline:
        """The one deadline of a call: its ``timeout`` (default: the context's)."""
        return timeout if isinstance(timeout, Deadline) else Deadline.of(timeout, self.timeout)

    def request(self, suffix: str, body: Any = None, timeout: TimeoutArg = USE_DEFAULT) -> dict[str, Any]:
        """Send one API request and return the decoded response.

        Raises:
            JetStreamNotEnabledError: nobody answers on the API subject.
            JetStreamError: (or a subclass chosen by ``err_code``) the server's error.
            TimeoutError: no answer within ``timeout`` (default: the context's).
        """
        deadline = self.deadline(timeout)
        payload = body if isinstance(body, (bytes, bytearray)) else encode(body)
        try:
            msg = self.core.request(self.subject(suffix), payload, deadline)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                f"JetStream is not enabled (no responder on {self.subject(suffix)})", code=503
            ) from None
        return self.check(msg.data)

    @staticmethod
    def check(data: bytes) -> dict[str, Any]:
        try:
            resp = _decode(data)
        except msgspec.DecodeError as exc:
            raise JetStreamError(f"invalid JetStream API response: {data[:100]!r}") from exc
        if not isinstance(resp, dict):
            raise JetStreamError(f"invalid JetStream API response: {data[:100]!r}")
        err = resp.get("error")
        if err:
            raise jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""))
        return resp

    def request_typed(self, suffix: str, body: Any, type_: type[T],
                      timeout: TimeoutArg = USE_DEFAULT) -> T:
        return from_wire(self.request(suffix, body, timeout), type_)

    def paged(self, suffix: str, key: str, body: dict[str, Any] | None = None,
              timeout: TimeoutArg = USE_DEFAULT) -> Iterator[Any]:
        """Every item of a paged list/names response (``offset``/``total``/``limit``),
        all pages within one ``timeout``."""
        deadline = self.deadline(timeout)
        offset = 0
        while True:
            resp = self.request(suffix, {**(body or {}), "offset": offset}, deadline)
            items = resp.get(key) or []
            yield from items
            offset += len(items)
            total = resp.get("total", 0)
            if not items or offset >= total:
                return
