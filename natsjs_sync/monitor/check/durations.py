"""Durations and times: read from metadata as the nats CLI reads them, written as Go and the nats
CLI write them."""

from __future__ import annotations

import datetime
import re

#: The longest Go ``time.Duration`` in seconds: where Go's ``time.Since`` saturates.
_MAX_GO_DURATION = (2**63 - 1) / 1e9
_META_DURATION = re.compile(r"([0-9]*(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h|w|W|d|D|M|y|Y)")
_META_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
               "w": 7 * 86400.0, "W": 7 * 86400.0, "d": 86400.0, "D": 86400.0, "M": 30 * 86400.0,
               "y": 365 * 86400.0, "Y": 365 * 86400.0}


def metadata_duration(text: str) -> float:
    """Seconds from a duration as the nats CLI reads one from metadata: Go's units and ``d``,
    ``w``, ``M`` (30 days) and ``y`` (365 days), as in ``"1h30m"`` or ``"2d"``.

    Raises:
        ValueError: not such a duration.
    """
    text = text.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _META_DURATION.finditer(text):
        if m.start() != pos or m.group(1) in ("", "."):
            break
        total += float(m.group(1)) * _META_UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"invalid duration {text!r}")
    return total


def _go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` writes it (``1m2.5s``, ``150ms``, ``0s``)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)

    def frac(value: int, unit: int) -> str:
        whole, part = divmod(value, unit)
        digits = str(part).rjust(len(str(unit)) - 1, "0").rstrip("0")
        return f"{whole}.{digits}" if digits else str(whole)

    if ns < 1000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{frac(ns, 1000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{frac(ns, 1_000_000)}ms"
    hours, ns = divmod(ns, 3600 * 10**9)
    minutes, ns = divmod(ns, 60 * 10**9)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return f"{sign}{out}{frac(ns, 10**9)}s"


def _human_duration(seconds: float) -> str:
    """A duration as the nats CLI shows one to people: ``1y2d3h4m5s``, ``2h0m0s``, ``5.00s``, ``150ms``."""
    if seconds < 1e-3:
        return _go_duration(round(seconds, 6))
    if seconds < 1:
        return _go_duration(round(seconds, 3))
    secs = int(seconds)
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if hours:
        return f"{hours}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{seconds:.2f}s"


def _go_time(t: datetime.datetime) -> str:
    """A UTC time as Go's ``time.Time.String`` writes it: ``2100-01-01 00:00:00 +0000 UTC``."""
    t = t.astimezone(datetime.timezone.utc)
    fraction = f".{t.microsecond:06d}".rstrip("0").rstrip(".")
    return f"{t:%Y-%m-%d %H:%M:%S}{fraction} +0000 UTC"


def _age(t: datetime.datetime | None) -> float | None:
    if t is None or t.year < 1970:
        return None
    return (datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s"
