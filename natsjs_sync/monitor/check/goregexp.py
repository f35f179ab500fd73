"""Regular expressions in Go's (RE2's) syntax, as the nats CLI's checks take them, run by Python's ``re``."""

from __future__ import annotations

import re
import warnings

#: RE2's POSIX classes (``[[:alpha:]]``) as ranges of a Python character set: ASCII, as RE2's.
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ", "cntrl": r"\x00-\x1f\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": r"!-/:-@\[-`{-~",
    "space": r"\t\n\v\f\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
#: RE2's ``\s``: no vertical tab, which Python's has.
_RE2_SPACE = r"\t\n\f\r "


def _go_regexp(pattern: str) -> re.Pattern[bytes]:
    r"""``pattern`` in Go's (RE2's) syntax, compiled for Python's ``re`` with the same meaning where
    the two differ in ways a monitoring pattern meets: ``$`` is the end of the text unless ``m``
    is set (Python's also matches before a final newline), ``\z``, ``\Q...\E``, ``(?<name>...)``,
    ``[[:alpha:]]``, and ``\s`` without the vertical tab.

    Raises:
        re.error: the pattern does not compile (``\pL`` and ``[[:^alpha:]]`` included).
    """
    out: list[str] = []
    i, n, multiline = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            escape = pattern[i + 1]
            if escape == "Q":  # a literal up to \E (or the end)
                end = pattern.find("\\E", i + 2)
                out.append(re.escape(pattern[i + 2:] if end < 0 else pattern[i + 2:end]))
                i = n if end < 0 else end + 2
                continue
            out.append({"z": r"\Z", "s": f"[{_RE2_SPACE}]", "S": f"[^{_RE2_SPACE}]"}.get(escape, c + escape))
            i += 2
        elif c == "[":
            i = _go_class(pattern, i, out)
        elif c == "$":
            out.append("$" if multiline else r"\Z")
            i += 1
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
        else:
            flags = re.match(r"\(\?([a-zA-Z]*)(?:-[a-zA-Z]*)?[:)]", pattern[i:]) if c == "(" else None
            multiline = multiline or bool(flags and "m" in flags.group(1))
            out.append(c)
            i += 1
    with warnings.catch_warnings():  # Python's hints about sets it may read differently one day
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile("".join(out).encode())


def _go_class(pattern: str, i: int, out: list[str]) -> int:
    """Translate the character class at ``pattern[i]`` (``[``) into ``out``; the index after it."""
    n, j = len(pattern), i + 1
    parts = ["["]
    if pattern.startswith("^", j):
        parts.append("^")
        j += 1
    if pattern.startswith("]", j):  # a leading ] is a member
        parts.append(r"\]")
        j += 1
    while j < n and pattern[j] != "]":
        if pattern.startswith("[:", j) and (end := pattern.find(":]", j + 2)) >= 0:
            name = pattern[j + 2:end]
            if name in _POSIX_CLASSES:
                parts.append(_POSIX_CLASSES[name])
                j = end + 2
                continue
            if name.startswith("^") and name[1:] in _POSIX_CLASSES:
                raise re.error(f"negated POSIX class [:{name}:] inside a class is not supported")
        if pattern[j] == "\\" and j + 1 < n:
            parts.append(_RE2_SPACE if pattern[j + 1] == "s" else pattern[j:j + 2])
            j += 2
            continue
        parts.append("\\" + pattern[j] if pattern[j] in "[&~|" else pattern[j])  # members in RE2
        j += 1
    if j >= n:
        raise re.error("missing closing ]")
    out.append("".join(parts) + "]")
    return j + 1
