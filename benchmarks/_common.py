"""Shared helpers for the benchmark scripts: a server, timing, a table."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from natsjs_sync.testing import NatsServer


@contextlib.contextmanager
def server_url(url: str | None) -> Iterator[str]:
    """Use ``url`` or start a local nats-server with JetStream for the run."""
    if url:
        yield url
        return
    with NatsServer(jetstream=True) as server:
        yield server.url


def have_nats_py() -> bool:
    try:
        import nats  # noqa: F401
    except ImportError:
        return False
    return True


def median_of(runs: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(runs))


def paired(runs: int, ours: Callable[[], float], theirs: Callable[[], float] | None) -> tuple[float, float | None]:
    """Medians of ``runs`` runs of each, interleaved (ours, theirs, ours, ...).

    Interleaving spreads the machine's drift (other load, CPU frequency) over
    both sides instead of letting it land on one.
    """
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(ours())
        if theirs is not None:
            b.append(theirs())
    return statistics.median(a), (statistics.median(b) if b else None)


@dataclass
class Row:
    name: str
    unit: str
    ours: float
    theirs: float | None
    higher_is_better: bool = True
    target: float | None = None  # the ratio we aim for

    @property
    def ratio(self) -> float | None:
        if self.theirs is None or self.theirs == 0:
            return None
        return self.ours / self.theirs

    def verdict(self) -> str:
        if self.ratio is None or self.target is None:
            return ""
        ok = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
        sign = ">=" if self.higher_is_better else "<="
        return f"{'ok' if ok else 'MISS'} ({sign}{self.target:g}x)"


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "msg/s" or unit == "ops/s" or unit == "rows/s":
        return f"{value:,.0f}"
    if unit == "us":
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def print_table(title: str, rows: list[Row]) -> None:
    header = ("benchmark", "unit", "natsjs_sync", "nats-py", "ratio", "target")
    lines = [header]
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        lines.append((r.name, r.unit, fmt(r.ours, r.unit), fmt(r.theirs, r.unit), ratio, r.verdict()))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    print(f"\n{title}")
    for j, line in enumerate(lines):
        cells = zip(line, widths, strict=True)
        print("  ".join(str(c).ljust(w) if i in (0, 1, 5) else str(c).rjust(w) for i, (c, w) in enumerate(cells)))
        if j == 0:
            print("  ".join("-" * w for w in widths))
