"""Headers, subject validation, NUIDs and the sans-IO import rule."""

from __future__ import annotations

import ast
import itertools
import os
import pathlib
import threading
from collections.abc import Callable

import pytest

import natsjs_sync.protocol as protocol
from natsjs_sync.errors import BadHeaderError, BadSubjectError, ProtocolError
from natsjs_sync.protocol import commands
from natsjs_sync.protocol.headers import encode_headers, parse_headers, status_of
from natsjs_sync.protocol.nuid import NUID, TOTAL_LEN, new_inbox
from natsjs_sync.protocol.subjects import (
    publish_subject,
    subject_covers,
    subject_matches,
    subjects_collide,
    validate_queue,
    validate_subscribe_subject,
)


def test_protocol_package_imports_no_io() -> None:
    forbidden = {"socket", "ssl", "select", "selectors", "threading", "time", "asyncio"}
    root = pathlib.Path(protocol.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            else:
                continue
            assert not forbidden.intersection(names), f"{path.name} imports {names}"


@pytest.mark.parametrize(
    ("status", "description", "raw"),
    [
        (None, "", b"NATS/1.0\r\n\r\n"),
        (503, "", b"NATS/1.0 503\r\n\r\n"),
        (408, "Request Timeout", b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\n\r\n"),
        (100, "Idle Heartbeat", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n"),
        (409, "Consumer Deleted", b"NATS/1.0 409 Consumer Deleted\r\n\r\n"),
        (404, "No Messages", b"NATS/1.0 404 No Messages\r\n\r\n"),
    ],
)
def test_status_lines(status: int | None, description: str, raw: bytes) -> None:
    got_status, got_desc, _ = parse_headers(raw)
    assert (got_status, got_desc) == (status, description)
    assert status_of(raw) == status


def test_headers_keep_case_and_all_values() -> None:
    raw = encode_headers({"X-Trace": ["a", "b"], "x-trace": "c", "Nats-Msg-Id": "1"})
    assert raw == b"NATS/1.0\r\nX-Trace: a\r\nX-Trace: b\r\nx-trace: c\r\nNats-Msg-Id: 1\r\n\r\n"
    _, _, h = parse_headers(raw)
    assert h["X-Trace"] == "a"
    assert h.get_all("X-Trace") == ["a", "b"]
    assert h["x-trace"] == "c"
    assert "nats-msg-id" not in h
    h["X-Trace"] = "z"
    assert h.get_all("X-Trace") == ["z"]


def test_header_values_with_colons_and_spaces() -> None:
    _, _, h = parse_headers(b"NATS/1.0\r\nK: a: b  c\r\n\r\n")
    assert h["K"] == "a: b  c"


@pytest.mark.parametrize(
    "headers",
    [{"": "v"}, {"a b": "v"}, {"a:b": "v"}, {"k": "v\r\nInjected: 1"}, {"k": 1}, {1: "v"}, ["k", "v"],
     {"k": "v\ud800"}, {"k\udcff": "v"}, {"k": ["ok", "\udfff"]}],
)
def test_bad_headers_are_refused(headers: object) -> None:
    with pytest.raises(BadHeaderError):
        encode_headers(headers)  # type: ignore[arg-type]


def test_malformed_header_block() -> None:
    with pytest.raises(ProtocolError):
        parse_headers(b"HTTP/1.1 200\r\n\r\n")
    with pytest.raises(ProtocolError):
        parse_headers(b"NATS/1.0\r\nno colon here\r\n\r\n")


@pytest.mark.parametrize("good", ["a", "a.b.c", "orders.new", "_INBOX.x.y", "ü.日本", "a-b_c.$JS"])
def test_good_publish_subjects(good: str) -> None:
    assert publish_subject(good) == good.encode()


@pytest.mark.parametrize("bad", ["", "a b", "a..b", ".a", "a.", "a.*", "a.>", ">", "a\tb", "a\r\nb", None, 5, b"a",
                                 "a.\ud800", "\udcff", "a\udfffb.c"])
def test_bad_publish_subjects(bad: object) -> None:
    with pytest.raises(BadSubjectError):
        publish_subject(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("good", ["a.*", "a.>", ">", "*", "*.b.>", "a.*.c"])
def test_good_subscribe_subjects(good: str) -> None:
    validate_subscribe_subject(good)


@pytest.mark.parametrize("bad", ["", "a.>.b", "a..b", "a b", ">.a", "a.\ud800.>"])
def test_bad_subscribe_subjects(bad: str) -> None:
    with pytest.raises(BadSubjectError):
        validate_subscribe_subject(bad)


@pytest.mark.parametrize("bad", ["", "a b", "q\n", "q\ud800"])
def test_bad_queue_names(bad: str) -> None:
    with pytest.raises(BadSubjectError):
        validate_queue(bad)
    with pytest.raises(BadSubjectError):
        validate_subscribe_subject("a.b", bad)


def test_a_lone_surrogate_in_a_status_description_is_refused() -> None:
    with pytest.raises(BadHeaderError):
        encode_headers(None, status=503, description="no \ud800")


def test_subject_matching() -> None:
    assert subject_matches("a.*", "a.b")
    assert not subject_matches("a.*", "a.b.c")
    assert subject_matches("a.>", "a.b.c")
    assert not subject_matches("a.>", "a")
    assert subject_matches("a.b", "a.b")
    assert not subject_matches("a.b", "a.c")


def test_covering_and_colliding_patterns_agree_with_the_subjects_they_match() -> None:
    """Every pair of patterns of up to 3 tokens over {a, b, *, >}, against every subject
    of up to 4 tokens over {a, b, c}: covers means each subject the one matches the other
    matches too; collide means some subject matches both."""
    tokens = ["a", "b", "*", ">"]
    patterns = [".".join(p) for n in (1, 2, 3) for p in itertools.product(tokens, repeat=n)
                if ">" not in p[:-1]]
    subjects = [".".join(p) for n in (1, 2, 3, 4) for p in itertools.product("abc", repeat=n)]
    matched = {p: {s for s in subjects if subject_matches(p, s)} for p in patterns}
    for g in patterns:
        for s in patterns:
            assert subject_covers(g, s) == (matched[s] <= matched[g]), (g, s)
            assert subjects_collide(g, s) == bool(matched[s] & matched[g]), (g, s)


def test_command_encoding() -> None:
    assert commands.pub(b"a", b"hi") == b"PUB a 2\r\nhi\r\n"
    assert commands.pub(b"a", b"hi", b"r") == b"PUB a r 2\r\nhi\r\n"
    assert commands.hpub(b"a", b"NATS/1.0\r\n\r\n", b"hi") == b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    assert commands.sub(b"a.*", 3, b"q") == b"SUB a.* q 3\r\n"
    assert commands.unsub(3) == b"UNSUB 3\r\n"
    assert commands.unsub(3, 10) == b"UNSUB 3 10\r\n"
    assert commands.connect({"verbose": False, "user": None}) == b'CONNECT {"verbose":false}\r\n'


def test_nuids_are_unique_across_threads() -> None:
    gen = NUID()
    results: list[list[str]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        results[i] = [gen.next() for _ in range(5000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = [x for r in results for x in r]
    assert len(set(ids)) == len(ids) == 40000
    assert all(len(x) == TOTAL_LEN and x.isalnum() for x in ids[:100])


def test_nuid_prefix_changes_in_forked_child() -> None:
    parent = new_inbox()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(w, new_inbox().encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert child.split(".")[1][:12] != parent.split(".")[1][:12]


def test_a_plain_dict_met_again_encodes_as_the_first_time() -> None:
    """Blocks of plain dicts of text are kept by their pairs: what comes back is what
    encoding anew gives, whatever was encoded between, and what does not encode still raises."""
    from natsjs_sync.protocol import headers as hmod

    class Text(str):
        def __format__(self, spec: str) -> str:
            return "other"

    cases: list[dict[str, object]] = [
        {"content-type": "application/json"},
        {"content-type": "application/json", "X-Trace": "1"},
        {"X-Trace": "1", "content-type": "application/json"},  # the same pairs in another order
        {"n": "1"}, {"n": 1}, {"n": True}, {"n": 1.0}, {"n": ["1", "2"]}, {"n": Text("1")},
        {f"k{i}": "v" for i in range(9)},  # more pairs than are kept
    ]
    def outcome(encode: Callable[[], bytes]) -> object:
        try:
            return encode()
        except BadHeaderError as exc:
            return ("refused", str(exc))

    for _ in range(3):
        for h in cases:
            assert outcome(lambda h=h: encode_headers(h)) == outcome(lambda h=h: hmod._encode_headers(h, None, "")), h
    assert encode_headers({"n": "1"}) == b"NATS/1.0\r\nn: 1\r\n\r\n"
    for h in ({"n": True}, {"n": Text("1")}):  # equal to {"n": "1"}'s pairs, and not text: never its block
        assert outcome(lambda h=h: encode_headers(h)) != b"NATS/1.0\r\nn: 1\r\n\r\n"
    h = {"a": "1"}
    first = encode_headers(h)
    h["a"] = "2"  # the same dict, changed
    assert encode_headers(h) == b"NATS/1.0\r\na: 2\r\n\r\n" != first
    for _ in range(2):
        with pytest.raises(BadHeaderError):
            encode_headers({"a": "x\r\ny"})
        with pytest.raises(BadHeaderError):
            encode_headers({"bad key": "1"})
    for i in range(hmod._BLOCKS_MAX * 2 + 1):  # past the bound: kept few, still right
        assert encode_headers({"i": str(i)}) == b"NATS/1.0\r\ni: %d\r\n\r\n" % i
        assert len(hmod._BLOCKS) <= hmod._BLOCKS_MAX
    assert encode_headers({"i": "x"}, status=503) == b"NATS/1.0 503\r\ni: x\r\n\r\n"


def test_large_header_blocks_are_not_kept() -> None:
    """Blocks past a small size are encoded each time: a publisher of distinct large headers
    (a token, a trace of its own) would otherwise keep up to the bound's number of them."""
    from natsjs_sync.protocol import headers as hmod

    hmod._BLOCKS.clear()
    for i in range(3):
        big = {"X-Blob": str(i) + "x" * 65536}
        assert encode_headers(big) == hmod._encode_headers(big, None, "")
    assert not hmod._BLOCKS
    assert encode_headers({"content-type": "application/json"}) and len(hmod._BLOCKS) == 1
