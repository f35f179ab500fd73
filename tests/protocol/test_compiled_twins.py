"""Hot-path helpers with a compiled twin (the ordered consumer's ack-subject
check, the publish frame append): the Python reference and the compiled twin
give the same answers."""

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


def test_append_pub_twins_lay_out_the_same_frame() -> None:
    from natsjs_sync.protocol import commands

    twins = [commands.append_pub_py]
    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        pass
    else:
        twins.append(_speedups.append_pub)
    for append_pub in twins:
        buffer = bytearray(b"PING\r\n")
        assert append_pub(buffer, b"PUB a.b 3\r\n", b"abc") == 6 + 11 + 3 + 2
        assert append_pub(buffer, b"PUB c 0\r\n", b"") == 22 + 9 + 2
        assert bytes(buffer) == b"PING\r\nPUB a.b 3\r\nabc\r\nPUB c 0\r\n\r\n"
        big = bytes(range(256)) * 4096
        assert append_pub(buffer, b"PUB big 1048576\r\n", big) == len(buffer)
        assert bytes(buffer).endswith(b"PUB big 1048576\r\n" + big + b"\r\n")
    if len(twins) == 2:
        with pytest.raises(TypeError):
            twins[1](b"not a bytearray", b"PUB a 1\r\n", b"x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            twins[1](bytearray(), b"PUB a 1\r\n", bytearray(b"x"))  # type: ignore[arg-type]
