"""The message check: the last message of a stream on a subject is there, recent, and matches."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from ...errors import MsgNotFoundError, NatsError
from .durations import _MAX_GO_DURATION, _age, _go_duration
from .goregexp import _go_regexp
from .metadata import _GO_INT
from .result import CheckResult

if TYPE_CHECKING:
    from ...client import Client

#: A subject without wildcards, as nats-server's ``IsValidLiteralSubject`` takes it: no empty token,
#: no white space, no token that is ``*`` or ``>`` (``a*`` is a literal token).
_LITERAL_SUBJECT = re.compile(r"(?:(?![*>](?:\.|$))[^\s.]+)(?:\.(?![*>](?:\.|$))[^\s.]+)*")


def check_message(
    nc: Client,
    stream: str,
    *,
    subject: str = ">",
    age_warn: float | None = None,
    age_critical: float | None = None,
    content: str = ".",
    body_timestamp: bool = False,
    timeout: float = 5.0,
) -> CheckResult:
    """The last message of a stream on a subject, as ``nats server check message`` sees it:
    there is one, it is recent enough, its body matches.

    Args:
        nc: a connected client of the stream's account.
        stream: the stream holding the message.
        subject: the subject (a literal one; a wildcard is CRITICAL, as in the nats CLI,
            whose default ``>`` this is).
        age_warn, age_critical: a message older than this many seconds is WARNING /
            CRITICAL (0 or ``None``: not checked).
        content: a regular expression the body must contain a match of.
        body_timestamp: the body is a Unix time in seconds, the message's age is taken
            from it instead of the time the stream stored it.
        timeout: seconds for the request.

    Returns:
        CRITICAL when there is no message, it cannot be read, it is too old or does not match.
    """
    result = CheckResult("message", "Stream Message")
    if not _LITERAL_SUBJECT.fullmatch(subject):
        result.critical(f"Check failed: invalid subject {json.dumps(subject)}")
        return result
    try:
        msg = nc.jetstream(timeout=timeout).stream(stream).get_last_msg_for_subject(subject)
    except MsgNotFoundError:
        result.critical("no message found")
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"msg load failed: {exc}")
        return result
    if body_timestamp:
        text = msg.data.strip()
        unix = int(text) if _GO_INT.fullmatch(text.decode("latin-1")) else None
        if unix is None or not -(2**63) <= unix < 2**63:  # Go's ParseInt(body, 10, 64)
            why = "is not a whole number" if unix is None else "is out of range"
            result.critical(f"invalid timestamp body: {text.decode('utf-8', 'replace')!r} {why}")
            return result
        # Any Unix time in range has an age, as Go's time.Since gives one (saturated at its
        # Duration's ±292 years): no calendar date is built, years past 9999 or before 1 included.
        age: float | None = max(-_MAX_GO_DURATION, min(time.time() - unix, _MAX_GO_DURATION))
    else:
        age = _age(msg.time) if msg.time is not None else None
    if age is None:
        result.critical("the message has no time")
        return result
    age = round(age, 3)
    result.perf("age", age, "s", age_warn, age_critical, description="The age of the message")
    result.perf("size", len(msg.data), "B", description="The size of the message")
    if age_critical and age > age_critical:
        result.critical(f"{_go_duration(age)} old")
    elif age_warn and age > age_warn:
        result.warning(f"{_go_duration(age)} old")
    if content:
        try:
            pattern = _go_regexp(content)
        except re.error as exc:
            result.critical(f"content regex compile failed: {exc}")
            return result
        if not pattern.search(msg.data):
            result.critical(f"does not match regex: {content}")
    result.ok_unless_bad(f"Valid message on {stream} > {subject}")
    return result
