"""request_many: every reply to one request, ending on a count, a total timeout,
a stall between replies or a sentinel; the inbox is released however it ends."""

from __future__ import annotations

import gc
import json
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.request_many import ReplyIterator, request_many
from natsjs_sync.testing import NatsServer

from ..conftest import wait_until


def inbox_subs(server: NatsServer, client_name: str) -> list[str]:
    """The reply inboxes the server holds for the named connection."""
    url = f"http://127.0.0.1:{server.monitor_port}/connz?subs=1"
    with urllib.request.urlopen(url, timeout=5) as resp:
        connz = json.load(resp)
    subs: list[str] = []
    for conn in connz["connections"]:
        if conn.get("name") == client_name:
            subs += [s for s in conn.get("subscriptions_list", []) if s.startswith("_INBOX.")]
    return subs


@pytest.fixture
def client(shared_server: NatsServer) -> Iterator[nats.Client]:
    with nats.connect(shared_server.url, name="many") as nc:
        yield nc


def answer_with(nc: nats.Client, subject: str, *replies: bytes) -> None:
    """Three responders would each answer once; one responder sending several
    replies shows the order is kept."""

    def answer(msg: nats.Msg) -> None:
        for data in replies:
            msg.respond(data)

    nc.subscribe(subject, cb=answer)
    nc.flush()


def test_max_messages_ends_after_that_many(client: nats.Client) -> None:
    for i in range(3):
        client.subscribe("many.count", cb=lambda m, i=i: m.respond(f"r{i}".encode()))
    client.flush()
    got = list(client.request_many("many.count", b"q", max_messages=2, timeout=30))
    assert len(got) == 2 and all(m.data.startswith(b"r") for m in got)


def test_total_timeout_ends_with_the_replies_that_came(client: nats.Client) -> None:
    answer_with(client, "many.total", b"a", b"b")
    start = time.monotonic()
    # 3 s for both replies to come back through the same client's callback
    # thread on a loaded machine (0.5 s was once too short for the second).
    got = [m.data for m in client.request_many("many.total", timeout=3.0)]
    assert got == [b"a", b"b"]
    assert time.monotonic() - start < 10  # a total that was not applied would wait for ever


def test_stall_ends_when_the_replies_pause(client: nats.Client) -> None:
    late = threading.Event()

    def answer(msg: nats.Msg) -> None:
        msg.respond(b"1")
        msg.respond(b"2")
        late.wait(30)  # the third reply comes only after the iterator has ended
        msg.respond(b"3")

    client.subscribe("many.stall", cb=answer)
    client.flush()
    start = time.monotonic()
    try:
        # 1.5 s: the second reply, sent right after the first, must not be taken for a pause
        # when a loaded machine holds the answering thread between the two.
        got = [m.data for m in client.request_many("many.stall", timeout=30, stall=1.5)]
    finally:
        late.set()
    assert got == [b"1", b"2"]
    assert time.monotonic() - start < 10  # without the stall it would wait the 30 s total


def test_first_reply_is_waited_for_with_the_total_not_the_stall(client: nats.Client) -> None:
    go = threading.Event()

    def answer(msg: nats.Msg) -> None:
        go.wait(30)
        msg.respond(b"slow but in time")

    client.subscribe("many.first", cb=answer)
    client.flush()
    replies = client.request_many("many.first", timeout=30, stall=0.05)
    threading.Timer(0.3, go.set).start()  # later than the stall, well within the total
    assert [m.data for m in replies] == [b"slow but in time"]


def test_standard_sentinel_ends_and_is_not_yielded(client: nats.Client) -> None:
    answer_with(client, "many.sentinel", b"a", b"b", b"", b"after")
    got = [m.data for m in client.request_many("many.sentinel", sentinel=True, timeout=30)]
    assert got == [b"a", b"b"]


def test_sentinel_predicate(client: nats.Client) -> None:
    answer_with(client, "many.pred", b"x", b"", b"END", b"y")
    got = [m.data for m in client.request_many("many.pred", sentinel=lambda m: m.data == b"END", timeout=30)]
    assert got == [b"x", b""]  # an empty reply is data unless sentinel=True


def test_no_responders(client: nats.Client) -> None:
    replies = client.request_many("many.nobody", timeout=30)
    with pytest.raises(nats.NoRespondersError):
        next(replies)
    assert list(replies) == []


def test_headers_go_out_and_come_back(client: nats.Client) -> None:
    client.subscribe("many.hdr", cb=lambda m: m.respond(b"ok", headers={"Echo": (m.headers or {})["X"]}))
    client.flush()
    (reply,) = request_many(client, "many.hdr", b"", headers={"X": "42"}, max_messages=1, timeout=30)
    assert reply.headers == {"Echo": "42"}


def test_no_total_timeout_with_a_count(client: nats.Client) -> None:
    answer_with(client, "many.none", b"1", b"2", b"3")
    assert [m.data for m in client.request_many("many.none", timeout=None, max_messages=3)] == [b"1", b"2", b"3"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"subject": "bad subject"}, nats.BadSubjectError),
        ({"subject": "many.*"}, nats.BadSubjectError),
        ({"max_messages": 0}, ValueError),
        ({"max_messages": True}, ValueError),
        ({"stall": 0}, ValueError),
        ({"stall": "1"}, TypeError),
        ({"stall": float("nan")}, ValueError),
        ({"sentinel": "end"}, TypeError),
        ({"payload": "text"}, TypeError),
        ({"timeout": -1}, ValueError),
        ({"timeout": "1"}, TypeError),
        ({"headers": {"Bad Key": "x"}}, nats.BadHeaderError),
    ],
)
def test_bad_arguments_raise_before_anything_is_sent(
    client: nats.Client, shared_server: NatsServer, kwargs: dict[str, object], error: type[Exception]
) -> None:
    args: dict[str, object] = {"subject": "many.ok", "payload": b""}
    args.update(kwargs)
    sent = client.stats.out_msgs
    with pytest.raises(error):
        client.request_many(**args)  # type: ignore[arg-type]
    client.flush()
    assert client.stats.out_msgs == sent
    assert inbox_subs(shared_server, "many") == []


def test_too_large_is_refused_before_sending(client: nats.Client) -> None:
    with pytest.raises(nats.MaxPayloadError):
        client.request_many("many.big", b"x" * (client.max_payload + 1))


def test_inbox_released_on_exhaustion_break_gc_and_close(client: nats.Client, shared_server: NatsServer) -> None:
    answer_with(client, "many.rel", b"1", b"2", b"3")
    subs = lambda: inbox_subs(shared_server, "many")  # noqa: E731

    assert list(client.request_many("many.rel", max_messages=3, timeout=30))
    client.flush()
    assert wait_until(lambda: subs() == [])

    for _ in client.request_many("many.rel", timeout=30):
        break  # the loop's iterator is dropped here, and with it the inbox
    client.flush()
    assert wait_until(lambda: subs() == [])

    kept = client.request_many("many.rel", timeout=30)
    assert next(kept).data == b"1"
    client.flush()
    assert len(subs()) == 1  # still open while referenced
    del kept
    gc.collect()
    client.flush()
    assert wait_until(lambda: subs() == [])

    with client.request_many("many.rel", timeout=30) as replies:
        assert isinstance(replies, ReplyIterator) and next(replies).data == b"1"
    client.flush()
    assert wait_until(lambda: subs() == [])
    assert list(replies) == []  # closed: nothing more


def test_client_closed_while_iterating(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url)
    try:
        answer_with(nc, "many.closing", b"first")
        replies = nc.request_many("many.closing", timeout=None)
        assert next(replies).data == b"first"
        nc.close()
        with pytest.raises(nats.ConnectionClosedError):
            next(replies)
    finally:
        nc.close()
