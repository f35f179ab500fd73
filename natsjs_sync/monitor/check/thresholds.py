"""Thresholds: a measurement compared with the warning and critical levels a caller gave."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import CheckResult


def _threshold(result: CheckResult, what: str, value: float, warn: float | None, crit: float | None,
               fmt: Callable[[float], str] = str, above: bool = True) -> None:
    """Compare ``value`` with the thresholds: ``above`` means bigger is worse."""
    def crossed(limit: float) -> bool:
        return value >= limit if above else value < limit

    if crit is not None and crossed(crit):
        result.critical(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(crit)}")
    elif warn is not None and crossed(warn):
        result.warning(f"{what} {fmt(value)} {'>=' if above else '<'} {fmt(warn)}")


def _levels(result: CheckResult, what: str, value: int, warn: int | None, crit: int | None,
            more_is_worse: bool) -> None:
    """Compare ``value`` with thresholds as the nats CLI's stream check does: reaching one (``>=``,
    or ``<=`` when fewer is worse) crosses it; a threshold of 0 or less (or ``None``) is not set."""
    def crossed(limit: int | None) -> bool:
        return limit is not None and limit > 0 and (value >= limit if more_is_worse else value <= limit)

    sign = ">=" if more_is_worse else "<="
    if crossed(crit):
        result.critical(f"{what} {value} {sign} {crit}")
    elif crossed(warn):
        result.warning(f"{what} {value} {sign} {warn}")


def _percent(used: int, limit: int) -> float | None:
    return None if limit is None or limit <= 0 else 100.0 * used / limit
