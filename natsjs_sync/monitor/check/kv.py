"""The key-value check: the bucket exists, a key has a value, the number of values is within thresholds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError, NatsError
from .result import CheckResult, Status

if TYPE_CHECKING:
    from ...client import Client
    from ...jetstream import KeyValue


def check_kv(
    nc: Client,
    bucket: str,
    *,
    key: str | None = None,
    values_warn: int | None = None,
    values_critical: int | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A key-value bucket, as ``nats server check kv`` sees it: it exists, a key has a value,
    the number of values is within thresholds.

    The values thresholds are the nats CLI's: at or above them is WARNING / CRITICAL, unless
    ``values_critical`` is below ``values_warn`` (or only ``values_warn`` is given): then at
    or *below* them. A negative threshold (or ``None``) is not checked.

    Args:
        nc: a connected client of the bucket's account.
        bucket: the bucket's name.
        key: a key that must have a value (not deleted, not purged).
        values_warn, values_critical: thresholds of the number of values stored (history
            and delete markers included).
        timeout: seconds for each request.

    Returns:
        CRITICAL when the bucket or the key is missing, or a critical threshold is crossed.
    """
    result = CheckResult("kv", bucket)
    try:
        kv = nc.jetstream(timeout=timeout).key_value(bucket)
    except BucketNotFoundError:
        result.critical(f"bucket {bucket} not found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"could not load bucket: {exc}")
        return result
    result.ok(f"bucket {bucket}")
    try:
        status = kv.status()
    except (NatsError, OSError) as exc:
        result.critical(f"could not obtain bucket status: {exc}")
        return result
    warn = -1 if values_warn is None or values_warn < 0 else values_warn
    crit = -1 if values_critical is None or values_critical < 0 else values_critical
    values = status.values
    result.perf("values", values, "", max(warn, 0), max(crit, 0),
                description="How many values are stored in the bucket")
    if key:
        _check_key(result, kv, key)
    if warn > -1 or crit > -1:
        result.add(_values_level(values, warn, crit), f"{values} values")
    result.perf("bytes", status.bytes, "B", description="Bytes stored in the bucket")
    result.perf("replicas", status.stream_info.config.num_replicas)
    return result


def _check_key(result: CheckResult, kv: KeyValue, key: str) -> None:
    """``key`` has a value: not missing, deleted or purged."""
    try:
        kv.get(key)
    except KeyDeletedError as exc:
        op = getattr(exc, "op", "DEL")
        result.critical(f"key {key} is {'purged' if op == 'PURGE' else 'deleted'}")
    except KeyNotFoundError:
        result.critical(f"key {key} not found")
    except (NatsError, OSError, ValueError) as exc:
        result.critical(f"key {key} not loaded: {exc}")
    else:
        result.ok(f"key {key} found")


def _values_level(values: int, warn: int, crit: int) -> Status:
    """The level of the number of values against the thresholds (-1: not set)."""
    # The nats CLI's rule: a critical threshold below the warning one inverts the check.
    if crit < warn:
        crossed_crit, crossed_warn = crit > -1 and values <= crit, warn > -1 and values <= warn
    else:
        crossed_crit, crossed_warn = crit > -1 and values >= crit, warn > -1 and values >= warn
    return Status.CRITICAL if crossed_crit else Status.WARNING if crossed_warn else Status.OK
