"""Masking secrets: the one function through which every URL, context, setting
and error message this package shows passes.

:func:`redact` replaces, in any text, what is recognisably a secret:

- the password of a URL (``nats://alice:s3cret@host`` -> ``nats://alice:***@host``),
  a token in its place (``nats://s3cret@host`` -> ``nats://***@host``), with or
  without the scheme (``alice:s3cret@host:4222``), whatever the password holds
  (``,``, white space, quotes, ``@``, ``:``, ``/``, percent-escapes): the whole
  user info, up to the last ``@`` of each server URL, is replaced;
- nkey seeds (``SU...``, ``SA...``, 58 base32 characters), JWTs (``eyJ...``) and
  what the blocks of a ``.creds`` file hold;
- inline ``data:`` payloads (a context's embedded credentials);
- any value the caller knows to be secret (a password or token given on its
  own, which no pattern can recognise), also where ``repr`` or JSON escaped it
  or a URL percent-encoded it; only where it stands whole, delimited (by white
  space, quotes, ``=``, ``,``, brackets or the text's ends), never inside other
  text: a password ``a`` masks the value ``a`` of ``--password a``, not each
  letter a of the message.

A URL quoted in a message (``'nats://a:pa ss@h'``, as ``repr`` and argparse
quote it) is masked as a whole, white space and commas included.
:func:`redact_urls` masks a value known to be a server URL or a comma-separated
list of them (a context's ``url``, a ``servers`` setting), where even a
schemeless ``token@host`` is a URL.

It is idempotent and never raises. User names, host names, paths and public
nkeys stay as they are: they say which account and server a message is about.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["MASK", "decoded", "mask_values", "redact", "redact_urls", "split_server_urls", "without_userinfo"]

#: What a secret is replaced with.
MASK = "***"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# A URL's authority when it holds no user info: a host name or an [IPv6] literal, and a port of digits.
_HOST_PORT = re.compile(r"(?:\[[^\]]*\]|[^\s:@/\[\]]*)(?::\d+)?")
# A single- or double-quoted piece of a message on one line (backslash escapes as repr writes them);
# an apostrophe inside a word ("can't") opens none.
_QUOTED = re.compile(r"""(?<!\w)(?P<q>['"])(?P<body>(?:\\.|(?!(?P=q))[^\\\n])*)(?P=q)""")
_WORD = re.compile(r"\S+")
# What a user name shown before ':***@' never holds.
_ODD_USER = re.compile(r"[\s,'\"@]")
#: Words after a URL cut short by white space that may still belong to its password.
_MAX_SPACES = 8
# An nkey seed: 'S', its type, then base32 to 58 characters (after an escaped line end too: '\\nSU...').
_SEED = re.compile(r"(?<![A-Z2-7])S[A-Z2-7]{57}(?![A-Z2-7])")
# The content of a block of a .creds file (a JWT, a seed), whatever it holds.
_CREDS_BLOCK = re.compile(r"(?P<begin>-{3,}[^-\n]*BEGIN[^-\n]*-{3,})(?P<content>.*?)(?P<end>-{3,}[^-\n]*END)",
                          re.DOTALL)
# A JWT (NATS JWTs and any other): three base64url parts, the first a JSON object ('eyJ').
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# An inline RFC 2397 payload, as the nats CLI embeds credentials in a context; base64 as the
# `base64` tool prints it may be wrapped over lines (or '\n' escapes of them).
_DATA = re.compile(r"\bdata:(?P<header>[^,\s'\"]*),[A-Za-z0-9+/=_-]+(?:(?:\r?\n|\\r|\\n)+[A-Za-z0-9+/=_-]+)*")


def _scheme_end(text: str) -> int:
    """Where the part after a URL's ``scheme://`` starts in ``text`` (0: it has none)."""
    match = _SCHEME.search(text)
    return match.end() if match else 0


def _is_host_port(piece: str) -> bool:
    """``piece`` is a whole URL or ``host:port`` without user info (so a ',' after it ends it)."""
    rest = piece.strip()[_scheme_end(piece.strip()):]
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return _HOST_PORT.fullmatch(authority) is not None


def split_server_urls(urls: str) -> list[str]:
    """A comma-separated list of server URLs, split as a password holding a ``,`` needs.

    A piece without ``@`` that cannot end a URL (``nats://alice:pa`` of
    ``nats://alice:pa,ss@host``), or a URL followed at once by a schemeless
    piece with user info (``nats://tok,en@host``), runs on to the first piece
    with an ``@``. Everything else splits at each comma, as the other clients do.

    Args:
        urls: the list (a single URL is a list of one).

    Returns:
        The URLs, white space around each kept.
    """
    pieces = urls.split(",")
    out: list[str] = []
    i = 0
    while i < len(pieces):
        end = i
        if "@" not in pieces[i]:
            for k in range(i + 1, len(pieces)):
                if _scheme_end(pieces[k]):
                    break  # a new URL starts: nothing before it belongs to a password
                if "@" in pieces[k]:
                    if not _is_host_port(pieces[i]) or (k == i + 1 and _scheme_end(pieces[i])):
                        end = k
                    break
        out.append(",".join(pieces[i:end + 1]))
        i = end + 1
    return out


def _mask_url(url: str, drop: bool) -> str:
    """One URL with its user info masked (``user:***@``, ``***@``), or removed with ``drop``."""
    start, at = _scheme_end(url), url.rfind("@")
    if at < start:
        return url
    if drop:
        return url[:start] + url[at + 1:]
    user, colon, _ = url[start:at].partition(":")
    if colon and _ODD_USER.search(user):
        colon = ""  # no user name holds these: a token or password with a ':' in it, masked whole
    return url[:start] + (f"{user}:{MASK}" if colon else MASK) + url[at:]


def redact_urls(urls: str, drop: bool = False) -> str:
    """A server URL, or a comma-separated list of them, with every password masked.

    Args:
        urls: the URL(s); a schemeless ``token@host`` counts as a URL here.
        drop: remove the user info whole (``nats://host``) instead of masking it.

    Returns:
        The list with each URL's user info masked: ``user:***@`` or ``***@``.
    """
    return ",".join(_mask_url(url, drop) for url in split_server_urls(urls))


def _url_like(text: str) -> bool:
    """``text`` holds user info of a URL: an ``@`` after a ``scheme://``, or a schemeless
    ``user:password@`` (a schemeless ``name@host`` may be a mail address: left alone)."""
    at = text.rfind("@")
    return at >= 0 and (0 < _scheme_end(text) <= at or ":" in text[:at])


def _user_and_password(word: str) -> bool:
    """``word`` is a schemeless ``user:password@host`` of its own (a plain user name before the ':')."""
    user, colon, _ = word[:word.rfind("@")].partition(":")
    return bool(colon) and not _ODD_USER.search(user)


def _cut_short(word: str, next_word: str) -> bool:
    """``word`` ends with a URL whose user info a space may have cut: after its last
    ``scheme://`` no ``@``, and either pieces that are no list of ``host:port`` or a
    next word with an ``@`` that is no URL of its own (``nats://tok en@host``)."""
    starts = [match.start() for match in _SCHEME.finditer(word)]
    if not starts:
        return False
    tail = word[starts[-1]:].rstrip(".;)")
    if "@" in tail:
        return False
    if "@" in next_word and not _starts_url(next_word) and not _user_and_password(next_word):
        return True
    return not all(_is_host_port(piece) for piece in tail.split(",") if piece)


def _starts_url(word: str) -> bool:
    """A new URL starts in ``word`` before any ``@`` of it (so no password runs on into it)."""
    match = _SCHEME.search(word)
    return match is not None and ("@" not in word or match.start() < word.index("@"))


def _run_on(words: list[re.Match[str]], text: str, first: int) -> int:
    """The last word of the URL(s) starting at word ``first``: while the text so far ends with
    a URL cut short, it runs on to the next word with an ``@`` (within a few words)."""
    end = first
    while end + 1 < len(words):
        span = text[words[first].start():words[end].end()]
        if not _cut_short(span, words[end + 1].group()):
            break
        for k in range(end + 1, min(end + 1 + _MAX_SPACES, len(words))):
            if _starts_url(words[k].group()):
                return end
            if "@" in words[k].group():
                end = k
                break
        else:
            return end
    return end


def _mask_words(text: str, drop: bool) -> str:
    """Mask the URLs of free text, word by word; a URL cut short by white space (its
    authority no ``host:port``) runs on to the next word with an ``@``."""
    words = list(_WORD.finditer(text))
    out: list[str] = []
    done = 0
    i = 0
    while i < len(words):
        end = _run_on(words, text, i)
        start, stop = words[i].start(), words[end].end()
        span = text[start:stop]
        if _url_like(span):
            out.append(text[done:start] + redact_urls(span, drop))
            done = stop
        i = end + 1
    return "".join(out) + text[done:]


def _mask_quoted(text: str, drop: bool) -> str:
    def quoted(match: re.Match[str]) -> str:
        body = match["body"]
        return match["q"] + (redact_urls(body, drop) if _url_like(body) else body) + match["q"]

    return _QUOTED.sub(quoted, text)


def _written_forms(secrets: Iterable[str | None]) -> set[str]:
    """Each secret as it may be written in a message: as it is, inside ``repr`` quotes or a JSON
    string (escaped), and in a URL (percent-encoded)."""
    forms: set[str] = set()
    for secret in secrets:
        if secret and isinstance(secret, str):
            forms.update((secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe="")))
    return forms


# What stands before a known secret value where it is whole: no character of a word, a path, a
# host or an escape (so 'a' in 'banana', 'x-a' or '/tmp/a' is no value 'a'); after it the same, but
# a '.' that ends a sentence.
_BEFORE_VALUE = r"(?<![\w\-+%~/@.])"
_AFTER_VALUE = r"(?![\w\-+%~/@]|\.\w)"


def mask_values(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each value of ``secrets`` masked where it stands whole, delimited (see
    :func:`redact`, whose first step this is); nothing else is masked.

    Args:
        text: any text.
        secrets: values known to be secret; ``None`` and empty values are ignored.
    """
    for form in sorted(_written_forms(secrets), key=len, reverse=True):
        text = re.sub(_BEFORE_VALUE + re.escape(form) + _AFTER_VALUE, MASK, text)
    return text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret in it masked.

    Args:
        text: any text: a URL or a list of them, a message, a log line, a repr.
        secrets: values known to be secret (a password, a token ...), masked
            wherever one stands whole (never inside other text); ``None`` and
            empty values are ignored.

    Returns:
        The text with secrets replaced by :data:`MASK`.
    """
    if not isinstance(text, str):
        text = str(text)
    text = mask_values(text, secrets)
    text = _CREDS_BLOCK.sub(lambda m: f"{m['begin']}{MASK}{m['end']}", text)
    text = _mask_words(_mask_quoted(text, drop=False), drop=False)
    text = _DATA.sub(lambda m: f"data:{m['header']},{MASK}", text)
    text = _JWT.sub(MASK, text)
    return _SEED.sub(MASK, text)


def without_userinfo(text: str) -> str:
    """``text`` (a URL, a list of them, or a message) with the user info of its URLs removed:
    ``nats://alice:s3cret@host`` -> ``nats://host``; for lines that end up in dashboards."""
    return _mask_words(_mask_quoted(text, drop=True), drop=True)


def decoded(data: bytes) -> str | None:
    """``data`` as UTF-8 text, or ``None`` when it is none. Never raises: a UnicodeDecodeError
    holds all of ``data`` (a seed or a context file's passwords, in its ``repr``), and raised in
    or from a handler of one, an error keeps it as its context."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None
