"""Subject and queue-name validation (no I/O).

NATS subjects are dot-separated tokens. A token is never empty and never holds
whitespace. ``*`` matches one token and ``>`` matches the rest; both are only
wildcards when they stand alone as a token, and ``>`` only as the last token.
Publishing to a wildcard subject is refused by this library because the server
would deliver it to nobody who expects it.
"""

from __future__ import annotations

import re

from ..errors import BadSubjectError

# Control characters and the space are never valid in a subject token: the
# server splits control lines on them.
_FORBIDDEN = frozenset(" \t\r\n\f\v\0")

# Valid subjects seen recently, mapped to their UTF-8 bytes. A publish loop uses
# a few subjects over and over; the cache turns validation into a dict lookup.
_PUB_CACHE: dict[str, bytes] = {}
_PUB_CACHE_MAX = 4096


def _check_tokens(subject: str, what: str, wildcards: bool) -> None:
    if not isinstance(subject, str):
        raise BadSubjectError(f"{what} must be a str, not {type(subject).__name__}")
    if not subject:
        raise BadSubjectError(f"{what} must not be empty")
    if _FORBIDDEN.intersection(subject):
        raise BadSubjectError(f"{what} {subject!r} contains whitespace or a control character")
    tokens = subject.split(".")
    last = len(tokens) - 1
    for i, tok in enumerate(tokens):
        if not tok:
            raise BadSubjectError(f"{what} {subject!r} has an empty token")
        if tok == ">":
            if not wildcards:
                raise BadSubjectError(f"cannot publish to wildcard subject {subject!r}")
            if i != last:
                raise BadSubjectError(f"{what} {subject!r}: '>' must be the last token")
        elif tok == "*":
            if not wildcards:
                raise BadSubjectError(f"cannot publish to wildcard subject {subject!r}")


# Dot-separated non-empty tokens without whitespace or wildcard characters: the
# shape of nearly every subject, checked in one C-level match. Anything else
# (a ``*`` or ``>`` inside a token is legal) goes through the token walk.
_PLAIN_SUBJECT = re.compile(r"[^\s.*>\0]+(?:\.[^\s.*>\0]+)*")


def publish_subject(subject: str) -> bytes:
    """Validate a subject for publishing and return its bytes.

    Raises:
        BadSubjectError: empty, whitespace, empty token or a wildcard.
    """
    try:
        return _PUB_CACHE[subject]
    except (KeyError, TypeError):
        pass
    if not (isinstance(subject, str) and _PLAIN_SUBJECT.fullmatch(subject)):
        _check_tokens(subject, "subject", wildcards=False)
    encoded = subject.encode()
    if len(_PUB_CACHE) >= _PUB_CACHE_MAX:
        _PUB_CACHE.clear()
    _PUB_CACHE[subject] = encoded
    return encoded


def validate_subject(subject: str) -> None:
    """Validate a publish subject (no wildcards)."""
    publish_subject(subject)


def validate_subscribe_subject(subject: str) -> None:
    """Validate a subscription subject (``*`` and a trailing ``>`` allowed)."""
    _check_tokens(subject, "subject", wildcards=True)


def validate_queue(queue: str) -> None:
    """Validate a queue group name: non-empty, no whitespace."""
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue must be a str, not {type(queue).__name__}")
    if not queue:
        raise BadSubjectError("queue must not be empty")
    if _FORBIDDEN.intersection(queue):
        raise BadSubjectError(f"queue {queue!r} contains whitespace or a control character")


def subject_matches(pattern: str, subject: str) -> bool:
    """True when ``subject`` is matched by the (possibly wildcard) ``pattern``."""
    ptoks = pattern.split(".")
    stoks = subject.split(".")
    for i, p in enumerate(ptoks):
        if p == ">":
            return len(stoks) > i
        if i >= len(stoks):
            return False
        if p != "*" and p != stoks[i]:
            return False
    return len(ptoks) == len(stoks)
