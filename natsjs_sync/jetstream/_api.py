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


def capture_unknown(obj: Any, type_: Any) -> Any:
    """Decoded JSON made ready for ``msgspec.convert(..., type_)``: the keys an open
    struct does not model go to its ``unknown_fields`` and times are cut to
    microseconds (see :func:`truncate_time`), at every level. Durations are left
    as they are (:func:`from_wire` converts them too).

    The one decoding rule for server documents: the monitoring models use it as well.
    """
    return _capture(obj, _type_info(cast(Hashable, type_)))


def to_wire(obj: Any) -> Any:
    """Structs and dicts -> JSON-ready builtins with durations in nanoseconds and times in UTC;
    the ``unknown_fields`` of open structs are merged back in."""
    return _walk(msgspec.to_builtins(obj, builtin_types=(datetime.datetime,)), _secs_to_ns)


#: Keys of an API response that describe the response, not the struct in it (besides the
#: schema name ``type``): a stream info's answer pages its subjects (``total``, ``offset``,
#: ``limit``). Kept, they would sit in ``unknown_fields`` and make two infos of one stream
#: differ (nats-py drops every key it does not model).
_ENVELOPE_KEYS: dict[str, frozenset[str]] = {"StreamInfo": frozenset({"total", "offset", "limit"})}


def from_wire(obj: Any, type_: type[T]) -> T:
    """Decoded JSON -> ``type_`` with durations in seconds; keys an open struct does not
    model are kept in its ``unknown_fields``.

    Raises:
        InvalidResponseError: the JSON does not fit ``type_`` (never msgspec's own error).
    """
    if isinstance(obj, dict):
        envelope = _ENVELOPE_KEYS.get(getattr(type_, "__name__", ""), _EMPTY)
        if isinstance(obj.get("type"), str) and obj["type"].startswith("io.nats."):
            envelope = envelope | {"type"}
        if envelope.intersection(obj):
            obj = {k: v for k, v in obj.items() if k not in envelope}
    try:
        walked = _walk(capture_unknown(obj, type_), _ns_to_secs)
        result = msgspec.convert(walked, type_, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidResponseError(f"cannot decode a {getattr(type_, '__name__', type_)}: {exc}") from exc
    _remember_sent(result, walked)
    return result


# --- nats-py's as_dict() ------------------------------------------------------------------
#
# nats-py's Base.as_dict() walks its dataclass fields and writes every one that is not None,
# nested models as dicts. Its fields are None unless the server sent them, so what it writes
# for an answer is "the keys the server sent, of the fields it models"; for a config built in
# code it is "the fields set, plus its defaults that are not None". The general rule is
# derived below from what the answer held; only where nats-py departs from it, class by
# class, is it written down here (nats/js/api.py, nats-py 2.x).

#: Attribute of a decoded open model holding the JSON keys the server sent.
_SENT = "_nats_sent_keys"

#: Fields nats-py always writes: its dataclass default is not None, or its as_dict() writes a
#: duration that is None as 0.
NATS_PY_ALWAYS: dict[str, frozenset[str]] = {
    "StreamConfig": frozenset({
        "discard", "discard_new_per_subject", "max_age", "max_msgs_per_subject", "max_msg_size", "no_ack",
        "duplicate_window", "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs",
    }),
    "ConsumerConfig": frozenset({
        "deliver_policy", "ack_policy", "replay_policy", "ack_wait", "idle_heartbeat", "inactive_threshold",
    }),
    "KeyValueConfig": frozenset({"history", "replicas", "ttl"}),
    "ObjectStoreConfig": frozenset({"replicas", "ttl"}),
    "ObjectInfo": frozenset({"deleted"}),
}

#: Fields this client models and nats-py does not (so never in nats-py's output).
NATS_PY_LACKS: dict[str, frozenset[str]] = {
    "StreamInfo": frozenset({"ts"}),
    "StreamState": frozenset({"first_ts", "last_ts", "num_subjects"}),
    "ClusterInfo": frozenset({"system_account", "traffic_account"}),
    "StreamSourceInfo": frozenset({"external", "filter_subject", "subject_transforms"}),
    "StreamSource": frozenset({"domain"}),
    "ConsumerConfig": frozenset({
        "max_batch", "max_bytes", "max_expires", "priority_groups", "priority_policy", "priority_timeout",
    }),
    "ConsumerInfo": frozenset({"priority_groups", "ts"}),
    "AccountInfo": frozenset({"reserved_memory", "reserved_storage"}),
    "Tier": frozenset({"reserved_memory", "reserved_storage"}),
    "APIStats": frozenset({"inflight"}),
    "KeyValueConfig": frozenset({"compression", "metadata", "mirror", "sources", "limit_marker_ttl"}),
    "ObjectStoreConfig": frozenset({"compression", "metadata"}),
    "ObjectInfo": frozenset({"metadata"}),
    "ObjectMeta": frozenset({"metadata"}),
}

#: Times nats-py's as_dict() writes as RFC 3339 text; every other time it leaves a datetime.
NATS_PY_TIME_AS_TEXT: dict[str, frozenset[str]] = {
    "ConsumerInfo": frozenset({"created"}),
    "SequenceInfo": frozenset({"last_active"}),
    "StreamSource": frozenset({"opt_start_time"}),
    "ConsumerConfig": frozenset({"opt_start_time", "pause_until"}),
    "ConsumerPauseResponse": frozenset({"pause_until"}),
    "ObjectInfo": frozenset({"mtime"}),
}

#: Durations (seconds here, nanoseconds in nats-py's as_dict()) under a key that is not one of
#: :data:`DURATION_KEYS` (the bucket configs are never sent as they are).
NATS_PY_DURATIONS: dict[str, frozenset[str]] = {
    "KeyValueConfig": frozenset({"ttl"}),
    "ObjectStoreConfig": frozenset({"ttl"}),
}

_EMPTY: frozenset[str] = frozenset()


@functools.cache
def _struct_fields(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, JSON key, default) of a struct class; the default is ``NODEFAULT`` for a
    required field."""
    out = []
    for f in msgspec.structs.fields(cls):
        default = f.default
        if default is msgspec.NODEFAULT and f.default_factory is not msgspec.NODEFAULT:
            default = f.default_factory()
        out.append((f.name, f.encode_name, default))
    return tuple(out)


@functools.cache
def _names_by_key(cls: type) -> dict[str, str]:
    """A struct class's attribute names by JSON key."""
    return {key: name for name, key, _ in _struct_fields(cls)}


def _remember_sent(obj: Any, raw: Any) -> None:
    """Note on every decoded open model which JSON keys the server sent (see :func:`nats_py_dict`)."""
    if isinstance(obj, msgspec.Struct) and isinstance(raw, dict):
        attrs = getattr(obj, "__dict__", None)
        if attrs is None:  # not an open model (PubAck ...): nothing to remember, and none below
            return
        attrs[_SENT] = frozenset(raw)
        names = _names_by_key(type(obj))
        for key, raw_value in raw.items():
            # Only a dict or list can hold another model: scalars need no visit.
            if isinstance(raw_value, (dict, list)) and key in names:
                _remember_sent(getattr(obj, names[key]), raw_value)
    elif isinstance(obj, list) and isinstance(raw, list):
        for item, raw_item in zip(obj, raw, strict=False):
            _remember_sent(item, raw_item)
    elif isinstance(obj, dict) and isinstance(raw, dict):
        for k, v in obj.items():
            if k in raw:
                _remember_sent(v, raw[k])


def keep_sent(old: Any, new: Any) -> None:
    """Let ``new``, a changed copy of ``old``, remember the keys the server sent for ``old``."""
    sent = getattr(old, "__dict__", {}).get(_SENT)
    if sent is not None:
        new.__dict__[_SENT] = sent


def _nats_py_value(value: Any, duration: bool, time_as_text: bool) -> Any:
    if duration:
        return _secs_to_ns(value)
    if isinstance(value, msgspec.Struct):
        return nats_py_dict(value)
    if isinstance(value, list):
        return [_nats_py_value(v, False, time_as_text) for v in value]
    if isinstance(value, dict):
        return {k: _nats_py_value(v, False, time_as_text) for k, v in value.items()}
    if isinstance(value, datetime.datetime):
        return rfc3339(value) if time_as_text else value
    return value


def nats_py_dict(model: msgspec.Struct) -> dict[str, Any]:
    """What nats-py's ``as_dict()`` gives for ``model`` (see the rule above).

    A field is written when nats-py models it, its value is not ``None``, and the server
    sent it (a decoded answer), or it is not at its default (a model built in code), or
    nats-py always writes it (a duration that is ``None`` is then 0, as nats-py writes).

    Returns:
        A new dict: nested models as dicts, durations in nanoseconds, times as nats-py
        leaves them (a ``datetime``, or RFC 3339 text where nats-py writes text).
    """
    cls_name = type(model).__name__
    always = NATS_PY_ALWAYS.get(cls_name, _EMPTY)
    lacks = NATS_PY_LACKS.get(cls_name, _EMPTY)
    as_text = NATS_PY_TIME_AS_TEXT.get(cls_name, _EMPTY)
    durations = NATS_PY_DURATIONS.get(cls_name, _EMPTY)
    sent = getattr(model, "__dict__", {}).get(_SENT, _EMPTY)
    out: dict[str, Any] = {}
    for name, key, default in _struct_fields(type(model)):
        if name == UNKNOWN or name in lacks:
            continue
        value = getattr(model, name)
        if not (key in sent or name in always or default is msgspec.NODEFAULT or value != default):
            continue
        duration = key in DURATION_KEYS or name in durations
        if value is None:
            if name in always and duration:
                out[key] = 0
            continue
        out[key] = _nats_py_value(value, duration, name in as_text)
    return out


def encode_json(obj: Any) -> bytes:
    """JSON of builtins already in wire form (no duration conversion)."""
    return _encoder.encode(obj)


def encode(obj: Any) -> bytes:
    return _encoder.encode(to_wire(obj)) if obj is not None else b""


def api_prefix(prefix: str = DEFAULT_API_PREFIX, domain: str | None = None) -> str:
    """The subject prefix of JetStream API requests: ``$JS.<domain>.API`` for a domain, else ``prefix``."""
    return (f"$JS.{domain}.API" if domain else prefix).rstrip(".")


class JetStreamAPI:
    """Sends ``$JS.API`` requests for one account/domain. Thread-safe."""

    def __init__(self, nc: Client, prefix: str = DEFAULT_API_PREFIX, domain: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT):
        self.nc = nc
        self.core: CoreLink = link(nc)
        self.prefix = api_prefix(prefix, domain)
        self.domain = domain
        self.timeout = timeout

    def subject(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    def deadline(self, timeout: TimeoutArg) -> Deadline:
        """The one deadline of a call: its ``timeout`` (default: the context's)."""
        return timeout if isinstance(timeout, Deadline) else Deadline.of(timeout, self.timeout)

    def post(self, suffix: str) -> None:
        """Send an API request without a reply subject: the server acts on it and answers no one.

        For clean-ups that nobody waits for (deleting a consumer the client made
        and no longer needs, as nats.go does from a goroutine of its own): a
        buffered publish, never a round trip, so it may run on any thread,
        the timer thread releasing a collected iterator included. Not traced
        (:mod:`.client_trace` observes exchanges on the caller's thread).

        Raises:
            NatsError: the client cannot take the publish (closed, buffer full).
        """
        self.core.publish(self.subject(suffix))

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
