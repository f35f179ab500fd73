"""Hypothesis: no input crashes the parser with anything but ProtocolError,
memory stays bounded, and encode -> parse round trips."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from natsjs_sync.errors import ProtocolError
from natsjs_sync.msg import Msg
from natsjs_sync.protocol import commands
from natsjs_sync.protocol.headers import Headers, encode_headers, parse_headers
from natsjs_sync.protocol.parser import MsgEvent, Parser

MAX_CL = 256
MAX_PAYLOAD = 4096

token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
subjects = st.lists(token, min_size=1, max_size=5).map(".".join)
payloads = st.binary(max_size=300)
header_keys = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
header_values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\r\n"), max_size=20
).map(str.strip)


def msg_frame(subject: str, sid: int, reply: str | None, hdr: bytes | None, payload: bytes) -> bytes:
    """What the server sends for a message (MSG / HMSG), built from our PUB/HPUB encoders."""
    r = reply.encode() if reply else None
    if hdr is None:
        pub = commands.pub(subject.encode(), payload, r)
        return b"MSG" + pub[3:].replace(subject.encode(), b"%b %d" % (subject.encode(), sid), 1)
    hpub = commands.hpub(subject.encode(), hdr, payload, r)
    return b"HMSG" + hpub[4:].replace(subject.encode(), b"%b %d" % (subject.encode(), sid), 1)


frames = st.one_of(
    st.builds(
        msg_frame,
        subjects,
        st.integers(min_value=1, max_value=10**6),
        st.one_of(st.none(), subjects),
        st.one_of(st.none(), st.dictionaries(header_keys, header_values, max_size=3).map(encode_headers)),
        payloads,
    ),
    st.sampled_from([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b"-ERR 'x'\r\n", b'INFO {"a":1}\r\n']),
)


def feed_all(p: Parser, data: bytes, cuts: list[int], reader: bool = False) -> list[object]:
    """Every event of ``data`` fed in pieces cut at ``cuts``; ``reader``: through the
    parser's ``reader_feed()``, as the reader feeds it (compiled where built)."""
    events: list[object] = []
    prev = 0
    feed = p.reader_feed() if reader else p.feed
    for c in [*sorted(set(cuts)), len(data)]:
        c = min(c, len(data))
        events += feed(data[prev:c])
        prev = c
        # The buffer never holds more than a control line, one payload and one read.
        assert p.buffered <= MAX_CL + MAX_PAYLOAD + 2 + len(data)
    return events


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=8))
def test_random_bytes_only_protocol_errors(data: bytes, cuts: list[int]) -> None:
    p = Parser(max_control_line=MAX_CL, max_payload=MAX_PAYLOAD)
    try:
        feed_all(p, data, cuts)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(frames, min_size=1, max_size=6), st.data())
def test_mutated_valid_frames_only_protocol_errors(chunks: list[bytes], data: st.DataObject) -> None:
    stream = bytearray(b"".join(chunks))
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(stream) - 1))
        op = data.draw(st.sampled_from(["flip", "drop", "dup"]))
        if op == "flip":
            stream[i] = data.draw(st.integers(0, 255))
        elif op == "drop":
            del stream[i]
        else:
            stream.insert(i, stream[i])
        if not stream:
            return
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    p = Parser(max_control_line=MAX_CL, max_payload=MAX_PAYLOAD)
    try:
        feed_all(p, bytes(stream), cuts)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    subjects,
    st.integers(min_value=1, max_value=10**9),
    st.one_of(st.none(), subjects),
    st.one_of(st.none(), st.dictionaries(header_keys, header_values, min_size=0, max_size=4)),
    payloads,
    st.lists(st.integers(0, 1000), max_size=5),
)
def test_round_trip_through_the_parser(
    subject: str, sid: int, reply: str | None, headers: dict[str, str] | None, payload: bytes, cuts: list[int]
) -> None:
    hdr = encode_headers(headers) if headers is not None else None
    frame = msg_frame(subject, sid, reply, hdr, payload)
    events = feed_all(Parser(), frame, cuts)
    assert events == [MsgEvent(subject, sid, reply, hdr, payload)]
    if hdr is not None:
        assert dict(parse_headers(hdr)[2]) == headers


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(header_keys, header_values), max_size=6), st.sampled_from([None, 100, 404, 408, 409, 503]))
def test_headers_round_trip_multi_valued(pairs: list[tuple[str, str]], status: int | None) -> None:
    h = Headers()
    for k, v in pairs:
        h.add(k, v)
    got_status, _, parsed = parse_headers(encode_headers(h, status=status))
    assert got_status == status
    assert list(parsed.items_all()) == list(h.items_all())


def _as_tuple(m: object) -> tuple[object, ...]:
    if isinstance(m, Msg):
        return ("msg", m.subject, m.sid, m.reply, m.raw_headers, m.data)
    return ("event", repr(m))


@given(st.lists(frames, max_size=12), st.lists(st.integers(min_value=0, max_value=4000), max_size=8))
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_compiled_and_python_parsers_give_the_same_events(chunks: list[bytes], cuts: list[int]) -> None:
    """Where the compiled parser was built, it and the pure-Python one agree, split anywhere."""
    data = b"".join(chunks)
    fast = Parser(MAX_CL, MAX_PAYLOAD, msg_factory=Msg)
    pure = Parser(MAX_CL, MAX_PAYLOAD, msg_factory=Msg)
    pure._scan = None  # the reference path
    expected = [_as_tuple(e) for e in feed_all(pure, data, cuts)]
    assert [_as_tuple(e) for e in feed_all(fast, data, cuts)] == expected
    read = Parser(MAX_CL, MAX_PAYLOAD, msg_factory=Msg)
    assert [_as_tuple(e) for e in feed_all(read, data, cuts, reader=True)] == expected


def test_the_compiled_parser_is_in_use_where_it_was_built() -> None:
    """The README's install builds it where a C compiler is present: say so when it is missing."""
    import sysconfig

    from natsjs_sync.protocol import parser

    if parser._speedups is None and not os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
        assert not sysconfig.get_config_var("CC"), "a C compiler is configured but the parser extension is missing"
    else:
        assert Parser(msg_factory=Msg)._scan is not None or os.environ.get("NATSJS_SYNC_PURE_PYTHON")


@given(st.binary(max_size=600), st.lists(st.integers(min_value=0, max_value=600), max_size=5))
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_compiled_parser_fails_like_the_python_one_on_garbage(junk: bytes, cuts: list[int]) -> None:
    data = b"MSG a 1 3\r\nabc\r\n" + junk
    results = []
    for use_fast in (True, False):
        p = Parser(MAX_CL, MAX_PAYLOAD, msg_factory=Msg)
        if not use_fast:
            p._scan = None
        try:
            results.append(("ok", [_as_tuple(e) for e in feed_all(p, data, cuts)]))
        except ProtocolError as exc:
            results.append(("error", str(exc)))
    assert results[0] == results[1]


# Bytes that probe the control-line rules: separators (space, tab), line ends
# alone, whitespace that is no separator, and bytes that are not UTF-8.
_PROBES = [b" ", b"\t", b"  ", b" \t", b"\r", b"\n", b"\r\n", b"\x0b", b"\x0c", b"\x00", b"\xff", b"\xc3", b"0", b"9"]


def _outcome(fast: bool, data: bytes, cuts: list[int], max_cl: int,
             reader: bool = False) -> tuple[list[tuple[object, ...]], str | None]:
    """The events fed out before any error (with those the failing feed completed), and
    the error's type (None: no error). ``reader``: fed through the parser's ``reader_feed()``."""
    p = Parser(max_cl, MAX_PAYLOAD, msg_factory=Msg)
    if not fast:
        p._scan = None
    feed = p.reader_feed() if reader else p.feed
    events: list[tuple[object, ...]] = []
    prev = 0
    for c in [*sorted(set(cuts)), len(data)]:
        c = min(c, len(data))
        try:
            events += [_as_tuple(e) for e in feed(data[prev:c])]
        except Exception as exc:  # the twins must fail alike, whatever the error
            events += [_as_tuple(e) for e in p.parsed_before_error()]
            return events, type(exc).__name__
        prev = c
    return events, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, min_size=1, max_size=3), st.data())
def test_twins_agree_on_mutated_frames(chunks: list[bytes], data: st.DataObject) -> None:
    """A differential fuzz: valid frames with separators, line ends and bad bytes
    inserted or replaced anywhere, fed split anywhere, under a small control-line
    limit: the compiled and the Python parser give the same events and fail alike."""
    stream = bytearray(b"".join(chunks))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(stream)))
        probe = data.draw(st.sampled_from(_PROBES))
        if data.draw(st.booleans()) or i == len(stream):
            stream[i:i] = probe
        else:
            stream[i : i + 1] = probe
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=5))
    max_cl = data.draw(st.sampled_from([24, 40, MAX_CL]))
    raw = bytes(stream)
    expected = _outcome(False, raw, cuts, max_cl)
    assert _outcome(True, raw, cuts, max_cl) == expected
    assert _outcome(True, raw, cuts, max_cl, reader=True) == expected
