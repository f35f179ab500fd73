"""The parser on its own: every frame kind, every split point, limits, errors."""

from __future__ import annotations

from typing import Any

import pytest

from natsjs_sync.errors import ProtocolError
from natsjs_sync.msg import Msg
from natsjs_sync.protocol.parser import NEED_DATA, OK, PING, PONG, Err, Info, MsgEvent, Parser

FRAMES: list[tuple[bytes, object]] = [
    (b'INFO {"server_id":"S","max_payload":1048576,"headers":true}\r\n',
     Info({"server_id": "S", "max_payload": 1048576, "headers": True})),
    (b"MSG foo.bar 7 5\r\nhello\r\n", MsgEvent("foo.bar", 7, None, None, b"hello")),
    (b"MSG foo 1 _INBOX.abc 0\r\n\r\n", MsgEvent("foo", 1, "_INBOX.abc", None, b"")),
    (b"MSG bin 2 6\r\n\r\n\x00\xff\r\n\r\n", MsgEvent("bin", 2, None, None, b"\r\n\x00\xff\r\n")),
    (b"HMSG h 3 24 29\r\nNATS/1.0\r\nA: bcdefgh\r\n\r\nhello\r\n",
     MsgEvent("h", 3, None, b"NATS/1.0\r\nA: bcdefgh\r\n\r\n", b"hello")),
    (b"HMSG h 4 reply.to 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
     MsgEvent("h", 4, "reply.to", b"NATS/1.0 503\r\n\r\n", b"")),
    (b"PING\r\n", PING),
    (b"PONG\r\n", PONG),
    (b"+OK\r\n", OK),
    (b"-ERR 'Authorization Violation'\r\n", Err("Authorization Violation")),
    (b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n", Err('Permissions Violation for Publish to "x"')),
]


@pytest.mark.parametrize(("frame", "expected"), FRAMES, ids=[f[0][:12].decode("latin1") for f in FRAMES])
def test_every_split_point_of_every_frame(frame: bytes, expected: object) -> None:
    for cut in range(len(frame) + 1):
        p = Parser()
        events = p.feed(frame[:cut]) + p.feed(frame[cut:])
        assert events == [expected], f"split at {cut}"
        assert p.buffered == 0


def test_all_frames_one_byte_at_a_time() -> None:
    stream = b"".join(f for f, _ in FRAMES)
    p = Parser()
    events = []
    for i in range(len(stream)):
        events += p.feed(stream[i : i + 1])
    assert events == [e for _, e in FRAMES]


def test_all_frames_in_one_read() -> None:
    stream = b"".join(f for f, _ in FRAMES) * 3
    assert Parser().feed(stream) == [e for _, e in FRAMES] * 3


def test_h11_style_interface() -> None:
    p = Parser()
    p.receive_data(b"PING\r\nPO")
    assert p.next_event() is PING
    assert p.next_event() is NEED_DATA
    p.receive_data(b"NG\r\n")
    assert p.next_event() is PONG
    assert p.next_event() is NEED_DATA


def test_lowercase_operations_are_accepted() -> None:
    assert Parser().feed(b"ping\r\npong\r\n+ok\r\n") == [PING, PONG, OK]


def test_msg_factory_builds_user_objects() -> None:
    made = []

    def factory(*args: object) -> str:
        made.append(args)
        return "made"

    assert Parser(msg_factory=factory).feed(b"MSG a 1 r 2\r\nhi\r\n") == ["made"]
    assert made == [("a", 1, "r", None, b"hi")]


def test_large_payload_in_many_pieces_is_not_quadratic() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    frame = b"MSG big 1 %d\r\n" % len(payload) + payload + b"\r\n"
    p = Parser(max_payload=2 * 1024 * 1024)
    events = []
    for i in range(0, len(frame), 1000):
        events += p.feed(frame[i : i + 1000])
    assert len(events) == 1 and events[0].payload == payload


@pytest.mark.parametrize(
    "bad",
    [
        b"WHAT\r\n",
        b"MSG foo\r\n",
        b"MSG foo 1 2 3 4 5\r\n",
        b"MSG foo x 5\r\nhello\r\n",
        b"MSG foo 1 -5\r\n",
        b"MSG foo 1 abc\r\n",
        b"MSG foo 1 5\r\nhelloXX",
        b"HMSG foo 1 20 10\r\n",
        b"HMSG foo 1 x 10\r\n",
        b"HMSG foo 1\r\n",
        b"INFO {not json}\r\n",
        b"INFO [1,2]\r\n",
        b"PING extra\r\n",
    ],
)
def test_malformed_input_raises_protocol_error(bad: bytes) -> None:
    p = Parser()
    with pytest.raises(ProtocolError):
        p.feed(bad)


def test_parser_stays_broken_after_an_error() -> None:
    p = Parser()
    with pytest.raises(ProtocolError):
        p.feed(b"BOGUS\r\n")
    with pytest.raises(ProtocolError):
        p.feed(b"PING\r\n")


def test_control_line_limit_without_crlf() -> None:
    p = Parser(max_control_line=64)
    p.feed(b"MSG " + b"a" * 50)  # still within the limit: waits for more
    with pytest.raises(ProtocolError, match="control line"):
        p.feed(b"a" * 50)


def test_control_line_limit_with_crlf() -> None:
    with pytest.raises(ProtocolError, match="control line"):
        Parser(max_control_line=16).feed(b"INFO {" + b'"a":1,' * 10 + b'"b":2}\r\n')


def test_payload_limit() -> None:
    p = Parser(max_payload=1024)
    with pytest.raises(ProtocolError, match="exceeds"):
        p.feed(b"MSG foo 1 1025\r\n")
    assert Parser(max_payload=1024).feed(b"MSG foo 1 3\r\nabc\r\n")[0].payload == b"abc"


@pytest.mark.parametrize("factory", [MsgEvent, Msg])
@pytest.mark.parametrize("frame_of", [
    lambda s, r: b"MSG %b 1 %b 2\r\nhi\r\n" % (s, r),
    lambda s, r: b"HMSG %b 1 %b 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" % (s, r),
])
def test_a_subject_that_is_not_utf8_round_trips_and_costs_no_neighbour(factory: type, frame_of: Any) -> None:
    """The server accepts any bytes but separators in a subject: one that is not UTF-8
    is delivered (decoded with surrogateescape, so it encodes back to the same bytes)
    with the messages around it, read whole or byte by byte, compiled or not."""
    subject, reply = b"a.\xff\xfe", b"r.\x80caf\xe9"
    data = b"MSG ok 1 1\r\n1\r\n" + frame_of(subject, reply) + b"MSG ok 1 1\r\n3\r\n"
    for step in (len(data), 1, 7):
        p = Parser(msg_factory=factory)
        events = [e for i in range(0, len(data), step) for e in p.feed(data[i : i + step])]
        assert [e.subject for e in events] == ["ok", subject.decode("utf-8", "surrogateescape"), "ok"]
        assert events[1].subject.encode("utf-8", "surrogateescape") == subject
        assert events[1].reply.encode("utf-8", "surrogateescape") == reply


def _events_or_error(data: bytes, cut: int, compiled: bool, max_cl: int) -> object:
    p = Parser(max_control_line=max_cl, msg_factory=Msg)
    if not compiled:
        p._scan = None  # the Python twin
    try:
        return [(m.subject, m.reply, m.data) for m in p.feed(data[:cut]) + p.feed(data[cut:])]
    except ProtocolError:
        return ProtocolError


HMSG_HI = b"NATS/1.0\r\n\r\nhi\r\n"


@pytest.mark.parametrize("data, expected", [
    # Spaces and tabs separate, in any number, after the operation too (nats.go's rule).
    (b"MSG\ta\t\t1 \t r  2 \r\nhi\r\n", [("a", "r", b"hi")]),
    (b"HMSG\ta 1 12  14\t\r\n" + HMSG_HI, [("a", "", b"hi")]),
    # Other whitespace and control bytes are part of a subject: the server accepts them there.
    (b"MSG a\x0bb 1 2\r\nhi\r\n", [("a\x0bb", "", b"hi")]),
    (b"HMSG a\x0cb 1 r\x00 12 14\r\n" + HMSG_HI, [("a\x0cb", "r\x00", b"hi")]),
    (b"HMSG h\x0c 3 12 14\r\n" + HMSG_HI, [("h\x0c", "", b"hi")]),
    # A bare LF or CR never comes from the server (it ends lines at LF, splits on CR).
    (b"MSG a\nb 1 2\r\nhi\r\n", ProtocolError),
    (b"MSG a 1 r\n 2\r\nhi\r\n", ProtocolError),
    (b"MSG a 1\rr 2\r\nhi\r\n", ProtocolError),
    (b"HMSG a\nb 1 12 14\r\n" + HMSG_HI, ProtocolError),
    # The limit (max_control_line=24 here): a line of 24 bytes is fine, 25 is not, split anywhere.
    (b"MSG abcdefghijklmnop 1 2\r\nhi\r\n", [("abcdefghijklmnop", "", b"hi")]),
    (b"MSG abcdefghijklmnopq 1 2\r\nhi\r\n", ProtocolError),
])
def test_whitespace_in_a_control_line_follows_one_rule_in_both_twins_at_every_split(data: bytes,
                                                                                     expected: object) -> None:
    """Found by a differential fuzz: the compiled scanner split on spaces and tabs,
    the Python twin on every ASCII whitespace, and their line limits differed by one."""
    for cut in range(len(data) + 1):
        for compiled in (True, False):
            assert _events_or_error(data, cut, compiled, 24) == expected, (cut, compiled)


@pytest.mark.parametrize("frame, headers, payload", [
    (b"HMSG x 1 2 5\r\nab123\r\n", b"ab", b"123"),
    (b"HMSG x 1 r 0 3\r\n123\r\n", None, b"123"),
    (b"HMSG x 1 9 9\r\nNATS/1.0\n\r\n", b"NATS/1.0\n", b""),
])
def test_a_header_block_too_short_to_be_one_still_frames_its_message(frame: bytes, headers: bytes | None,
                                                                     payload: bytes) -> None:
    """Any publisher can send "HPUB x 2 5" and the server passes it on: the sizes still
    frame the message, so it is delivered with its neighbours (reading its headers
    fails, not the connection), in both twins, split anywhere."""
    data = b"MSG a 1 1\r\n1\r\n" + frame + b"MSG a 1 1\r\n3\r\n"
    for cut in range(len(data) + 1):
        for compiled in (True, False):
            p = Parser(msg_factory=Msg)
            if not compiled:
                p._scan = None
            msgs = p.feed(data[:cut]) + p.feed(data[cut:])
            assert [(m.raw_headers, m.data) for m in msgs] == [(None, b"1"), (headers, payload), (None, b"3")]
    if headers == b"ab":
        with pytest.raises(ProtocolError):
            msgs[1].headers  # noqa: B018 - the property parses


def test_the_events_before_a_protocol_error_are_kept_for_the_reader() -> None:
    for compiled in (True, False):
        p = Parser(msg_factory=Msg)
        if not compiled:
            p._scan = None
        with pytest.raises(ProtocolError):
            p.feed(b"PING\r\nMSG a 1 1\r\n1\r\nBOGUS\r\nMSG a 1 1\r\n2\r\n")
        before = p.parsed_before_error()
        assert before[0] is PING and [m.data for m in before[1:]] == [b"1"]
        assert p.parsed_before_error() == []  # handed over once
