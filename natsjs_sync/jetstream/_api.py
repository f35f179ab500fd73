"""JetStream API plumbing: ``$JS.API.*`` requests, JSON, durations, errors.

Durations are seconds (``float``) in every Python-facing struct and
nanoseconds (``int``) on the wire; :func:`to_wire` and :func:`from_wire` convert
the keys in :data:`DURATION_KEYS` wherever they appear. Errors are mapped by
the server's ``err_code``.

Structs with an ``unknown_fields`` field keep, on decode, every JSON key they
do not model (as it came, durations still in nanoseconds); on encode those
keys go back on the wire beside the known ones. That is what lets a
read-modify-write update keep settings this client does not know.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import msgspec
import msgspec.inspect as mi

from .._core.spi import CoreLink, link
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import (
    InvalidResponseError,
    JetStreamNotEnabledError,
    NoRespondersError,
    jetstream_error,
)
from . import client_trace

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
        "active",
    }
)

#: The field of open structs that holds the JSON keys they do not model.
UNKNOWN = "unknown_fields"

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


#: API subjects (after the prefix) whose tokens name a stream, then maybe a
#: consumer: how many leading tokens to skip, and whether a consumer follows.
_NAMED_CALLS: dict[tuple[str, ...], bool] = {
    ("STREAM", "CREATE"): False, ("STREAM", "UPDATE"): False, ("STREAM", "DELETE"): False,
    ("STREAM", "INFO"): False, ("STREAM", "PURGE"): False, ("STREAM", "MSG", "GET"): False,
    ("STREAM", "MSG", "DELETE"): False, ("STREAM", "PEER", "REMOVE"): False,
    ("STREAM", "LEADER", "STEPDOWN"): False, ("DIRECT", "GET"): False,
    ("CONSUMER", "LIST"): False, ("CONSUMER", "NAMES"): False,
    ("CONSUMER", "CREATE"): True, ("CONSUMER", "DURABLE", "CREATE"): True, ("CONSUMER", "INFO"): True,
    ("CONSUMER", "DELETE"): True, ("CONSUMER", "PAUSE"): True, ("CONSUMER", "UNPIN"): True,
    ("CONSUMER", "RESET"): True, ("CONSUMER", "LEADER", "STEPDOWN"): True,
}


def api_objects(suffix: str) -> tuple[str | None, str | None]:
    """The stream and consumer an API call names: ``"CONSUMER.INFO.S.c"`` -> ``("S", "c")``."""
    tokens = suffix.split(".")
    for size in (3, 2):
        head = tuple(tokens[:size])
        if head in _NAMED_CALLS:
            rest = tokens[size:]
            stream = rest[0] if rest else None
            consumer = rest[1] if _NAMED_CALLS[head] and len(rest) > 1 else None
            return stream, consumer
    return None, None


_FRACTION = re.compile(r"(\.\d{6})\d+")


def truncate_time(text: str) -> str:
    """An RFC 3339 time from the server with its fraction cut to microseconds.

    The server writes nanoseconds; a datetime holds microseconds. Parsers round
    the rest (msgspec turns ``...59.9999996Z`` into the next second, even the
    next year); the time is cut instead, as nats-py does and as nats.go shows it.
    """
    return _FRACTION.sub(r"\1", text, count=1)


def rfc3339(t: datetime.datetime) -> str:
    """UTC time for the server; a naive datetime is taken as local time (as Python does)."""
    return t.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _walk(obj: Any, convert: Any) -> Any:
    if isinstance(obj, dict):
        out = {k: (convert(v) if k in DURATION_KEYS else _walk(v, convert)) for k, v in obj.items() if k != UNKNOWN}
        extra = obj.get(UNKNOWN)
        if isinstance(extra, dict):
            if convert is _secs_to_ns:
                # Outgoing: the unknown keys go back as they came (already wire form),
                # never over a key this client set.
                for k, v in extra.items():
                    out.setdefault(k, v)
            else:
                out[UNKNOWN] = extra
        return out
    if isinstance(obj, list):
        return [_walk(v, convert) for v in obj]
    if isinstance(obj, datetime.datetime):
        return rfc3339(obj)
    return obj


@functools.cache
def _type_info(type_: Any) -> mi.Type:
    return mi.type_info(type_)


@functools.cache
def _fields(cls: type) -> tuple[dict[str, mi.Type], bool]:
    """A struct class's fields by JSON name, and whether it is open (keeps unknown keys)."""
    struct = _type_info(cls)
    assert isinstance(struct, mi.StructType)
    fields = {f.encode_name: f.type for f in struct.fields}
    return fields, UNKNOWN in fields


def _capture(obj: Any, t: mi.Type) -> Any:
    """Move the keys an open struct does not model into its ``unknown_fields``, at every level."""
    if isinstance(t, mi.StructType) and isinstance(obj, dict):
        fields, is_open = _fields(t.cls)
        out = {k: (_capture(v, fields[k]) if k in fields else v) for k, v in obj.items()}
        if is_open:
            extra = {k: v for k, v in obj.items() if k not in fields}
            if extra:
                out[UNKNOWN] = extra
        return out
    if isinstance(t, mi.UnionType):
        for member in t.types:
            if isinstance(member, (mi.StructType, mi.ListType, mi.DictType, mi.DateTimeType)):
                return _capture(obj, member)
        return obj
    if isinstance(t, mi.DateTimeType) and isinstance(obj, str):
        return truncate_time(obj)
    if isinstance(t, mi.ListType) and isinstance(obj, list):
        return [_capture(v, t.item_type) for v in obj]
    if isinstance(t, mi.DictType) and isinstance(obj, dict):
        return {k: _capture(v, t.value_type) for k, v in obj.items()}
    return obj


def to_wire(obj: Any) -> Any:
    """Structs and dicts -> JSON-ready builtins with durations in nanoseconds and times in UTC;
    the ``unknown_fields`` of open structs are merged back in."""
    return _walk(msgspec.to_builtins(obj, builtin_types=(datetime.datetime,)), _secs_to_ns)


def from_wire(obj: Any, type_: type[T]) -> T:
    """Decoded JSON -> ``type_`` with durations in seconds; keys an open struct does not
    model are kept in its ``unknown_fields``.

    Raises:
        InvalidResponseError: the JSON does not fit ``type_`` (never msgspec's own error).
    """
    if isinstance(obj, dict) and isinstance(obj.get("type"), str) and obj["type"].startswith("io.nats."):
        # The API response's schema name belongs to the response, not to the struct.
        obj = {k: v for k, v in obj.items() if k != "type"}
    try:
        captured = _capture(obj, _type_info(cast(Hashable, type_)))
        return msgspec.convert(_walk(captured, _ns_to_secs), type_, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidResponseError(f"cannot decode a {getattr(type_, '__name__', type_)}: {exc}") from exc


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

    def request(self, suffix: str, body: Any = None, timeout: TimeoutArg = USE_DEFAULT,
                headers: dict[str, str] | None = None) -> dict[str, Any]:
        """Send one API request and return the decoded response.

        Raises:
            JetStreamNotEnabledError: nobody answers on the API subject.
            JetStreamError: (or a subclass chosen by ``err_code``) the server's error.
            TimeoutError: no answer within ``timeout`` (default: the context's).
        """
        deadline = self.deadline(timeout)
        payload = body if isinstance(body, (bytes, bytearray)) else encode(body)
        observed = client_trace.traces  # empty unless someone observes (see client_trace.py)
        if observed:
            client_trace.request_sent(self.subject(suffix), bytes(payload))
        try:
            msg = self.core.request(self.subject(suffix), payload, deadline, headers)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                f"JetStream is not enabled (no responder on {self.subject(suffix)})", code=503
            ) from None
        if observed:
            client_trace.response_received(self.subject(suffix), msg.data, msg.headers)
        return self.check(msg.data, suffix)

    @staticmethod
    def check(data: bytes, suffix: str = "") -> dict[str, Any]:
        """The decoded response to the API call ``suffix``; its error as an exception naming the call's objects."""
        try:
            resp = _decode(data)
        except msgspec.DecodeError as exc:
            raise InvalidResponseError(f"invalid JetStream API response: {data[:100]!r}") from exc
        if not isinstance(resp, dict):
            raise InvalidResponseError(f"invalid JetStream API response: {data[:100]!r}")
        err = resp.get("error")
        if err:
            stream, consumer = api_objects(suffix)
            raise jetstream_error(err.get("code"), err.get("err_code"), err.get("description", ""), stream, consumer)
        return resp

    def request_typed(self, suffix: str, body: Any, type_: type[T],
                      timeout: TimeoutArg = USE_DEFAULT, headers: dict[str, str] | None = None) -> T:
        return from_wire(self.request(suffix, body, timeout, headers), type_)

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
