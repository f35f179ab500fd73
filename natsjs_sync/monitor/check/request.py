"""The request check: a request-reply service answers, in time, with the expected body and headers."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from ...errors import NatsError
from .durations import _go_duration
from .goregexp import _go_regexp
from .result import CheckResult

if TYPE_CHECKING:
    from ...client import Client


def check_request(
    nc: Client,
    subject: str,
    *,
    payload: str = "",
    headers: dict[str, str] | None = None,
    match_payload: str | None = None,
    match_headers: dict[str, str] | None = None,
    response_warn: float | None = None,
    response_critical: float | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A request-reply service, as ``nats server check request`` sees it: it answers, in time,
    with the expected body and headers.

    Args:
        nc: a connected client.
        subject: where to send the request.
        payload: the request's body.
        headers: the request's headers.
        match_payload: a regular expression the reply's body must contain a match of.
        match_headers: headers the reply must have, with these values.
        response_warn, response_critical: an answer slower than this many seconds is
            WARNING / CRITICAL (0 or ``None``: not checked).
        timeout: seconds to wait for the answer.

    Returns:
        CRITICAL when nobody answers in ``timeout`` or the answer is not the one expected.
    """
    result = CheckResult("request", subject)
    if not subject:
        result.critical("no subject specified")
        return result
    started = time.perf_counter()
    try:
        reply = nc.request(subject, payload.encode(), timeout=timeout, headers=headers or None)
        error: Exception | None = None
    except (NatsError, OSError, TimeoutError) as exc:
        error = exc
    took = round(time.perf_counter() - started, 3)
    result.perf("time", took, "s", response_warn, response_critical, description="How long the request took")
    if error is not None:
        result.critical(f"could not send request: {error}")
        return result
    if match_payload:
        try:
            pattern = _go_regexp(match_payload)
        except re.error as exc:
            result.critical(f"content regex compile failed: {exc}")
            return result
        if not pattern.search(reply.data):
            result.critical("response does not match regexp")
    for key, want in (match_headers or {}).items():
        got = (reply.headers.get(key) if reply.headers else None) or ""
        if got != want:
            result.critical(f"invalid header {json.dumps(key)} = {json.dumps(got)}")
    if response_critical and took > response_critical:
        result.critical(f"response took {_go_duration(took)}")
    elif response_warn and took > response_warn:
        result.warning(f"response took {_go_duration(took)}")
    result.ok_unless_bad("Valid response")
    return result
