"""The thresholds a stream or consumer check reads from the asset's metadata (``io.nats.monitor.*``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .durations import metadata_duration

if TYPE_CHECKING:
    from .result import CheckResult

#: The metadata keys the nats CLI reads a stream check's thresholds from (``io.nats.monitor.*``)
#: and the :func:`check_stream` parameter each one sets (an argument given wins).
STREAM_METADATA: dict[str, str] = {
    "io.nats.monitor.lag-critical": "lag_critical",
    "io.nats.monitor.seen-critical": "seen_critical",
    "io.nats.monitor.min-sources": "min_sources",
    "io.nats.monitor.max-sources": "max_sources",
    "io.nats.monitor.peer-expect": "peer_expect",
    "io.nats.monitor.peer-lag-critical": "peer_lag_critical",
    "io.nats.monitor.peer-seen-critical": "peer_seen_critical",
    "io.nats.monitor.msgs-warn": "msgs_warn",
    "io.nats.monitor.msgs-critical": "msgs_critical",
    "io.nats.monitor.subjects-warn": "subjects_warn",
    "io.nats.monitor.subjects-critical": "subjects_critical",
}
#: The metadata keys the nats CLI reads a consumer check's thresholds from, and the
#: :func:`check_consumer` parameter each one sets (an argument given wins).
CONSUMER_METADATA: dict[str, str] = {
    "io.nats.monitor.outstanding-ack-critical": "outstanding_ack_critical",
    "io.nats.monitor.waiting-critical": "waiting_critical",
    "io.nats.monitor.unprocessed-critical": "unprocessed_critical",
    "io.nats.monitor.last-delivery-critical": "last_delivery_critical",
    "io.nats.monitor.last-ack-critical": "last_ack_critical",
    "io.nats.monitor.redelivery-critical": "redelivery_critical",
    "io.nats.monitor.pinned": "pinned",
}
_DURATION_PARAMS = {"seen_critical", "peer_seen_critical", "last_delivery_critical", "last_ack_critical"}
_GO_INT = re.compile(r"[+-]?[0-9]+")


_GO_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def _from_metadata(result: CheckResult, metadata: dict[str, str] | None, keys: dict[str, str],
                   given: dict[str, Any]) -> dict[str, Any] | None:
    """``given`` with the thresholds not given (``None``) taken from ``metadata``; ``None`` (and a
    CRITICAL finding) when a value there cannot be read."""
    values = dict(given)
    for key, param in keys.items():
        text = (metadata or {}).get(key)
        if text is None or values.get(param) is not None:
            continue
        try:
            if param in _DURATION_PARAMS:
                values[param] = metadata_duration(text)
            elif param == "pinned":
                values[param] = _GO_BOOL[text]
            elif _GO_INT.fullmatch(text):
                values[param] = int(text)
            else:
                raise ValueError(f"invalid number {text!r}")
        except (KeyError, ValueError) as exc:
            result.critical(f"could not configure based on metadata: {key}: {exc}")
            return None
    return values
