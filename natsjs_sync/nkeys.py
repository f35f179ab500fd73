"""NATS nkeys: Ed25519 key pairs in NATS's base32 text form, and signing.

An nkey is base32 (no padding) of ``prefix byte(s) + raw key + CRC16``, the
CRC being CRC-16/XMODEM stored little-endian. Public keys have one prefix byte
(``U`` user, ``A`` account, ``O`` operator, ``N`` server, ...); seeds have two,
``S`` then the type, so a user seed starts with ``SU``.

Ed25519 (RFC 8032) is implemented here in pure Python so that the only runtime
dependency stays msgspec. It signs the server's nonce once per connection,
where its speed (about a millisecond) does not matter. It is not constant
time; the seed never leaves the process and only nonces chosen by the server
are signed.
"""

from __future__ import annotations

import base64
import hashlib
import os

from .errors import NatsError

PREFIX_BYTE_SEED = 18 << 3  # 'S'
PREFIX_BYTE_PRIVATE = 15 << 3  # 'P'
PREFIX_BYTE_SERVER = 13 << 3  # 'N'
PREFIX_BYTE_CLUSTER = 2 << 3  # 'C'
PREFIX_BYTE_OPERATOR = 14 << 3  # 'O'
PREFIX_BYTE_ACCOUNT = 0  # 'A'
PREFIX_BYTE_USER = 20 << 3  # 'U'
PREFIX_BYTE_CURVE = 23 << 3  # 'X'

_PUBLIC_PREFIXES = {
    PREFIX_BYTE_SERVER,
    PREFIX_BYTE_CLUSTER,
    PREFIX_BYTE_OPERATOR,
    PREFIX_BYTE_ACCOUNT,
    PREFIX_BYTE_USER,
    PREFIX_BYTE_CURVE,
}


class InvalidNkeyError(NatsError, ValueError):
    """A seed or public key that is not a valid nkey (the key is never quoted)."""


# ------------------------------------------------------------------ CRC16 and base32


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, initial value 0)."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def _b32encode(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=")


def _b32decode(text: str) -> bytes:
    try:
        return base64.b32decode(text + "=" * (-len(text) % 8))
    except (ValueError, TypeError) as exc:
        raise InvalidNkeyError("nkey is not valid base32") from exc


def _with_crc(raw: bytes) -> bytes:
    return raw + crc16(raw).to_bytes(2, "little")


def _check_crc(raw: bytes) -> bytes:
    if len(raw) < 3:
        raise InvalidNkeyError("nkey is too short")
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if crc16(body) != crc:
        raise InvalidNkeyError("nkey checksum does not match")
    return body


def encode_public(prefix: int, key: bytes) -> str:
    """Encode a 32-byte public key with a one-byte prefix (e.g. ``PREFIX_BYTE_USER``)."""
    if prefix not in _PUBLIC_PREFIXES or len(key) != 32:
        raise InvalidNkeyError("bad public key prefix or length")
    return _b32encode(_with_crc(bytes([prefix]) + key))


def encode_seed(prefix: int, seed: bytes) -> str:
    """Encode a 32-byte Ed25519 seed for the given public key type."""
    if prefix not in _PUBLIC_PREFIXES or len(seed) != 32:
        raise InvalidNkeyError("bad seed prefix or length")
    b1 = PREFIX_BYTE_SEED | (prefix >> 5)
    b2 = (prefix & 31) << 3
    return _b32encode(_with_crc(bytes([b1, b2]) + seed))


def decode_seed(seed: str) -> tuple[int, bytes]:
    """Decode ``S...`` into ``(public prefix byte, 32-byte raw seed)``."""
    if not isinstance(seed, str) or not seed.startswith("S"):
        raise InvalidNkeyError("an nkey seed starts with 'S'")
    body = _check_crc(_b32decode(seed.strip()))
    if len(body) != 34:
        raise InvalidNkeyError("nkey seed has the wrong length")
    b1, b2 = body[0], body[1]
    if b1 & 0xF8 != PREFIX_BYTE_SEED:
        raise InvalidNkeyError("not an nkey seed")
    prefix = ((b1 & 7) << 5) | ((b2 & 0xF8) >> 3)
    if prefix not in _PUBLIC_PREFIXES:
        raise InvalidNkeyError("nkey seed has an unknown type")
    return prefix, body[2:]


def decode_public(key: str) -> tuple[int, bytes]:
    """Decode a public nkey into ``(prefix byte, 32-byte key)``."""
    body = _check_crc(_b32decode(key.strip()))
    if len(body) != 33 or body[0] not in _PUBLIC_PREFIXES:
        raise InvalidNkeyError("not a public nkey")
    return body[0], body[1:]


# ------------------------------------------------------------------ Ed25519 (RFC 8032)

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _recover_x(y: int, sign: int) -> int:
    if y >= _P:
        raise InvalidNkeyError("invalid point")
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    if x2 == 0:
        if sign:
            raise InvalidNkeyError("invalid point")
        return 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        raise InvalidNkeyError("invalid point")
    if (x & 1) != sign:
        x = _P - x
    return x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
# Points in extended coordinates (X, Y, Z, T) with x = X/Z, y = Y/Z, xy = T/Z.
_G = (_GX, _GY, 1, _GX * _GY % _P)
_ZERO = (0, 1, 1, 0)


def _add(p: tuple[int, int, int, int], q: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, p: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    q = _ZERO
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _encode_point(p: tuple[int, int, int, int]) -> bytes:
    zinv = pow(p[2], _P - 2, _P)
    x = p[0] * zinv % _P
    y = p[1] * zinv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _decode_point(raw: bytes) -> tuple[int, int, int, int]:
    if len(raw) != 32:
        raise InvalidNkeyError("invalid point length")
    y = int.from_bytes(raw, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return (x, y, 1, x * y % _P)


def _points_equal(p: tuple[int, int, int, int], q: tuple[int, int, int, int]) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _expand(seed: bytes) -> tuple[int, bytes]:
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public_key(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte seed."""
    a, _ = _expand(seed)
    return _encode_point(_mul(a, _G))


def ed25519_sign(seed: bytes, message: bytes) -> bytes:
    """A 64-byte Ed25519 signature of ``message``."""
    a, prefix = _expand(seed)
    public = _encode_point(_mul(a, _G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    big_r = _encode_point(_mul(r, _G))
    k = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _L
    s = (r + k * a) % _L
    return big_r + int.to_bytes(s, 32, "little")


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` is ``public``'s valid signature of ``message``."""
    if len(public) != 32 or len(signature) != 64:
        return False
    try:
        a = _decode_point(public)
        r = _decode_point(signature[:32])
    except InvalidNkeyError:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    return _points_equal(_mul(s, _G), _add(r, _mul(k, a)))


# ------------------------------------------------------------------ key pairs


class KeyPair:
    """An nkey pair made from a seed. Its ``repr`` never shows the seed."""

    __slots__ = ("_prefix", "_public", "_raw_seed")

    def __init__(self, prefix: int, raw_seed: bytes):
        self._prefix = prefix
        self._raw_seed = raw_seed
        self._public = ed25519_public_key(raw_seed)

    @classmethod
    def from_seed(cls, seed: str | bytes) -> KeyPair:
        """Make a pair from an encoded seed (``SU...``, ``SA...``, ``SO...``).

        Raises:
            InvalidNkeyError: not a valid seed.
        """
        text = seed.decode() if isinstance(seed, (bytes, bytearray)) else seed
        prefix, raw = decode_seed(text.strip())
        return cls(prefix, raw)

    @classmethod
    def generate(cls, prefix: int = PREFIX_BYTE_USER) -> KeyPair:
        """A new random pair of the given type (user by default)."""
        return cls(prefix, os.urandom(32))

    @property
    def public_key(self) -> str:
        """The encoded public key, e.g. ``U...``."""
        return encode_public(self._prefix, self._public)

    @property
    def seed(self) -> str:
        """The encoded seed (keep it secret)."""
        return encode_seed(self._prefix, self._raw_seed)

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        return ed25519_sign(self._raw_seed, data)

    def verify(self, data: bytes, signature: bytes) -> bool:
        return ed25519_verify(self._public, data, signature)

    def __repr__(self) -> str:
        return f"<KeyPair {self.public_key}>"


def sign_nonce(seed: str | bytes, nonce: str) -> str:
    """Sign the server's nonce; the base64url text (no padding) CONNECT expects."""
    sig = KeyPair.from_seed(seed).sign(nonce.encode())
    return base64.urlsafe_b64encode(sig).decode().rstrip("=")
