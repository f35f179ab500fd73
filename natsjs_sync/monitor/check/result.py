"""What a check found (:class:`CheckResult`) and its :class:`Status`, rendered as the nats CLI's
``server check --format`` renders its own."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from typing import Any

from .render import _go_float, _human, _json_number, _metric_name, _nagios_perf, _prom_help, _prom_label, _table


class Status(enum.IntEnum):
    """A Nagios status; its value is the exit code of the check."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


#: The output formats of a check, as ``nats server check --format`` names them.
FORMATS = ("nagios", "json", "prometheus", "text")
#: The prefix of every Prometheus metric name (``nats server check --namespace``'s default).
DEFAULT_NAMESPACE = "nats_server_check"


class CheckResult:
    """What one check found: messages at each level and performance data. Not thread-safe.

    The status is the worst level any message was added at (OK when there is none). The
    result renders as the nats CLI's ``server check`` renders its own (:meth:`render`), so
    what reads one (Nagios, a JSON parser, a Prometheus textfile collector) reads the other.

    Attributes:
        check: the check suite, as the nats CLI names it (``"connections"``, ``"stream"``,
            ``"kv"``, ...): the middle of every Prometheus metric name.
        name: which one (a stream's name, ``"Connection"``), as the nats CLI names it: the
            first word after the status in Nagios text, ``check_name`` in JSON, the ``item``
            label in Prometheus; ``None``: the suite's name.
        messages: ``(status, text)`` in the order they were found.
        perfdata: ``(label, value, unit, warn, crit)`` for the performance data (a threshold
            ``None`` or 0 is not set, as in the nats CLI).
        help: a description of some of the perfdata labels (the Prometheus ``HELP`` text).
    """

    def __init__(self, check: str, name: str | None = None):
        self.check = check
        self.name = name
        self.messages: list[tuple[Status, str]] = []
        self.perfdata: list[tuple[str, float, str, float | None, float | None]] = []
        self.help: dict[str, str] = {}

    @property
    def status(self) -> Status:
        """The worst status found (OK when nothing was added)."""
        return max((s for s, _ in self.messages), default=Status.OK)

    def add(self, status: Status, text: str) -> None:
        """Record a finding at ``status``."""
        self.messages.append((status, text))

    def ok(self, text: str) -> None:
        """Record a finding at OK."""
        self.add(Status.OK, text)

    def warning(self, text: str) -> None:
        """Record a finding at WARNING."""
        self.add(Status.WARNING, text)

    def critical(self, text: str) -> None:
        """Record a finding at CRITICAL."""
        self.add(Status.CRITICAL, text)

    def unknown(self, text: str) -> None:
        """Record a finding at UNKNOWN."""
        self.add(Status.UNKNOWN, text)

    def ok_unless_bad(self, text: str) -> None:
        """Record a finding at OK when no warning or critical one was recorded before."""
        if self.status == Status.OK:
            self.ok(text)

    def perf(self, label: str, value: float, unit: str = "", warn: float | None = None,
             crit: float | None = None, description: str | None = None) -> None:
        """Record a measurement for the performance data (``label=value[unit];warn;crit``);
        ``description`` is its Prometheus ``HELP`` text."""
        self.perfdata.append((label, value, unit, warn, crit))
        if description:
            self.help[label] = description

    def _texts(self, status: Status) -> list[str]:
        return [t for s, t in self.messages if s == status]

    @property
    def _item(self) -> str:
        return self.check if self.name is None else self.name

    def line(self) -> str:
        """The Nagios plugin output: ``render("nagios")``."""
        return self.render("nagios")

    def render(self, fmt: str = "nagios", namespace: str = DEFAULT_NAMESPACE) -> str:
        """The result as the nats CLI's ``server check --format`` renders it.

        - ``nagios``: one line, ``STATUS NAME Crit:... Warn:... OK:... | perfdata``
          (``Unknown:...`` for a check that could not run);
        - ``json``: ``status``, ``check_suite``, ``check_name``, ``warning``, ``critical``,
          ``ok`` (each left out when empty; ``unknown`` too), ``perf_data`` (``name``,
          ``value``, ``warning``, ``critical``, ``unit``);
        - ``prometheus``: one gauge per perfdata label, ``<namespace>_<check>_<label>{item="NAME"}``,
          and ``<namespace>_<check>_status_code{item="NAME",status="OK"}`` (the exit code),
          in the text exposition format, sorted by name;
        - ``text``: for people: the status, a table of the findings and one of the metrics.

        Raises:
            ValueError: an unknown format.
        """
        if fmt == "nagios":
            return self._nagios()
        if fmt == "json":
            return self._json()
        if fmt == "prometheus":
            return self._prometheus(namespace)
        if fmt == "text":
            return self._text()
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")

    def exit_code(self, fmt: str = "nagios") -> int:
        """The process's exit code for ``fmt``: the Nagios code of the status, except in
        Prometheus format, always 0 (a scraper reads the status from the ``status_code`` metric)."""
        return 0 if fmt == "prometheus" else int(self.status)

    def _perf_items(self) -> list[tuple[str, float, str, float, float]]:
        return [(label, float(value), unit, float(w or 0), float(c or 0))
                for label, value, unit, w, c in self.perfdata]

    def _nagios(self) -> str:
        parts = [self._item]
        parts += [f"Unknown:{t}" for t in self._texts(Status.UNKNOWN)]
        parts += [f"Crit:{t}" for t in self._texts(Status.CRITICAL)]
        parts += [f"Warn:{t}" for t in self._texts(Status.WARNING)]
        parts += [f"OK:{t}" for t in self._texts(Status.OK)]
        out = f"{self.status.name} {' '.join(parts)}"
        if self.perfdata:
            out += " | " + " ".join(_nagios_perf(*item) for item in self._perf_items())
        return out

    def _json(self) -> str:
        doc: dict[str, Any] = {"status": self.status.name, "check_suite": self.check, "check_name": self._item}
        for key, status in (("warning", Status.WARNING), ("critical", Status.CRITICAL), ("ok", Status.OK),
                            ("unknown", Status.UNKNOWN)):
            texts = self._texts(status)
            if texts:
                doc[key] = texts
        doc["perf_data"] = [
            {"name": label, "value": _json_number(value), "warning": _json_number(w), "critical": _json_number(c),
             **({"unit": unit} if unit else {})}
            for label, value, unit, w, c in self._perf_items()
        ]
        # As Go's encoding/json writes it: <, >, & and the line separators escaped (a parser reads the
        # same text either way).
        text = json.dumps(doc, indent=2, ensure_ascii=False)
        for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                              ("\u2029", "\\u2029")):
            text = text.replace(char, escaped)
        return text

    def _prometheus(self, namespace: str) -> str:
        item = _prom_label(self._item.replace('"', "."))
        families: dict[str, tuple[str, list[str]]] = {}
        for label, value, _unit, _w, _c in self._perf_items():
            name = _metric_name(namespace, self.check, label)
            help_text = self.help.get(label) or f"Data about the NATS CLI check {self.check}"
            families.setdefault(name, (help_text, []))[1].append(f'{name}{{item="{item}"}} {_go_float(value)}')
        name = _metric_name(namespace, self.check, "status_code")
        families[name] = (f"Nagios compatible status code for {self.check}",
                          [f'{name}{{item="{item}",status="{self.status.name}"}} {int(self.status)}'])
        out = []
        for name in sorted(families):
            help_text, samples = families[name]
            out.append(f"# HELP {name} {_prom_help(help_text)}")
            out.append(f"# TYPE {name} gauge")
            out.extend(samples)
        return "\n".join(out) + "\n"

    def _text(self) -> str:
        out = [f"{self._item}: {self.status.name}", ""]
        rows = [(s.name.capitalize() if s != Status.OK else "OK", t)
                for status in (Status.OK, Status.WARNING, Status.CRITICAL, Status.UNKNOWN)
                for s, t in self.messages if s == status]
        if rows:
            out += ["Status Detail", "", _table(("Status", "Message"), rows), ""]
        if self.perfdata:
            metrics = [(label, _human(value), unit, _human(c) if c else "", _human(w) if w else "",
                        self.help.get(label, "")) for label, value, unit, w, c in self._perf_items()]
            out += ["Check Metrics", "", _table(("Metric", "Value", "Unit", "Critical Threshold",
                                                 "Warning Threshold", "Description"), metrics), ""]
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<CheckResult {self.line()!r}>"


def worst(results: Iterable[CheckResult]) -> Status:
    """The worst status of several results (OK for none)."""
    return max((r.status for r in results), default=Status.OK)
