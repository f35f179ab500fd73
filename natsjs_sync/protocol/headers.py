"""NATS message headers: ``NATS/1.0 [status [description]]`` plus MIME-style lines.

Keys keep the case they were sent with and lookups are case-sensitive, as in
the server and the Go client. A key may carry several values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Union

from ..errors import BadHeaderError, ProtocolError
from ._compiled import twin

HEADER_LINE = b"NATS/1.0"
_CRLF = b"\r\n"

# Status codes the server and JetStream use in headers-only messages.
STATUS_CONTROL = 100  # idle heartbeat / flow control
STATUS_BAD_REQUEST = 400
STATUS_NOT_FOUND = 404  # no messages
STATUS_TIMEOUT = 408  # pull request expired
STATUS_CONFLICT = 409  # consumer deleted, leadership change, limits exceeded
STATUS_LOCKED = 423  # pinned consumer id mismatch
STATUS_NO_RESPONDERS = 503

HeaderValue = Union[str, Sequence[str]]
HeadersInput = Mapping[str, HeaderValue]


class Headers(dict):  # type: ignore[type-arg]
    """A ``dict`` of header key -> first value, keeping every value of repeated keys.

    ``headers["K"]`` gives the first value, :meth:`get_all` gives all of them,
    :meth:`add` appends one. Assigning ``headers["K"] = v`` replaces every value.
    Not thread-safe for mutation (like ``dict``).
    """

    __slots__ = ("_extra",)

    def __init__(self, *args: object, **kwargs: str) -> None:
        super().__init__()
        self._extra: dict[str, list[str]] = {}
        if len(args) == 1 and not kwargs and isinstance(args[0], Headers):
            for key, value in args[0].items_all():  # every value of a repeated key, not only the first
                self.add(key, value)
            return
        for key, value in dict(*args, **kwargs).items():
            if isinstance(value, str):
                self[key] = value
            else:
                for v in value:
                    self.add(key, v)

    def add(self, key: str, value: str) -> None:
        """Append a value to ``key``."""
        if key in self:
            self._extra.setdefault(key, []).append(value)
        else:
            dict.__setitem__(self, key, value)

    def get_all(self, key: str) -> list[str]:
        """Every value of ``key`` in the order received (empty when absent)."""
        if key not in self:
            return []
        return [dict.__getitem__(self, key), *self._extra.get(key, ())]

    def __setitem__(self, key: str, value: str) -> None:
        self._extra.pop(key, None)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self._extra.pop(key, None)
        dict.__delitem__(self, key)

    def items_all(self) -> Iterable[tuple[str, str]]:
        """Every ``(key, value)`` pair, repeated keys included."""
        for key in self:
            for value in self.get_all(key):
                yield key, value

    def __repr__(self) -> str:
        return f"Headers({list(self.items_all())!r})"


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise BadHeaderError(f"header key must be a non-empty str, got {key!r}")
    if key[0] in " \t" or key[-1] in " \t":
        # Padding around a key is dropped, as nats-py drops it; blanks inside are refused.
        stripped = key.strip(" \t")
        if not stripped:
            raise BadHeaderError(f"header key must be a non-empty str, got {key!r}")
        key = stripped
    for ch in key:
        if ch == ":" or ch <= " " or ch == "\x7f":
            raise BadHeaderError(f"header key {key!r} contains ':', whitespace or a control character")
    return key


def _check_value(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadHeaderError(f"header {key!r} value must be a str, got {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise BadHeaderError(f"header {key!r} value contains CR or LF")
    return value


#: Blocks of plain dicts of text met lately, by their pairs: a program that
#: publishes the same headers again and again (a content type) gets the block
#: without the checks and formatting, which cost more than the rest of a publish.
#: Only small blocks are kept (a large one costs little next to its own copy),
#: so the cache holds at most about ``_BLOCKS_MAX * 2 * _BLOCK_BYTES_MAX`` bytes.
_BLOCKS: dict[tuple[tuple[str, str], ...], bytes] = {}
_BLOCKS_MAX = 256
_PAIRS_MAX = 8
_BLOCK_BYTES_MAX = 1024


def cached_block_py(headers: object, blocks: dict[tuple[tuple[str, str], ...], bytes]) -> bytes | None:
    """The block ``blocks`` holds for ``headers``, when that is a plain dict of 1 to
    ``_PAIRS_MAX`` pairs of exact ``str`` (its pairs, in order, are the key); else ``None``.

    Any other value (a number, a list, a ``str`` subclass) may compare equal to a
    ``str`` and format differently: such pairs are never looked up. The compiled
    twin is ``_speedups.cached_block``.
    """
    if headers.__class__ is not dict or not 0 < len(headers) <= _PAIRS_MAX:
        return None
    key = tuple(headers.items())
    for k, v in key:
        if k.__class__ is not str or v.__class__ is not str:
            return None
    return blocks.get(key)


_cached_block = twin("cached_block", cached_block_py)


def encode_headers(
    headers: HeadersInput | None,
    status: int | None = None,
    description: str = "",
) -> bytes:
    """Encode headers (and an optional status line) to the wire format.

    Raises:
        BadHeaderError: a key or value that cannot be sent (a control character
            in a key, CR or LF in a value, a lone surrogate in either).
    """
    if status is None:
        block = _cached_block(headers, _BLOCKS)
        if block is not None:
            return block
        if headers.__class__ is dict and 0 < len(headers) <= _PAIRS_MAX:
            pairs_key = tuple(headers.items())
            # Only pairs of exact str are kept: any other value (a number, a list, a str
            # subclass) may compare equal to a str and format differently.
            if all(k.__class__ is str and v.__class__ is str for k, v in pairs_key):
                block = _encode_headers(headers, None, "")  # not cached yet
                if len(block) <= _BLOCK_BYTES_MAX:
                    if len(_BLOCKS) >= _BLOCKS_MAX:
                        _BLOCKS.clear()
                    _BLOCKS[pairs_key] = block
                return block
    return _encode_headers(headers, status, description)


def _encode_headers(headers: HeadersInput | None, status: int | None, description: str) -> bytes:
    parts: list[str] = ["NATS/1.0"]
    if status is not None:
        parts.append(f" {status:03d}")
        if description:
            parts.append(f" {_check_value('status', description)}")
    parts.append("\r\n")
    if headers:
        if isinstance(headers, Headers):
            pairs: Iterable[tuple[str, object]] = headers.items_all()
        else:
            pairs = _flatten(headers)
        for key, value in pairs:
            parts.append(f"{_check_key(key)}: {_check_value(key, value)}\r\n")
    parts.append("\r\n")
    try:
        return "".join(parts).encode()
    except UnicodeEncodeError:
        # Checked only when encoding failed: the common case pays nothing.
        raise BadHeaderError(f"header {_unencodable(parts)!r} is not valid Unicode (a lone surrogate)") from None


def sendable(headers: HeadersInput) -> Headers:
    """The pairs of ``headers`` that :func:`encode_headers` takes, in order (padding around
    a key dropped): received headers passed on where a pair another client sent cannot be
    sent by this one (a blank inside a key, a lone CR in a value)."""
    kept = Headers()
    pairs = headers.items_all() if isinstance(headers, Headers) else _flatten(headers)
    for key, value in pairs:
        try:
            checked, text = _check_key(key), _check_value(str(key), value)
            (checked + text).encode()  # a lone surrogate has no UTF-8 form
        except (BadHeaderError, UnicodeEncodeError):
            continue
        kept.add(checked, text)
    return kept


def _unencodable(parts: list[str]) -> str:
    """The first header line (or status description) with no UTF-8 form."""
    for part in parts:
        try:
            part.encode()
        except UnicodeEncodeError:
            return part.strip()
    return ""


def _flatten(headers: HeadersInput) -> Iterable[tuple[str, object]]:
    if not isinstance(headers, Mapping):
        raise BadHeaderError(f"headers must be a mapping, not {type(headers).__name__}")
    for key, value in headers.items():
        if isinstance(value, str):
            yield key, value
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield key, v
        else:
            yield key, value  # _check_value rejects it with a clear message


def parse_headers(raw: bytes) -> tuple[int | None, str, Headers]:
    """Parse a header block into ``(status, description, headers)``.

    Raises:
        ProtocolError: the block does not start with ``NATS/1.0``.
    """
    if not raw.startswith(HEADER_LINE):
        raise ProtocolError(f"header block does not start with NATS/1.0: {raw[:32]!r}")
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\r\n")
    first = lines[0][len("NATS/1.0") :].strip()
    status: int | None = None
    description = ""
    if first:
        code, _, description = first.partition(" ")
        if len(code) == 3 and code.isdigit():
            status = int(code)
            description = description.strip()
        else:
            description = first
    headers = Headers()
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"malformed header line {line[:64]!r}")
        headers.add(key, value.strip())
    return status, description, headers


def status_of(raw: bytes | None) -> int | None:
    """The status code of a header block without parsing the rest (fast path)."""
    if raw is None or len(raw) < 12 or raw[8:9] != b" ":
        return None
    code = raw[9:12]
    return int(code) if code.isdigit() else None
