"""How the nats CLI writes a check's numbers: Nagios perfdata, Go's JSON and float text, Prometheus
names and escapes, and the tables of the ``text`` format."""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence


def _nagios_perf(label: str, value: float, unit: str, warn: float, crit: float) -> str:
    """One perfdata item as the nats CLI writes it: whole numbers, but seconds to 4 decimals;
    thresholds only when set (0 is not set)."""
    def num(v: float) -> str:
        return f"{v:.4f}" if unit == "s" else f"{v:.0f}"

    if " " in label or "\t" in label:
        label = f"'{label}'"
    out = f"{label}={num(value)}{unit}"
    if warn or crit:
        out += f";{num(warn)}" if warn else ";"
        if crit:
            out += f";{num(crit)}"
    return out


def _json_number(v: float) -> int | float:
    """A whole float as an int: Go writes ``3``, not ``3.0``."""
    return int(v) if v.is_integer() else v


def _go_float(v: float) -> str:
    """A float as Go's ``strconv.FormatFloat(v, 'g', -1, 64)`` writes it (the Prometheus
    text format's numbers): the shortest digits, with an exponent below 1e-4 and from 1e6
    (``%g``'s rule for the shortest precision: ``1e+06``, ``1.5e-05``)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    sign, digits, exp = decimal.Decimal(repr(v)).normalize().as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    point = len(text) + exp  # the decimal point's place after the first digit's
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        e = point - 1
        body = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        body = "0." + "0" * -point + text
    elif point >= len(text):
        body = text + "0" * (point - len(text))
    else:
        body = text[:point] + "." + text[point:]
    return ("-" if sign else "") + body


def _metric_name(*parts: str) -> str:
    """Prometheus's ``BuildFQName``: the non-empty parts joined by ``_``."""
    return "_".join(p for p in parts if p)


def _prom_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _prom_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _human(v: float) -> str:
    """A number for people: thousands separated, at most 3 decimals."""
    return f"{v:,.0f}" if v.is_integer() else f"{v:,.3f}".rstrip("0").rstrip(".")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]

    def row(cells: Sequence[str]) -> str:
        return "│ " + " │ ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " │"

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    return "\n".join([rule("╭", "┬", "╮"), row(header), rule("├", "┼", "┤"), *map(row, rows),
                      rule("╰", "┴", "╯")])
