"""The connection's sans-IO state: the state table, the handshake, the PING ledger,
replay frames and -ERR mapping, all without a socket."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from natsjs_sync.errors import AuthorizationError, PermissionsError, ProtocolError, ServerError
from natsjs_sync.protocol.connection import (
    TRANSITIONS,
    ConnState,
    Established,
    Handshake,
    IllegalTransition,
    PingLedger,
    StateMachine,
    SubRecord,
    replay_frames,
    server_error,
)
from natsjs_sync.protocol.parser import Parser

S = ConnState


def test_every_state_has_a_row_and_closed_is_final_but_for_a_fork() -> None:
    assert set(TRANSITIONS) == set(ConnState)
    assert TRANSITIONS[S.CLOSED] == {S.FORKED}
    m = StateMachine(S.CLOSED)
    with pytest.raises(IllegalTransition):
        m.to(S.CONNECTED)


def test_a_lost_connection_while_draining_closes_instead_of_reconnecting() -> None:
    m = StateMachine(S.DRAINING_SUBS)
    with pytest.raises(IllegalTransition):
        m.to(S.RECONNECTING)
    m.to(S.DRAINING_PUBS)
    m.to(S.CLOSED)


def test_move_only_from_the_allowed_states() -> None:
    m = StateMachine(S.RECONNECTING)
    assert not m.move((S.CONNECTED,), S.DRAINING_SUBS)
    assert m.state is S.RECONNECTING
    assert m.move((S.RECONNECTING,), S.CONNECTED) and m.state is S.CONNECTED


def _feed(hs: Handshake, parser: Parser, data: bytes) -> object:
    return hs.receive(parser.feed(data))


def test_handshake_info_connect_pong() -> None:
    hs, parser = Handshake(), Parser()
    info = _feed(hs, parser, b'INFO {"server_id":"A","max_payload":1024}\r\n')
    assert info == {"server_id": "A", "max_payload": 1024}
    out = hs.connect({"name": "x", "user": None})
    assert out.startswith(b"CONNECT ") and out.endswith(b"\r\nPING\r\n")
    assert json.loads(out[len(b"CONNECT "):out.index(b"\r\n")]) == {"name": "x"}  # None left out
    assert hs.resume() is None
    # The server may PING us and send +OK or a new INFO before its PONG.
    assert _feed(hs, parser, b'+OK\r\nPING\r\nINFO {"ldm":false}\r\n') is None
    assert hs.data_to_send() == b"PONG\r\n" and hs.data_to_send() == b""
    done = _feed(hs, parser, b"PONG\r\nMSG a 1 2\r\nhi\r\n")
    assert isinstance(done, Established)
    assert done.info["ldm"] is False and len(done.leftover) == 1  # the MSG after the PONG is kept


def test_handshake_events_after_info_in_the_same_read_wait_for_connect() -> None:
    hs, parser = Handshake(), Parser()
    assert isinstance(_feed(hs, parser, b'INFO {}\r\nPING\r\n'), dict)
    hs.connect({})
    assert hs.resume() is None and hs.data_to_send() == b"PONG\r\n"


@pytest.mark.parametrize(("text", "cls"), [
    ("Authorization Violation", AuthorizationError),
    ("User Authentication Expired", AuthorizationError),
    ("authentication timeout", AuthorizationError),
    ("Permissions Violation for Publish to \"x\"", PermissionsError),
    ("Maximum Control Line Exceeded", ServerError),
])
def test_err_texts_map_to_one_exception_each(text: str, cls: type) -> None:
    assert type(server_error(text)) is cls


def test_handshake_err_raises_and_garbage_is_a_protocol_error() -> None:
    hs, parser = Handshake(), Parser()
    _feed(hs, parser, b"INFO {}\r\n")
    hs.connect({})
    with pytest.raises(AuthorizationError):
        _feed(hs, parser, b"-ERR 'Authorization Violation'\r\n")
    with pytest.raises(ProtocolError):
        Handshake().receive(Parser().feed(b"PONG\r\n"))
    with pytest.raises(ProtocolError):
        Handshake().connect({})  # before the INFO


def test_ledger_pairs_pongs_with_pings_in_order() -> None:
    ledger: PingLedger[str] = PingLedger(max_outstanding=2)
    ledger.ping("a")
    ledger.ping("b")
    ledger.buffer_sent()
    assert ledger.pong() == ("a", True) and ledger.pong() == ("b", True) and ledger.pong() == (None, True)


PUB = len(b"PUB x 1\r\na\r\n")
PING = len(b"PING\r\n")


def test_ledger_keeps_buffered_pings_when_the_lost_connection_took_no_message() -> None:
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("confirmed", at=PUB + PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("confirmed", True)
    ledger.keepalive(at=PUB + 2 * PING)  # only a keep-alive went out since: no message lost
    ledger.buffer_sent()
    ledger.ping("buffered", at=PUB + 3 * PING)
    assert ledger.lost(taken=PUB + 2 * PING) == []
    assert len(ledger) == 1  # goes out after the reconnect
    ledger.buffer_sent()
    assert ledger.pong() == ("buffered", True)


def test_ledger_fails_every_flush_asked_for_before_a_pong_when_messages_went_out_unconfirmed() -> None:
    # A publish written to the socket, then the connection lost: a flush on the wire, one
    # still buffered and one asked for during the outage may not say the message arrived.
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("on the wire", at=PUB + PING)
    ledger.buffer_sent()
    ledger.ping("buffered", at=PUB + 2 * PING)
    assert ledger.lost(taken=PUB + PING) == ["on the wire", "buffered"]
    ledger.ping("during the outage", at=PUB + 3 * PING)
    ledger.buffer_sent()  # both PINGs go out on the new connection and are answered in order
    assert ledger.pong() == (None, True)  # the buffered one's, waited for by nobody now
    assert ledger.pong() == ("during the outage", False)
    ledger.ping("after a pong", at=PUB + 4 * PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("after a pong", True)


def test_ledger_counts_pongs_it_wrote_as_no_message() -> None:
    ledger: PingLedger[str] = PingLedger()
    ledger.control_out(b"PONG\r\n", at=PING)  # the answer to the server's PING
    ledger.buffer_sent()
    ledger.ping("buffered", at=2 * PING)
    assert ledger.lost(taken=PING) == []
    ledger.buffer_sent()
    assert ledger.pong() == ("buffered", True)


def test_unanswered_keepalives_make_the_connection_stale() -> None:
    ledger: PingLedger[str] = PingLedger(max_outstanding=2)
    assert ledger.keepalive() is not None
    assert ledger.keepalive() is not None
    assert ledger.keepalive() is None  # stale
    ledger.buffer_sent()
    ledger.pong()
    assert ledger.keepalive() is not None  # any PONG resets the count


@given(st.lists(st.sampled_from(["ping", "keepalive", "sent", "pong", "lost"]), max_size=60))
def test_ledger_never_answers_a_ping_that_is_not_on_the_wire(ops: list[str]) -> None:
    ledger: PingLedger[int] = PingLedger(max_outstanding=3)
    on_wire: list[int | None] = []
    buffered: list[int | None] = []
    n = 0
    for op in ops:
        if op == "ping":
            n += 1
            ledger.ping(n)
            buffered.append(n)
        elif op == "keepalive":
            if ledger.keepalive() is not None:
                buffered.append(None)
        elif op == "sent":
            ledger.buffer_sent()
            on_wire += buffered
            buffered = []
        elif op == "pong":
            expected = on_wire.pop(0) if on_wire else None
            assert ledger.pong() == (expected, True)  # no offsets given: never a lossy loss
        else:
            assert ledger.lost() == [w for w in on_wire if w is not None]
            on_wire = []


def test_replay_frames_restore_subscriptions_with_what_remains() -> None:
    frames = replay_frames([SubRecord(1, "a.*"), SubRecord(2, "b", "q"), SubRecord(7, "c", None, 3)])
    assert frames == b"SUB a.* 1\r\nSUB b q 2\r\nSUB c 7\r\nUNSUB 7 3\r\n"


def test_ledger_takes_a_reply_to_a_request_as_confirming_what_went_before() -> None:
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("buffered", at=2 * PUB + PING)  # after two requests, both answered
    assert ledger.lost(taken=2 * PUB, replied_to=2 * PUB) == []
    ledger.buffer_sent()
    assert ledger.pong() == ("buffered", True)
    ledger.ping("after an unanswered request", at=4 * PUB + 2 * PING)
    assert ledger.lost(taken=4 * PUB + PING, replied_to=3 * PUB) == ["after an unanswered request"]


def test_ledger_a_keepalive_pong_tells_nobody_of_a_lossy_loss() -> None:
    # The first PONG after the loss answered a keep-alive: the next flush is the first
    # to hear that a message may have been lost, so it must not vouch for it.
    ledger: PingLedger[str] = PingLedger()
    assert ledger.lost(taken=PUB) == []
    ledger.keepalive(at=PUB + PING)
    ledger.buffer_sent()
    assert ledger.pong()[0] is None
    ledger.ping("first flush after", at=PUB + 2 * PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("first flush after", False)
    ledger.ping("told already", at=PUB + 3 * PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("told already", True)


def test_ledger_counts_a_withdrawn_frame_as_no_message() -> None:
    ledger: PingLedger[str] = PingLedger()
    ledger.not_sent(at=PUB, length=PUB)  # a request taken back out of the buffer
    assert ledger.lost(taken=PUB) == []
    ledger.ping("after", at=PUB + PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("after", True)


def test_ledger_remembers_control_frames_still_buffered_at_a_loss() -> None:
    # A SUB buffered when the connection broke goes out on the next one: losing that
    # one too loses no message.
    sub = len(b"SUB x 1\r\n")
    ledger: PingLedger[str] = PingLedger()
    ledger.control_out(b"SUB x 1\r\n", at=sub)
    ledger.not_sent(at=sub + PUB, length=PUB)
    assert ledger.lost(taken=0) == []
    assert ledger.lost(taken=sub + PUB) == []
    ledger.ping("after", at=sub + PUB + PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("after", True)


def test_ledger_forgets_the_parents_offsets_when_cleared_for_a_fork() -> None:
    # The parent confirmed a long stream; the child's writer counts from 0 again: a
    # publish the child's lost connection swallowed is not covered by the parent's PONG.
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("parent", at=100 * PUB)
    ledger.buffer_sent()
    assert ledger.pong() == ("parent", True)
    assert ledger.clear() == []
    assert ledger.lost(taken=PUB) == []  # the child's first connection, a publish unconfirmed
    ledger.ping("child", at=PUB + PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("child", False)


def test_ledger_a_barrier_ping_neither_fails_on_a_lossy_loss_nor_uses_up_its_word() -> None:
    # The library's own flushes (before a subscription or a pull stops) wait for a PONG
    # as a barrier: a lost publish is the next user flush's to report, not theirs.
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("buffered barrier", at=PUB + PING, vouches=False)
    assert ledger.lost(taken=PUB) == []
    ledger.ping("barrier", at=PUB + 2 * PING, vouches=False)
    ledger.buffer_sent()
    assert ledger.pong() == ("buffered barrier", True)
    assert ledger.pong() == ("barrier", True)
    ledger.ping("user", at=PUB + 3 * PING)
    ledger.buffer_sent()
    assert ledger.pong() == ("user", False)


def test_ledger_appends_the_ping_it_records_to_the_buffer_it_is_given() -> None:
    ledger: PingLedger[str] = PingLedger()
    buffer = bytearray(b"PUB x 1\r\na\r\n")
    assert ledger.ping("flush", at=PUB + PING, out=buffer) == b"PING\r\n"
    assert bytes(buffer) == b"PUB x 1\r\na\r\nPING\r\n" and len(ledger) == 1
    ledger.buffer_sent()
    assert ledger.pong() == ("flush", True)


def test_ledger_settles_by_the_stream_offsets_what_a_write_took_before_it_heard() -> None:
    # A write took two PINGs, and an exception raised into its thread came before buffer_sent();
    # a third was buffered after the take. The loss fails the two taken, keeps the buffered one.
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("taken", at=PUB + PING)
    ledger.keepalive(at=PUB + 2 * PING)
    ledger.ping("buffered", at=2 * PUB + 3 * PING)
    ledger.settle_taken(PUB + 2 * PING)
    ledger.settle_taken(PUB + 2 * PING)  # once more changes nothing
    assert ledger.lost(taken=PUB + 2 * PING) == ["taken", "buffered"]  # a message went out unconfirmed
    assert len(ledger) == 1  # the buffered one goes out on the next connection
    ledger.buffer_sent()
    assert ledger.pong() == (None, True)  # its waiter was told already


def test_ledger_settling_never_counts_as_buffered_what_was_sent() -> None:
    ledger: PingLedger[str] = PingLedger()
    ledger.ping("sent", at=PING)
    ledger.buffer_sent()
    ledger.settle_taken(0)  # an older offset: nothing comes back into the buffer
    assert ledger.lost(taken=PING) == ["sent"]
