"""The data source's options: every name, its aliases, its check, and Kafka's names.

Options are checked on the driver when the query is defined (``load()``,
``save()``, ``start()``), so a wrong value fails there, naming the option and
the value, and never half way through a job on an executor. Kafka's option
names either work with Kafka's meaning (``startingOffsets``, ``endingOffsets``,
``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``,
``includeHeaders``, ``failOnDataLoss``, ``minPartitions``,
``maxRecordsPerPartition``, ``topic``) or are refused with the name to use.
Unknown names are refused too (a typo must not be silently ignored).
"""

from __future__ import annotations

import datetime
import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import NatsConfig

Mode = Literal["batch_read", "stream_read", "any_read", "batch_write", "stream_write"]

#: Connection options: canonical name -> aliases.
_CONNECTION: dict[str, tuple[str, ...]] = {
    "servers": ("url", "nats.servers"),
    "user": (),
    "password": (),
    "token": (),
    "creds": ("credsFile",),
    "nkeysSeed": ("nkeysSeedFile",),
    "tlsCa": (),
    "tlsCert": (),
    "tlsKey": (),
    "tlsHostname": (),
    "tlsVerifyHostname": (),
    "name": (),
    "connectTimeout": (),
    "timeout": (),
    "retryTimeout": (),
    "domain": (),
    "apiPrefix": (),
    "maxReconnectAttempts": (),
    "reconnectTimeWait": (),
}
_READ: dict[str, tuple[str, ...]] = {
    "stream": ("path",),
    "subjects": ("subject",),
    "startingOffsets": (),
    "startingSequence": (),
    "startingTimestamp": (),
    "startingOffsetsByTimestamp": (),
    "minPartitions": (),
    "maxMessagesPerPartition": ("maxRecordsPerPartition",),
    "maxConsumers": (),
    "includeHeaders": (),
    "headersFormat": (),
    "failOnDataLoss": (),
    "valueFormat": (),
    "valueSchema": (),
    "mode": (),
    "columnNameOfCorruptRecord": (),
}
_BATCH_READ: dict[str, tuple[str, ...]] = {
    "endingOffsets": (),
    "endingSequence": (),
    "endingTimestamp": (),
    "endingOffsetsByTimestamp": (),
}
_STREAM_READ: dict[str, tuple[str, ...]] = {
    "maxMessagesPerTrigger": ("maxOffsetsPerTrigger",),
    "minMessagesPerTrigger": ("minOffsetsPerTrigger",),
    "maxTriggerDelay": (),
    "consumerGroup": (),
    "groupMember": (),
    "groupKind": (),
    "groupAckWait": (),
}
#: Read options a group read refuses: the group decides what is read and how it is split.
_NOT_WITH_GROUP = ("startingOffsets", "startingSequence", "startingTimestamp", "startingOffsetsByTimestamp",
                   "subjects", "minPartitions", "maxMessagesPerPartition", "maxConsumers",
                   "minMessagesPerTrigger", "maxTriggerDelay")
_WRITE: dict[str, tuple[str, ...]] = {
    "subject": ("topic",),
    "writeId": (),
    "valueFormat": (),
}
#: Set by Spark itself, not by the user: accepted and not used.
_SPARK_OWN = ("checkpointLocation", "queryName", "path")

_NO_GROUP_ID = ("there is no consumer group id: positions live in Spark's checkpoint; to share a stream with "
                "other processes, read a NATS partitioned consumer group ('consumerGroup' and 'groupMember')")
#: Kafka (or Spark-Kafka) names that have no JetStream meaning: the name to use instead.
_KAFKA_REFUSED = {
    "kafka.bootstrap.servers": "use 'servers' (nats://host:4222,...)",
    "subscribe": "use 'stream' (comma-separated for several) and 'subjects' to filter",
    "assign": "use 'stream' and 'startingOffsets' as JSON {\"STREAM\": sequence}",
    "subscribePattern": "use 'stream' and 'subjects' with NATS wildcards (orders.*, orders.>)",
    "groupIdPrefix": _NO_GROUP_ID,
    "kafka.group.id": _NO_GROUP_ID,
    "kafkaConsumer.pollTimeoutMs": "use 'timeout' (seconds)",
    "fetchOffset.numRetries": "use 'retryTimeout' (seconds)",
    "fetchOffset.retryIntervalMs": "use 'retryTimeout' (seconds)",
    "startingOffsetsByTimestampStrategy": "a start time after the last message starts at the end of the stream",
    "maxBytesPerTrigger": "use 'maxMessagesPerTrigger'",
    "includeTimestamp": "the 'timestamp' column is always there",
}

_EARLIEST, _LATEST = -2, -1


def _canonical_table(mode: Mode) -> dict[str, str]:
    """lower-case name or alias -> canonical name, for ``mode``."""
    groups: list[Mapping[str, tuple[str, ...]]] = [_CONNECTION]
    if mode in ("batch_read", "stream_read", "any_read"):
        groups.append(_READ)
        if mode != "stream_read":
            groups.append(_BATCH_READ)
        if mode != "batch_read":
            groups.append(_STREAM_READ)
    else:
        groups.append(_WRITE)
    table: dict[str, str] = {}
    for group in groups:
        for name, aliases in group.items():
            for n in (name, *aliases):
                table[n.lower()] = name
    return table


def _all_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for group in (_CONNECTION, _READ, _BATCH_READ, _STREAM_READ, _WRITE):
        for name, aliases in group.items():
            for n in (name, *aliases):
                names[n.lower()] = n
    return names


def normalise(options: Mapping[str, Any], mode: Mode) -> dict[str, str]:
    """The user's options by canonical name, every name checked.

    Raises:
        ValueError: an unknown name (with the closest known ones), a Kafka name
            without JetStream meaning (with the name to use), an option that
            does not apply to this kind of query, or one given twice by aliases.
    """
    table = _canonical_table(mode)
    everything = _all_names()
    kafka = {k.lower(): (k, hint) for k, hint in _KAFKA_REFUSED.items()}
    spark_own = {k.lower() for k in _SPARK_OWN}
    out: dict[str, str] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if value is None:
            continue
        if low in table:
            name = table[low]
            if name in out:
                raise ValueError(f"options {given[name]!r} and {key!r} are the same option ({name!r}): give one")
            out[name] = str(value)
            given[name] = key
            continue
        if low in spark_own:
            continue
        where = {"batch_read": "a batch read", "stream_read": "a streaming read", "any_read": "a read",
                 "batch_write": "a write",
                 "stream_write": "a streaming write"}[mode]
        if low in kafka:
            raise ValueError(f"option {kafka[low][0]!r} (a Kafka option) has no meaning for jetstream: "
                             f"{kafka[low][1]}")
        if low.startswith("kafka."):
            raise ValueError(f"option {key!r}: Kafka client settings do not apply to jetstream; NATS client "
                             "settings are options of their own (servers, creds, tlsCa, name, connectTimeout, "
                             "maxReconnectAttempts, reconnectTimeWait, ...)")
        if low in everything:
            raise ValueError(f"option {everything[low]!r} does not apply to {where}")
        close = difflib.get_close_matches(low, list(table), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(repr(_display(table[c], c, everything)) for c in close)}?)" if close else ""
        raise ValueError(f"unknown option {key!r} for {where} of the jetstream data source{hint}")
    return out


def _display(canonical: str, low: str, everything: dict[str, str]) -> str:
    return everything.get(low, canonical)


# ---------------------------------------------------------------------- value checks

def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ValueError(f"option {name!r} must be true or false, got {value!r}")


def _int(opts: dict[str, str], name: str, least: int) -> int | None:
    value = opts.get(name)
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {value!r}") from None
    if n < least:
        raise ValueError(f"option {name!r} must be >= {least}, got {value!r}")
    return n


def _seconds(opts: dict[str, str], name: str, default: float, allow_zero: bool = False) -> float:
    value = opts.get(name)
    if value is None:
        return default
    try:
        s = float(value.strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(s) or s < 0 or (s == 0 and not allow_zero):
        raise ValueError(f"option {name!r} must be a finite number of seconds > 0, got {value!r}")
    return s


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)?\s*$", re.I)
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(opts: dict[str, str], name: str, default: float) -> float:
    """Kafka's ``maxTriggerDelay`` style: ``15m``, ``30s``, ``500ms``, or seconds."""
    value = opts.get(name)
    if value is None:
        return default
    m = _DURATION.match(value)
    if not m:
        raise ValueError(f"option {name!r} must be a duration such as 30s, 15m or 500ms, got {value!r}")
    unit = (m.group(2) or "s").lower()
    return float(m.group(1)) * _UNIT["ms" if unit == "ms" else unit[0]]


def parse_time(name: str, value: str) -> datetime.datetime:
    """An ISO-8601 time or milliseconds since the epoch (UTC), for option ``name``."""
    v = value.strip()
    try:
        if v.lstrip("-").isdigit():
            return datetime.datetime.fromtimestamp(int(v) / 1000, datetime.timezone.utc)
        t = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"option {name!r} must be milliseconds since the epoch or an ISO-8601 time, "
                         f"got {value!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


_STREAM_NAME = re.compile(r"^[^\s.*>/\\]+$")


def _streams(opts: dict[str, str]) -> tuple[str, ...]:
    value = opts.get("stream")
    if not value or not value.strip():
        raise ValueError("the jetstream data source needs a stream: option('stream', 'ORDERS') or load('ORDERS') "
                         "(several: 'ORDERS,AUDIT')")
    names = tuple(s.strip() for s in value.split(","))
    for n in names:
        if not _STREAM_NAME.match(n):
            raise ValueError(f"option 'stream': {n!r} is not a stream name (got {value!r})")
    if len(set(names)) != len(names):
        raise ValueError(f"option 'stream' names a stream twice: {value!r}")
    return names


def _per_stream_json(name: str, value: str, streams: tuple[str, ...], what: str) -> dict[str, Any]:
    try:
        doc = json.loads(value)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ValueError(f"option {name!r} must be {what}, got {value!r}")
    unknown = sorted(set(doc) - set(streams))
    if unknown:
        raise ValueError(f"option {name!r} names {', '.join(map(repr, unknown))}, which this read does not read "
                         f"(streams: {', '.join(streams)})")
    missing = [s for s in streams if s not in doc]
    if missing:
        raise ValueError(f"option {name!r} gives no position for {', '.join(map(repr, missing))}: "
                         "name every stream read")
    return doc


@dataclass(frozen=True)
class Position:
    """Where a read starts or ends in one stream: a sequence, a time, or earliest/latest."""

    seq: int | None = None  #: a stream sequence; -2 earliest, -1 latest
    time: datetime.datetime | None = None


def _positions(opts: dict[str, str], streams: tuple[str, ...], edge: Literal["starting", "ending"]
               ) -> dict[str, Position]:
    """``startingOffsets``/``startingSequence``/``startingTimestamp``/``startingOffsetsByTimestamp`` (or the
    ``ending`` ones), at most one of them, as a position per stream.

    A start is inclusive. ``endingOffsets`` is exclusive (Kafka's meaning);
    ``endingSequence`` is inclusive: both are turned into "last sequence read".
    """
    names = [f"{edge}Offsets", f"{edge}Sequence", f"{edge}Timestamp", f"{edge}OffsetsByTimestamp"]
    given = [n for n in names if n in opts]
    if len(given) > 1:
        raise ValueError(f"options {' and '.join(map(repr, given))} both say where to {edge[:-3]}: give one")
    default = Position(seq=_EARLIEST if edge == "starting" else _LATEST)
    if not given:
        return {s: default for s in streams}
    name = given[0]
    value = opts[name]
    if name.endswith("Sequence"):
        n = _int(opts, name, 1)
        assert n is not None
        if edge == "ending":
            n += 1  # inclusive: the first sequence not read
        return {s: Position(seq=n) for s in streams}
    if name.endswith("OffsetsByTimestamp"):
        return _times_by_stream(name, value, streams)
    if name.endswith("Timestamp"):
        return {s: Position(time=parse_time(name, value)) for s in streams}
    return _offsets(name, value, streams, edge)


def _times_by_stream(name: str, value: str, streams: tuple[str, ...]) -> dict[str, Position]:
    """``...OffsetsByTimestamp``: JSON of milliseconds since the epoch per stream."""
    doc = _per_stream_json(name, value, streams, 'JSON {"STREAM": milliseconds since the epoch, ...}')
    out = {}
    for s, v in doc.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"option {name!r}: the time for {s!r} must be milliseconds since the epoch, "
                             f"got {v!r}")
        out[s] = Position(time=parse_time(name, str(v)))
    return out


def _offsets(name: str, value: str, streams: tuple[str, ...], edge: Literal["starting", "ending"]
             ) -> dict[str, Position]:
    """``...Offsets``: ``earliest``/``latest`` or JSON of sequences per stream (-2 earliest, -1 latest)."""
    low = value.strip().lower()
    if low == "earliest":
        if edge == "ending":
            raise ValueError(f"option {name!r} cannot be 'earliest' (Kafka does not allow it either): use 'latest' "
                             "or JSON {\"STREAM\": sequence}")
        return {s: Position(seq=_EARLIEST) for s in streams}
    if low == "latest":
        return {s: Position(seq=_LATEST) for s in streams}
    what = ("'earliest', 'latest' or JSON {\"STREAM\": sequence, ...} (-2 earliest, -1 latest)" if edge == "starting"
            else "'latest' or JSON {\"STREAM\": sequence, ...} (exclusive end; -1 latest)")
    doc = _per_stream_json(name, value, streams, what)
    out = {}
    for s, v in doc.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < -2 or v == 0 \
                or (edge == "ending" and v == _EARLIEST):
            raise ValueError(f"option {name!r}: the position for {s!r} must be a sequence >= 1"
                             f"{', -2 (earliest)' if edge == 'starting' else ''} or -1 (latest), got {v!r}")
        out[s] = Position(seq=v)
    return out


def _subjects(opts: dict[str, str]) -> tuple[str, ...]:
    value = opts.get("subjects")
    if value is None:
        return ()
    subjects = tuple(s.strip() for s in value.split(",") if s.strip())
    for s in subjects:
        if " " in s or s.startswith(".") or s.endswith(".") or ".." in s:
            raise ValueError(f"option 'subjects': {s!r} is not a subject filter (got {value!r})")
    return subjects


def connection(opts: dict[str, str]) -> NatsConfig:
    """The :class:`NatsConfig` the options describe."""
    servers = opts.get("servers")
    if not servers or not servers.strip():
        raise ValueError("the jetstream data source needs the option 'servers' (nats://host:4222,...)")
    for url in servers.split(","):
        u = url.strip()
        if u and "://" in u and u.split("://", 1)[0] not in ("nats", "tls", "ws", "wss"):
            raise ValueError(f"option 'servers': {u!r} is not a NATS URL (nats://, tls://, ws://, wss://)")
    max_reconnect = _int(opts, "maxReconnectAttempts", -1)
    tls_hostname = opts.get("tlsHostname")
    options: dict[str, Any] = {}
    if tls_hostname:
        options["tls_hostname"] = tls_hostname
    return NatsConfig(
        servers=servers,
        user=opts.get("user"),
        password=opts.get("password"),
        token=opts.get("token"),
        creds_file=opts.get("creds"),
        nkeys_seed_file=opts.get("nkeysSeed"),
        tls_ca=opts.get("tlsCa"),
        tls_cert=opts.get("tlsCert"),
        tls_key=opts.get("tlsKey"),
        tls_verify_hostname=_bool(opts, "tlsVerifyHostname", True),
        name=opts.get("name") or "natsjs-spark-source",
        connect_timeout=_seconds(opts, "connectTimeout", 5.0),
        timeout=_seconds(opts, "timeout", 10.0),
        retry_timeout=_seconds(opts, "retryTimeout", 60.0, allow_zero=True),
        domain=opts.get("domain") or None,
        api_prefix=opts.get("apiPrefix") or "$JS.API",
        max_reconnect_attempts=60 if max_reconnect is None else max_reconnect,
        reconnect_time_wait=_seconds(opts, "reconnectTimeWait", 1.0, allow_zero=True),
        options=tuple(sorted(options.items())),
    )


_DEFAULT_PARTITION_SIZE = 100_000
#: Consumers one read of a query may hold at once where it cannot read by direct get (a server
#: before 2.11, a stream without allow_direct): each is a request to the stream's leader.
_DEFAULT_MAX_CONSUMERS = 64


@dataclass(frozen=True)
class GroupOptions:
    """A streaming read of a partitioned consumer group (:mod:`natsjs_sync.pcgroups`)."""

    group: str
    member: str
    kind: Literal["elastic", "static"] = "elastic"
    #: Seconds; None: the groups' default (``pcgroups.config.DEFAULT_ACK_WAIT``).
    ack_wait: float | None = None


def _group(opts: dict[str, str], streams: tuple[str, ...]) -> GroupOptions | None:
    """``consumerGroup`` and its companions, checked; None without ``consumerGroup``.

    Raises:
        ValueError: a companion without ``consumerGroup``, no ``groupMember``,
            a bad value, or an option that makes no sense with a group.
    """
    group = opts.get("consumerGroup")
    if group is None:
        given = [n for n in ("groupMember", "groupKind", "groupAckWait") if n in opts]
        if given:
            raise ValueError(f"option {given[0]!r} needs 'consumerGroup' (the group to read)")
        return None
    group = group.strip()
    if not group or not _STREAM_NAME.match(group):
        raise ValueError(f"option 'consumerGroup' must be a group name (no dots, spaces or wildcards), "
                         f"got {opts['consumerGroup']!r}")
    member = (opts.get("groupMember") or "").strip()
    if not member:
        raise ValueError("option 'consumerGroup' needs 'groupMember': the member name this query reads as")
    if not _STREAM_NAME.match(member):
        raise ValueError(f"option 'groupMember' must be a member name (no dots, spaces or wildcards), "
                         f"got {opts['groupMember']!r}")
    kind = (opts.get("groupKind") or "elastic").strip().lower()
    if kind not in ("elastic", "static"):
        raise ValueError(f"option 'groupKind' must be 'elastic' or 'static', got {opts['groupKind']!r}")
    refused = [n for n in _NOT_WITH_GROUP if n in opts]
    if refused:
        raise ValueError(f"option {refused[0]!r} does not apply to a read of consumer group {group!r}: "
                         "the group decides what this member reads (from where it left off) and how it is split")
    if len(streams) != 1:
        raise ValueError(f"option 'consumerGroup' reads one stream, but 'stream' names {len(streams)}: "
                         f"{', '.join(streams)}")
    ack_wait = _seconds(opts, "groupAckWait", 0.0) or None
    return GroupOptions(group=group, member=member, kind=kind, ack_wait=ack_wait)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReadOptions:
    """A read's options, checked (picklable: it travels to the tasks)."""

    cfg: NatsConfig
    streams: tuple[str, ...]
    subjects: tuple[str, ...] = ()
    start: dict[str, Position] = field(default_factory=dict)
    end: dict[str, Position] = field(default_factory=dict)
    min_partitions: int = 1
    per_partition: int = _DEFAULT_PARTITION_SIZE
    #: At most this many partitions (so consumers at once) per read of streams read through consumers.
    max_consumers: int = _DEFAULT_MAX_CONSUMERS
    include_headers: bool = True
    headers_format: Literal["map", "kafka"] = "map"
    fail_on_data_loss: bool = True
    max_per_trigger: int | None = None
    min_per_trigger: int | None = None
    max_trigger_delay: float = 900.0
    #: A read of a consumer group (streaming only), or None.
    group: GroupOptions | None = None
    #: The payload: ``binary`` (the ``data`` column), or ``json``/``msgpack`` decoded into ``value_schema``'s columns.
    value_format: str = "binary"
    value_schema: str | None = None
    #: ``FAILFAST`` or ``PERMISSIVE`` (a payload that does not decode: nulls, and the payload in ``corrupt_column``).
    value_mode: str = "FAILFAST"
    corrupt_column: str | None = None
    #: The payload's columns (a StructType), set when the reader is made from Spark's parsed schema.
    payload_fields: Any = None


def read_options(options: Mapping[str, Any], streaming: bool) -> ReadOptions:
    """Check a read's options (on the driver).

    Raises:
        ValueError: naming the option and the value.
    """
    opts = normalise(options, "stream_read" if streaming else "batch_read")
    streams = _streams(opts)
    fmt = (opts.get("headersFormat") or "map").strip().lower()
    if fmt not in ("map", "kafka"):
        raise ValueError(f"option 'headersFormat' must be 'map' or 'kafka', got {opts['headersFormat']!r}")
    max_per = _int(opts, "maxMessagesPerTrigger", 1)
    min_per = _int(opts, "minMessagesPerTrigger", 1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise ValueError(f"option 'minMessagesPerTrigger' ({min_per}) is above 'maxMessagesPerTrigger' ({max_per})")
    if "maxTriggerDelay" in opts and min_per is None:
        raise ValueError("option 'maxTriggerDelay' needs 'minMessagesPerTrigger' (minOffsetsPerTrigger)")
    ro = ReadOptions(
        cfg=connection(opts),
        streams=streams,
        subjects=_subjects(opts),
        start=_positions(opts, streams, "starting"),
        end={} if streaming else _positions(opts, streams, "ending"),
        min_partitions=_int(opts, "minPartitions", 1) or 1,
        per_partition=_int(opts, "maxMessagesPerPartition", 1) or _DEFAULT_PARTITION_SIZE,
        max_consumers=_int(opts, "maxConsumers", 1) or _DEFAULT_MAX_CONSUMERS,
        include_headers=_bool(opts, "includeHeaders", True),
        headers_format=fmt,  # type: ignore[arg-type]
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_per_trigger=max_per,
        min_per_trigger=min_per,
        max_trigger_delay=_duration(opts, "maxTriggerDelay", 900.0),
        group=_group(opts, streams) if streaming else None,
        **_payload_options(opts),
    )
    return ro


def _payload_options(opts: dict[str, str]) -> dict[str, Any]:
    """``valueFormat``, ``valueSchema``, ``mode`` and ``columnNameOfCorruptRecord``, checked together."""
    from .payloads import DEFAULT_CORRUPT_COLUMN, FORMATS, MODES

    fmt = (opts.get("valueFormat") or "binary").strip().lower()
    if fmt not in FORMATS:
        raise ValueError(f"option 'valueFormat' must be one of {', '.join(FORMATS)}, got {opts['valueFormat']!r}")
    schema = (opts.get("valueSchema") or "").strip() or None
    mode = (opts.get("mode") or "FAILFAST").strip().upper()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be FAILFAST or PERMISSIVE (no row is ever dropped), got {opts['mode']!r}")
    corrupt = (opts.get("columnNameOfCorruptRecord") or "").strip() or None
    if fmt == "binary":
        given = [n for n in ("valueSchema", "mode", "columnNameOfCorruptRecord") if n in opts]
        if given:
            raise ValueError(f"option {given[0]!r} needs 'valueFormat' json or msgpack (the payload is read as "
                             "bytes in column 'data' without it)")
        return {}
    if schema is None:
        raise ValueError(f"option 'valueFormat' {fmt!r} needs 'valueSchema': the payload's fields as a DDL "
                         "string, e.g. \"id BIGINT, name STRING\"")
    if corrupt is not None and mode != "PERMISSIVE":
        raise ValueError("option 'columnNameOfCorruptRecord' needs mode PERMISSIVE")
    if mode == "PERMISSIVE":
        corrupt = corrupt or DEFAULT_CORRUPT_COLUMN
    return {"value_format": fmt, "value_schema": schema, "value_mode": mode, "corrupt_column": corrupt}


@dataclass(frozen=True)
class WriteOptions:
    """A write's options, checked (picklable)."""

    cfg: NatsConfig
    subject: str | None = None
    write_id: str | None = None
    #: ``binary`` (the data column as it is), or ``json``/``msgpack`` (a struct, map or array column encoded).
    value_format: str = "binary"


def write_options(options: Mapping[str, Any], streaming: bool) -> WriteOptions:
    """Check a write's options (on the driver).

    Raises:
        ValueError: naming the option and the value.
    """
    opts = normalise(options, "stream_write" if streaming else "batch_write")
    subject = opts.get("subject")
    if subject is not None:
        s = subject.strip()
        if not s or " " in s or "*" in s or ">" in s or s.startswith(".") or s.endswith(".") or ".." in s:
            raise ValueError(f"option 'subject' must be a subject without wildcards, got {subject!r}")
    write_id = opts.get("writeId")
    if write_id is not None and (not write_id or " " in write_id or len(write_id) > 64):
        raise ValueError(f"option 'writeId' must be 1 to 64 characters without spaces, got {write_id!r}")
    fmt = (opts.get("valueFormat") or "binary").strip().lower()
    if fmt not in ("binary", "json", "msgpack"):
        raise ValueError(f"option 'valueFormat' must be one of binary, json, msgpack, got {opts['valueFormat']!r}")
    return WriteOptions(cfg=connection(opts), subject=subject.strip() if subject else None, write_id=write_id,
                        value_format=fmt)
