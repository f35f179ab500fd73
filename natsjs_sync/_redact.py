"""Masking secrets: the one function through which every URL, context, setting
and error message this package shows passes.

:func:`redact` replaces, in any text, what is recognisably a secret:

- the password of a URL (``nats://alice:s3cret@host`` -> ``nats://alice:***@host``),
  a token in its place (``nats://s3cret@host`` -> ``nats://***@host``), with or
  without the scheme (``alice:s3cret@host:4222``);
- nkey seeds (``SU...``, ``SA...``, 58 base32 characters), JWTs (``eyJ...``) and
  what the blocks of a ``.creds`` file hold;
- inline ``data:`` payloads (a context's embedded credentials);
- any value the caller knows to be secret (a password or token given on its
  own, which no pattern can recognise).

It is idempotent and never raises. User names, host names, paths and public
nkeys stay as they are: they say which account and server a message is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "redact"]

#: What a secret is replaced with.
MASK = "***"

# A URL's user info: everything between '//' and the last '@' of the URL (a password may
# hold an '@' or a '/'); a URL ends at white space, a quote or a comma (a server list).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s'\",]*)@")
# 'user:password@host' without a scheme (the servers option takes 'host:port' forms).
_BARE_USERINFO = re.compile(r"(?<![\w.%+/:-])(?P<user>[\w.%+-]+):(?P<password>[^\s'\",@/]+)@(?=[\w\[])")
# An nkey seed: 'S', its type, then base32 to 58 characters (after an escaped line end too: '\\nSU...').
_SEED = re.compile(r"(?<![A-Z2-7])S[A-Z2-7]{57}(?![A-Z2-7])")
# The content of a block of a .creds file (a JWT, a seed), whatever it holds.
_CREDS_BLOCK = re.compile(r"(?P<begin>-{3,}[^-\n]*BEGIN[^-\n]*-{3,})(?P<content>.*?)(?P<end>-{3,}[^-\n]*END)",
                          re.DOTALL)
# A JWT (NATS JWTs and any other): three base64url parts, the first a JSON object ('eyJ').
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# An inline RFC 2397 payload, as the nats CLI embeds credentials in a context.
_DATA = re.compile(r"\bdata:(?P<header>[^,\s'\"]*),[A-Za-z0-9+/=_-]+")


def _userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match["userinfo"].partition(":")
    # 'user:password@' keeps the user; a lone 'token@' is a secret whole.
    return match["scheme"] + (f"{user}:{MASK}" if colon else MASK) + "@"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret in it masked.

    Args:
        text: any text: a URL or a list of them, a message, a log line, a repr.
        secrets: values known to be secret (a password, a token ...), masked
            wherever they appear; ``None`` and empty values are ignored.

    Returns:
        The text with secrets replaced by :data:`MASK`.
    """
    if not isinstance(text, str):
        text = str(text)
    for secret in sorted({s for s in secrets if s and isinstance(s, str)}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _CREDS_BLOCK.sub(lambda m: f"{m['begin']}{MASK}{m['end']}", text)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _BARE_USERINFO.sub(lambda m: f"{m['user']}:{MASK}@", text)
    text = _DATA.sub(lambda m: f"data:{m['header']},{MASK}", text)
    text = _JWT.sub(MASK, text)
    return _SEED.sub(MASK, text)
