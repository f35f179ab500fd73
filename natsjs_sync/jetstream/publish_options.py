"""The options of a JetStream publish, and the headers that carry them.

A publish's options (de-duplication id, expectations, message TTL, ADR-51
schedules) travel as ``Nats-*`` headers. Turning them into headers is the same
rule for every way of publishing (sync, async, atomic and fast batches, KV,
the Spark writer), and it is pure: it checks and merges, before anything is
sent, and owns no I/O. So it lives apart from how a message is sent and how its
PubAck comes back.
"""

from __future__ import annotations

import datetime

from ..errors import BadHeaderError
from ..protocol.headers import Headers, HeadersInput

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SUBJECT_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MSG_TTL = "Nats-TTL"
SCHEDULE = "Nats-Schedule"
SCHEDULE_TARGET = "Nats-Schedule-Target"
SCHEDULE_SOURCE = "Nats-Schedule-Source"
SCHEDULE_TTL = "Nats-Schedule-TTL"
SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"
SCHEDULE_ROLLUP = "Nats-Schedule-Rollup"


def go_duration(seconds: float | str, what: str, minimum: float = 0.0) -> str:
    """Seconds as a Go duration string (``"90s"``, ``"1.5s"``); a str is passed through.

    Raises:
        TypeError: not a number or a str.
        ValueError: below ``minimum`` (or negative), or an empty string.
    """
    if isinstance(seconds, str):
        if not seconds:
            raise ValueError(f"{what} must not be empty")
        return seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be seconds (a number) or a Go duration string, got {seconds!r}")
    if seconds < minimum or seconds <= 0:
        raise ValueError(f"{what} must be at least {minimum or 'more than 0'} s, got {seconds!r}")
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def _check_subject(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or any(c in value for c in " \t\r\n"):
        raise ValueError(f"{what} must be a non-empty subject without whitespace, got {value!r}")
    return value


def msg_ttl_value(ttl: float | str | None) -> str | None:
    """The ``Nats-TTL`` value of a ``ttl`` option, or ``None`` for no header.

    The one rule of every call that takes a message ``ttl`` (JetStream publish,
    KV create and purge; as nats.go's): ``None``
    or zero means the value does not expire, so no header is sent (a zero
    rounded up to the server's 1 s minimum made the key vanish after a second).
    A positive number of seconds is sent in whole seconds, at least one; a str
    is a Go duration (``"90s"``, ``"never"``) sent as it is.

    Raises:
        BadHeaderError: a negative or NaN number, or an empty str: no ``Nats-TTL`` can say
            it (raised before anything is sent; also a ValueError).
        TypeError: not a number or a str.
    """
    if ttl is None:
        return None
    if isinstance(ttl, str):
        if not ttl:
            raise BadHeaderError("ttl must not be an empty str")
        return ttl
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be seconds (a number) or a Go duration str, got {ttl!r}")
    if not ttl >= 0:  # negative or NaN
        raise BadHeaderError(f"ttl must be >= 0 seconds (0: no expiry), got {ttl!r}")
    if ttl == 0:
        return None
    if ttl == float("inf"):
        return "never"
    return f"{max(1, round(ttl))}s"


def publish_headers(
    headers: HeadersInput | None,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
    *,
    expected_last_subject_seq_subject: str | None = None,
    schedule_at: datetime.datetime | None = None,
    schedule_every: float | str | None = None,
    schedule_cron: str | None = None,
    schedule_target: str | None = None,
    schedule_source: str | None = None,
    schedule_ttl: float | str | None = None,
    schedule_time_zone: str | None = None,
    schedule_rollup: bool = False,
    features: list[str] | None = None,
) -> HeadersInput | None:
    """Merge the JetStream publish options into the user's headers.

    The server features the options need are appended to ``features`` (for
    the caller to check against the connected server before sending).

    Raises:
        ValueError, TypeError: an option that cannot be sent (checked before anything is).
    """
    extra = _expectations(msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                          expected_last_subject_seq_subject, expected_last_msg_id, features)
    ttl_value = msg_ttl_value(ttl)
    if ttl_value is not None:
        extra[MSG_TTL] = ttl_value
        if features is not None:
            features.append("msg_ttl")
    if (schedule_rollup or schedule_at is not None or schedule_every is not None or schedule_cron is not None
            or schedule_target is not None or schedule_source is not None or schedule_ttl is not None
            or schedule_time_zone is not None):
        _schedule(extra, at=schedule_at, every=schedule_every, cron=schedule_cron, target=schedule_target,
                  source=schedule_source, ttl=schedule_ttl, time_zone=schedule_time_zone, rollup=schedule_rollup,
                  features=features)
    if not extra:
        return headers
    merged = copy_headers(headers)
    for k, v in extra.items():
        merged[k] = v
    return merged


def _expectations(msg_id: str | None, expected_stream: str | None, expected_last_seq: int | None,
                  expected_last_subject_seq: int | None, expected_last_subject_seq_subject: str | None,
                  expected_last_msg_id: str | None, features: list[str] | None) -> dict[str, str]:
    """The de-duplication id and the publish expectations, as headers."""
    extra: dict[str, str] = {}
    if msg_id is not None:
        extra[MSG_ID] = str(msg_id)
    if expected_stream is not None:
        extra[EXPECTED_STREAM] = expected_stream
    if expected_last_seq is not None:
        extra[EXPECTED_LAST_SEQ] = str(expected_last_seq)
    if expected_last_subject_seq_subject is not None:
        if expected_last_subject_seq is None:
            raise ValueError("expected_last_subject_seq_subject needs expected_last_subject_seq")
        extra[EXPECTED_LAST_SUBJECT_SEQ_SUBJECT] = _check_subject(expected_last_subject_seq_subject,
                                                                  "expected_last_subject_seq_subject")
        if features is not None:
            features.append("expected_last_subject_seq_subject")
    if expected_last_subject_seq is not None:
        extra[EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
    if expected_last_msg_id is not None:
        extra[EXPECTED_LAST_MSG_ID] = expected_last_msg_id
    return extra


def copy_headers(headers: HeadersInput | None) -> Headers:
    """A mutable copy of ``headers`` that keeps every value of a repeated key.

    (``Headers(a_headers)`` keeps only the first value of each key.)
    """
    out = Headers()
    if isinstance(headers, Headers):
        for k, v in headers.items_all():
            out.add(k, v)
        return out
    for k, value in (headers or {}).items():
        if isinstance(value, str):
            out.add(k, value)
        else:
            for v in value:
                out.add(k, v)
    return out


def _schedule(extra: dict[str, str], *, at: datetime.datetime | None, every: float | str | None,
              cron: str | None, target: str | None, source: str | None, ttl: float | str | None,
              time_zone: str | None, rollup: bool, features: list[str] | None) -> None:
    """The ADR-51 schedule headers: exactly one of at/every/cron, and a target."""
    if target is None:
        raise ValueError("a scheduled message needs schedule_target (the subject it is published to)")
    extra[SCHEDULE_TARGET] = _check_subject(target, "schedule_target")
    extra[SCHEDULE], patterns = _schedule_spec(at, every, cron)
    if time_zone is not None:
        if cron is None:
            raise ValueError("schedule_time_zone only goes with schedule_cron")
        if not isinstance(time_zone, str) or not time_zone:
            raise ValueError(f"schedule_time_zone must be an IANA zone name, got {time_zone!r}")
        extra[SCHEDULE_TIME_ZONE] = time_zone
    if source is not None:
        extra[SCHEDULE_SOURCE] = _check_subject(source, "schedule_source")
    if ttl is not None:
        extra[SCHEDULE_TTL] = "never" if ttl == "never" else go_duration(ttl, "schedule_ttl")
    if rollup:
        extra[SCHEDULE_ROLLUP] = "sub"  # each produced message replaces the target subject's earlier ones
    patterns = patterns or source is not None or ttl is not None or rollup
    if features is not None:
        features.append("schedule_patterns" if patterns else "msg_schedules")


def _schedule_spec(at: datetime.datetime | None, every: float | str | None, cron: str | None) -> tuple[str, bool]:
    """The ``Nats-Schedule`` value, and whether it needs schedule patterns (2.14) rather than ``@at`` (2.12)."""
    given = [name for name, v in (("schedule_at", at), ("schedule_every", every), ("schedule_cron", cron))
             if v is not None]
    if len(given) != 1:
        raise ValueError("a scheduled message takes exactly one of schedule_at, schedule_every, schedule_cron"
                         + (f" (got {', '.join(given)})" if given else ""))
    if at is not None:
        if not isinstance(at, datetime.datetime):
            raise TypeError(f"schedule_at must be a datetime, got {type(at).__name__}")
        at_utc = at.astimezone(datetime.timezone.utc).replace(microsecond=0)
        return "@at " + at_utc.isoformat().replace("+00:00", "Z"), False
    if every is not None:
        return "@every " + go_duration(every, "schedule_every", minimum=1.0), True
    if not isinstance(cron, str) or not cron.strip():
        raise ValueError(f"schedule_cron must be a cron expression or @hourly/@daily/..., got {cron!r}")
    return cron.strip(), True
