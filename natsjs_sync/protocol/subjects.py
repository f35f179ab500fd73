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

#: The server's default ``max_control_line``. A PUB or SUB line longer than
#: this makes the server close the connection, for every user of the client.
MAX_CONTROL_LINE = 4096
# Room on a control line for the operation, sid, sizes and separators.
_LINE_OVERHEAD = 40
#: The longest subject (in UTF-8 bytes) accepted alone on a line.
MAX_SUBJECT_BYTES = MAX_CONTROL_LINE - _LINE_OVERHEAD

#: Subjects validated for publishing recently, mapped to their UTF-8 bytes. A
#: publish loop uses a few subjects over and over; the cache turns validation
#: into a dict lookup. Bounded, and only ever cleared, never replaced: the
#: connections' outlets (``_core/outlet.py``) hold this very dict.
PUB_SUBJECTS: dict[str, bytes] = {}
_PUB_CACHE_MAX = 4096


def _utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8: the one place a user-given subject, reply or queue becomes bytes.

    Raises:
        BadSubjectError: ``text`` holds a lone surrogate (no UTF-8 form); nothing is sent.
    """
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise BadSubjectError(f"{what} {text!r} is not valid Unicode (a lone surrogate at {exc.start})") from None


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
        BadSubjectError: empty, whitespace, empty token, a wildcard or a lone surrogate.
    """
    try:
        return PUB_SUBJECTS[subject]
    except (KeyError, TypeError):
        pass
    if not (isinstance(subject, str) and _PLAIN_SUBJECT.fullmatch(subject)):
        _check_tokens(subject, "subject", wildcards=False)
    encoded = _utf8(subject, "subject")
    _check_length(encoded, subject)
    if len(PUB_SUBJECTS) >= _PUB_CACHE_MAX:
        PUB_SUBJECTS.clear()
    PUB_SUBJECTS[subject] = encoded
    return encoded


def trusted_subject(subject: str) -> bytes:
    """The bytes of a subject the server gave (a received message's reply
    subject, an ack subject), not validated again.

    The parser decodes bytes that are not UTF-8 to lone surrogates
    (``surrogateescape``, PEP 383); encoding the same way gives the bytes the
    server sent, so answering such a message reaches the subject it named.
    User-given subjects go through :func:`publish_subject`, which refuses them.
    """
    return subject.encode("utf-8", "surrogateescape")


def _check_length(encoded: bytes, subject: str) -> None:
    if len(encoded) > MAX_SUBJECT_BYTES:
        raise BadSubjectError(
            f"subject of {len(encoded)} bytes is too long (at most {MAX_SUBJECT_BYTES}: the server's control "
            f"line limit is {MAX_CONTROL_LINE}): {subject[:60]!r}..."
        )


def check_control_line(*parts: bytes) -> None:
    """Refuse a protocol line whose subject, reply or queue together exceed the server's limit.

    Raises:
        BadSubjectError: nothing is sent.
    """
    total = sum(len(p) for p in parts) + _LINE_OVERHEAD
    if total > MAX_CONTROL_LINE:
        raise BadSubjectError(
            f"subject, reply subject or queue too long together: the protocol line would be {total} bytes "
            f"(the server's control line limit is {MAX_CONTROL_LINE})"
        )


def validate_subject(subject: str) -> None:
    """Validate a publish subject (no wildcards)."""
    publish_subject(subject)


def validate_subscribe_subject(subject: str, queue: str | None = None) -> None:
    """Validate a subscription subject (``*`` and a trailing ``>`` allowed), and its
    line length together with ``queue``.

    Raises:
        BadSubjectError: an invalid subject or queue (see :func:`validate_queue`), or
            the two too long together for the server's control line.
    """
    _check_tokens(subject, "subject", wildcards=True)
    encoded = _utf8(subject, "subject")
    _check_length(encoded, subject)
    if queue is not None:
        check_control_line(encoded, _queue_bytes(queue))


def validate_queue(queue: str) -> None:
    """Validate a queue group name: non-empty, no whitespace, valid Unicode.

    Raises:
        BadSubjectError: the name cannot be sent.
    """
    _queue_bytes(queue)


def _queue_bytes(queue: str) -> bytes:
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue must be a str, not {type(queue).__name__}")
    if not queue:
        raise BadSubjectError("queue must not be empty")
    if _FORBIDDEN.intersection(queue):
        raise BadSubjectError(f"queue {queue!r} contains whitespace or a control character")
    return _utf8(queue, "queue")


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


def subject_covers(general: str, specific: str) -> bool:
    """True when every subject that ``specific`` matches is matched by ``general``
    (both may hold wildcards: ``a.>`` covers ``a.*.c``; ``a.*`` does not cover ``a.>``)."""
    gtoks = general.split(".")
    stoks = specific.split(".")
    for i, g in enumerate(gtoks):
        if g == ">":
            return len(stoks) > i  # one token or more, of any kind
        if i >= len(stoks) or stoks[i] == ">":
            return False
        if g != "*" and g != stoks[i]:
            return False  # a literal covers only itself (not a "*")
    return len(gtoks) == len(stoks)


def subjects_collide(a: str, b: str) -> bool:
    """True when some subject is matched by both (possibly wildcard) patterns: what
    makes the server refuse two filter subjects of one consumer as overlapping."""
    atoks = a.split(".")
    btoks = b.split(".")
    for i in range(max(len(atoks), len(btoks))):
        x = atoks[i] if i < len(atoks) else None
        y = btoks[i] if i < len(btoks) else None
        if x is None or y is None:
            return False  # one ended without ">": the other needs more tokens
        if x == ">" or y == ">":
            return True
        if x != "*" and y != "*" and x != y:
            return False
    return True
