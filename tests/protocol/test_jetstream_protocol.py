"""JetStream's sans-IO pieces: the status classifier, the ack reply parser and the
pull accounting, without a server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from natsjs_sync.errors import ConsumerDeletedError, JetStreamError, NotJSMessageError
from natsjs_sync.protocol.headers import encode_headers
from natsjs_sync.protocol.jetstream.ackreply import parse_metadata, sequences
from natsjs_sync.protocol.jetstream.pullstate import PullAccounting, PullAsk
from natsjs_sync.protocol.jetstream.status import MESSAGE, Kind, classify, is_no_responders


def status(code: int, desc: str = "", reply: str | None = None, **headers: str) -> object:
    return classify(encode_headers(headers or None, status=code, description=desc), reply)


@pytest.mark.parametrize(("code", "desc", "reply", "kind"), [
    (100, "Idle Heartbeat", None, Kind.HEARTBEAT),
    (100, "FlowControl Request", "$JS.FC.x", Kind.FLOW_CONTROL),
    (404, "No Messages", None, Kind.REQUEST_ENDED),
    (408, "Request Timeout", None, Kind.REQUEST_ENDED),
    (409, "Message Size Exceeds MaxBytes", None, Kind.REQUEST_ENDED),
    (409, "Batch Completed", None, Kind.REQUEST_ENDED),
    (409, "Exceeded MaxWaiting", None, Kind.LIMIT),
    (409, "Exceeded MaxRequestBatch of 10", None, Kind.LIMIT),
    (409, "Leadership Change", None, Kind.RESET),
    (409, "Server Shutdown", None, Kind.RESET),
    (409, "Consumer Deleted", None, Kind.CONSUMER_DELETED),
    (423, "Nats-Pin-Id mismatch", None, Kind.RESET),
    (503, "", None, Kind.NO_RESPONDERS),
    (400, "Bad Request - Priority Group missing", None, Kind.TERMINAL),
])
def test_each_status_has_one_meaning(code: int, desc: str, reply: str | None, kind: Kind) -> None:
    assert status(code, desc, reply).kind is kind  # type: ignore[attr-defined]


def test_messages_without_a_status_line_are_messages() -> None:
    assert classify(None) is MESSAGE
    assert classify(encode_headers({"Nats-Msg-Id": "1"})) is MESSAGE


def test_pending_counts_and_stalls_are_read() -> None:
    ended = status(408, "Request Timeout", **{"Nats-Pending-Messages": "7", "Nats-Pending-Bytes": "70"})
    assert (ended.pending_msgs, ended.pending_bytes) == (7, 70)  # type: ignore[attr-defined]
    hb = status(100, "Idle Heartbeat", **{"Nats-Consumer-Stalled": "$JS.FC.stalled"})
    assert hb.stalled == "$JS.FC.stalled"  # type: ignore[attr-defined]


def test_errors_of_terminal_statuses() -> None:
    assert isinstance(status(409, "Consumer Deleted").error(), ConsumerDeletedError)  # type: ignore[attr-defined]
    err = status(400, "Bad Request - Priority Group missing").error()  # type: ignore[attr-defined]
    assert isinstance(err, JetStreamError) and "Priority Group" in str(err)
    assert status(408, "Request Timeout").error() is None  # type: ignore[attr-defined]


def test_no_responders_is_a_503_without_payload_only() -> None:
    assert is_no_responders(b"NATS/1.0 503\r\n\r\n", b"")
    assert is_no_responders(encode_headers(None, status=503, description="No Responders"), b"")
    assert not is_no_responders(b"NATS/1.0 503\r\n\r\n", b"an answer")  # somebody's reply, not the server's
    assert not is_no_responders(None, b"")
    assert not is_no_responders(b"NATS/1.0 408 Request Timeout\r\n\r\n", b"")
    assert not is_no_responders(encode_headers({"X-Code": "503"}), b"")  # no status line at all


@given(st.binary(max_size=80))
def test_classify_never_raises_on_a_header_block_it_accepts(raw: bytes) -> None:
    block = b"NATS/1.0 " + raw.replace(b"\r", b"").replace(b"\n", b"") + b"\r\n\r\n"
    try:
        classify(block)
    except Exception as exc:  # only our own protocol errors may come out
        assert type(exc).__name__ == "ProtocolError"


@pytest.mark.parametrize("reply", [
    "$JS.ACK.ORDERS.cons.2.17.5.1700000000123456789.40",
    "$JS.ACK.hub.ACCHASH.ORDERS.cons.2.17.5.1700000000123456789.40",
    "$JS.ACK.hub.ACCHASH.ORDERS.cons.2.17.5.1700000000123456789.40.rand",
])
def test_both_ack_reply_formats(reply: str) -> None:
    seq = sequences(reply)
    assert seq is not None
    assert (seq.stream, seq.consumer, seq.stream_seq, seq.consumer_seq, seq.pending) == ("ORDERS", "cons", 17, 5, 40)
    md = parse_metadata(reply)
    assert md.sequence.stream == 17 and md.num_delivered == 2 and md.timestamp_ns == 1700000000123456789
    assert md.timestamp.microsecond == 123456
    assert md.domain == (None if reply.count(".") == 8 else "hub")


@pytest.mark.parametrize("reply", [None, "", "_INBOX.x", "$JS.ACK.a.b.c", "$JS.ACK.S.C.1.x.2.3.4"])
def test_anything_else_is_not_an_ack_reply(reply: str | None) -> None:
    assert sequences(reply) is None
    with pytest.raises(NotJSMessageError):
        parse_metadata(reply)


def test_pull_accounting_tops_up_at_the_threshold() -> None:
    acct = PullAccounting(max_messages=10)
    assert acct.wants_more() and acct.ask().batch == 10
    for _ in range(4):
        acct.delivered(1)
    assert not acct.wants_more()  # 6 owed, threshold 5
    acct.delivered(1)
    assert acct.wants_more() and acct.ask().batch == 5
    acct.ended(msgs=8, nbytes=0)  # a 408: 8 of them will never come
    assert acct.pending_msgs == 2
    acct.stopped = True
    assert not acct.wants_more()


def test_pull_accounting_never_asks_past_stop_after() -> None:
    acct = PullAccounting(max_messages=10, stop_after=12)
    assert acct.ask().batch == 10
    for _ in range(6):
        acct.delivered(1)
        acct.handed()
    assert acct.ask().batch == 2  # 6 handed out + 4 owed: only 2 more may be asked for
    for _ in range(4):
        acct.delivered(1)
        acct.handed()
    assert not acct.wants_more()  # 10 handed out, 2 owed
    acct.ended(msgs=2, nbytes=0)  # the request expired: those 2 may be asked for again
    assert acct.wants_more() and acct.ask().batch == 2
    for _ in range(2):
        acct.delivered(1)
        acct.handed()
    assert acct.finished and not acct.wants_more()
    # A message taken from a request but not handed out (an ordered consumer's stale one) frees its slot.
    acct = PullAccounting(max_messages=3, stop_after=3)
    assert acct.ask().batch == 3
    acct.delivered(1)
    acct.delivered(1)
    assert acct.wants_more() and acct.ask().batch == 2
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            PullAccounting(stop_after=bad)  # type: ignore[arg-type]


def test_pull_accounting_by_bytes() -> None:
    acct = PullAccounting(max_bytes=1000)
    ask = acct.ask()
    assert ask.max_bytes == 1000 and ask.batch >= 1000
    acct.delivered(600)
    assert acct.wants_more() and acct.ask().max_bytes == 600  # tops the bytes back up to 1000
    acct.reset()
    assert (acct.pending_msgs, acct.pending_bytes) == (0, 0)
    with pytest.raises(ValueError):
        PullAccounting(0)


def test_pull_accounting_by_messages_with_a_byte_cap() -> None:
    acct = PullAccounting(max_messages=4, max_bytes=1024)
    assert acct.ask() == PullAsk(4, 1024)  # counted in messages, each request capped in bytes
    for _ in range(3):
        acct.delivered(100)
    assert acct.wants_more() and acct.ask() == PullAsk(3, 1024)
