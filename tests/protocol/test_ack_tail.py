"""The per-message ack-subject check of ordered consumers: the Python reference
and its compiled twin give the same answer for every subject."""

from __future__ import annotations

import random

import pytest

from natsjs_sync.protocol.jetstream import ackreply

PREFIX = "$JS.ACK.ORDERS.oc_1"


def _twins() -> list:
    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [ackreply.ack_tail_py]
    return [ackreply.ack_tail_py, _speedups.ack_tail]


@pytest.mark.parametrize("reply, expected", [
    (f"{PREFIX}.1.42.7.1795504668232768833.9", (42, 7)),
    (f"{PREFIX}.3.1.1.1.0", (1, 1)),
    (f"{PREFIX}.1.999999999999999999.1.1.0", (999999999999999999, 1)),
    (f"{PREFIX}.1.1000000000000000000.1.1.0", None),  # over 18 digits: left to the full parse
    (f"{PREFIX}.1.42.7.1795504668232768833", None),  # four tokens
    (f"{PREFIX}.1.42.7.1795504668232768833.9.x", None),  # six tokens
    (f"{PREFIX}.1..7.1.9", None),  # an empty token
    (f"{PREFIX}.1.42.7.1.", None),
    (f"{PREFIX}..42.7.1.9", None),
    (f"{PREFIX}.1.4a.7.1.9", None),
    (f"{PREFIX}.1.42.+7.1.9", None),  # int() would take it; a sequence never has a sign
    (f"{PREFIX}.1.42.\u0663.1.9", None),  # a non-ASCII digit
    ("$JS.ACK.ORDERS.oc_2.1.42.7.1.9", None),  # another consumer
    ("$JS.ACK.ORDERS.oc_10.1.42.7.1.9", None),  # a consumer whose name starts with ours
    ("$JS.ACK.hub.ACCHASH.ORDERS.oc_1.1.42.7.1.9.tok", None),  # the domain form
    (PREFIX, None),
    ("", None),
    ("_INBOX.abc", None),
])
def test_ack_tail_reads_the_sequences_of_one_consumers_subjects_only(reply: str, expected: object) -> None:
    for ack_tail in _twins():
        assert ack_tail(reply, PREFIX) == expected, ack_tail


def test_compiled_and_python_twins_agree_on_random_subjects() -> None:
    twins = _twins()
    if len(twins) == 1:
        pytest.skip("the compiled extension is not built in this install (no C compiler)")
    py, compiled = twins
    rng = random.Random(20261124)
    alphabet = "0123456789.._-aZ+ \u00e9"
    for _ in range(20_000):
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        reply = PREFIX + rng.choice(["", ".", ".1.2.3.4.5", "."]) + tail
        assert compiled(reply, PREFIX) == py(reply, PREFIX), reply


def test_the_twin_in_use_is_the_compiled_one_where_it_was_built() -> None:
    twins = _twins()
    if len(twins) == 1:
        pytest.skip("the compiled extension is not built in this install (no C compiler)")
    import os
    if os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
        assert ackreply.ack_tail is ackreply.ack_tail_py
    else:
        assert ackreply.ack_tail is twins[1]
