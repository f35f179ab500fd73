"""nkeys encoding and the pure-Python Ed25519, checked against `cryptography`."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from natsjs_sync import nkeys
from natsjs_sync.nkeys import InvalidNkeyError, KeyPair


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=200))
def test_ed25519_matches_cryptography(seed: bytes, message: bytes) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert nkeys.ed25519_public_key(seed) == public
    assert nkeys.ed25519_sign(seed, message) == key.sign(message)
    assert nkeys.ed25519_verify(public, message, key.sign(message))
    assert not nkeys.ed25519_verify(public, message + b"x", key.sign(message))


@pytest.mark.parametrize(
    ("prefix", "seed_start", "public_start"),
    [
        (nkeys.PREFIX_BYTE_USER, "SU", "U"),
        (nkeys.PREFIX_BYTE_ACCOUNT, "SA", "A"),
        (nkeys.PREFIX_BYTE_OPERATOR, "SO", "O"),
        (nkeys.PREFIX_BYTE_SERVER, "SN", "N"),
    ],
)
def test_seed_and_public_key_round_trip(prefix: int, seed_start: str, public_start: str) -> None:
    kp = KeyPair.generate(prefix)
    assert kp.seed.startswith(seed_start) and kp.public_key.startswith(public_start)
    assert len(kp.public_key) == 56 and len(kp.seed) == 58
    again = KeyPair.from_seed(kp.seed)
    assert again.public_key == kp.public_key
    assert nkeys.decode_public(kp.public_key) == (prefix, nkeys.ed25519_public_key(nkeys.decode_seed(kp.seed)[1]))
    assert again.verify(b"nonce", kp.sign(b"nonce"))


def test_repr_never_shows_the_seed() -> None:
    kp = KeyPair.generate()
    assert kp.seed not in repr(kp)


@pytest.mark.parametrize("bad", ["", "UABC", "SUxxxx", "S" + "A" * 57])
def test_invalid_seeds(bad: str) -> None:
    with pytest.raises(InvalidNkeyError):
        KeyPair.from_seed(bad)


def test_checksum_is_checked() -> None:
    seed = KeyPair.generate().seed
    flipped = seed[:10] + ("A" if seed[10] != "A" else "B") + seed[11:]
    with pytest.raises(InvalidNkeyError):
        KeyPair.from_seed(flipped)


def test_crc16_xmodem_check_value() -> None:
    assert nkeys.crc16(b"123456789") == 0x31C3


def test_random_seed_bytes_are_used() -> None:
    assert KeyPair.generate().seed != KeyPair.generate().seed
    assert len(os.urandom(32)) == 32
