"""The advisory feed against a real server: each kind arrives as its model; bounded, closable."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import natsjs_sync as nats
from natsjs_sync.advisories import (
    Advisory,
    AdvisoryFeed,
    ConsumerActionAdvisory,
    MaxDeliveriesAdvisory,
    NakAdvisory,
    StreamActionAdvisory,
    StreamLeaderElectedAdvisory,
    TerminatedAdvisory,
    UnknownAdvisory,
    advisory_subjects,
    decode_advisory,
)
from natsjs_sync.errors import InvalidResponseError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer
from tests.conftest import wait_until


def first(feed: AdvisoryFeed, match: Callable[[Advisory], bool], limit: int = 50) -> Advisory:
    """The first advisory of ``feed`` that ``match``es, among at most ``limit``."""
    for _ in range(limit):
        adv = feed.next(timeout=10.0)
        if match(adv):
            return adv
    raise AssertionError("no matching advisory")


def test_message_advisories_arrive_typed(nc: nats.Client, js: JetStream, stream: Stream) -> None:
    subjects = advisory_subjects(("max_deliver", "terminated", "nak"), stream.name)
    with AdvisoryFeed(nc, subjects) as feed:
        cons = stream.create_consumer(durable_name="C", ack_policy="explicit", max_deliver=1)
        js.publish(f"{stream.name}.a", b"1")
        js.publish(f"{stream.name}.b", b"2")
        msg = cons.next(timeout=5.0)
        assert msg.reply
        nc.request(msg.reply, b"-NAK", timeout=5.0)  # a NAK the server confirms: the next pull sees it
        cons.next(timeout=5.0).term(reason="cannot parse")  # that pull finds message 1 over max_deliver
        got = [feed.next(timeout=10.0) for _ in range(3)]
    nak = next(a for a in got if isinstance(a, NakAdvisory))
    assert (nak.stream, nak.consumer, nak.stream_seq, nak.consumer_seq, nak.deliveries) == (stream.name, "C", 1, 1, 1)
    assert nak.type == "io.nats.jetstream.advisory.v1.nak" and nak.id and nak.timestamp is not None
    md = next(a for a in got if isinstance(a, MaxDeliveriesAdvisory))
    assert (md.stream, md.consumer, md.stream_seq, md.deliveries) == (stream.name, "C", 1, 1)
    assert md.type == "io.nats.jetstream.advisory.v1.max_deliver"
    term = next(a for a in got if isinstance(a, TerminatedAdvisory))
    assert (term.stream, term.consumer, term.stream_seq, term.reason) == (stream.name, "C", 2, "cannot parse")


def test_consumer_and_stream_actions_arrive_typed(nc: nats.Client, js: JetStream) -> None:
    name = "S" + next_nuid()
    subjects = advisory_subjects(("stream_action", "consumer_action"), name)
    with AdvisoryFeed(nc, subjects) as feed:
        st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        st.create_consumer(durable_name="D", ack_policy="explicit")
        st.delete_consumer("D")
        js.update_stream(name=name, subjects=[f"{name}.>"], storage="memory", max_msgs=10)
        js.delete_stream(name)
        got = [feed.next(timeout=10.0) for _ in range(5)]
    assert [(type(a), a.action) for a in got] == [  # type: ignore[union-attr]
        (StreamActionAdvisory, "create"), (ConsumerActionAdvisory, "create"), (ConsumerActionAdvisory, "delete"),
        (StreamActionAdvisory, "modify"), (StreamActionAdvisory, "delete")]
    cons = got[1]
    assert isinstance(cons, ConsumerActionAdvisory) and (cons.stream, cons.consumer) == (name, "D")
    assert cons.type == "io.nats.jetstream.advisory.v1.consumer_action"


def test_an_unmodelled_advisory_keeps_its_json(nc: nats.Client, js: JetStream) -> None:
    name = "S" + next_nuid()
    with AdvisoryFeed(nc, "$JS.EVENT.ADVISORY.API") as feed:
        js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        try:
            adv = first(feed, lambda a: isinstance(a, UnknownAdvisory) and name in a.raw.get("subject", ""))
        finally:
            js.delete_stream(name)
    assert isinstance(adv, UnknownAdvisory)
    assert adv.type == "io.nats.jetstream.advisory.v1.api_audit" and adv.subject == "$JS.EVENT.ADVISORY.API"
    assert adv.raw["subject"] == f"$JS.API.STREAM.CREATE.{name}"


def test_fields_a_newer_server_adds_are_kept() -> None:
    adv = decode_advisory(b'{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"S","consumer":"C",'
                          b'"stream_seq":7,"deliveries":3,"new_field":{"x":1}}')
    assert isinstance(adv, MaxDeliveriesAdvisory) and adv.stream_seq == 7
    assert adv.unknown_fields == {"new_field": {"x": 1}}
    led = decode_advisory(b'{"type":"io.nats.jetstream.advisory.v1.stream_leader_elected","stream":"S",'
                          b'"leader":"n1","replicas":[{"name":"n2","current":true,"active":5,"peer":"p"}]}')
    assert isinstance(led, StreamLeaderElectedAdvisory) and led.replicas and led.replicas[0].current


@pytest.mark.parametrize("data", [b"not json", b"[1]",
                                  b'{"type":"io.nats.jetstream.advisory.v1.nak","stream_seq":"x"}'])
def test_a_broken_advisory_is_our_error(data: bytes) -> None:
    with pytest.raises(InvalidResponseError):
        decode_advisory(data, "$JS.EVENT.ADVISORY.X")


def test_the_queue_is_bounded_and_counts_drops(nc: nats.Client) -> None:
    subject = "$JS.EVENT.ADVISORY.TEST." + next_nuid()
    with AdvisoryFeed(nc, subject, max_pending=2) as feed:
        for i in range(5):
            nc.publish(subject, b'{"type":"x.test","n":%d}' % i)
        nc.flush(timeout=5.0)
        # Delivery to the feed runs on the dispatcher: the five have been handed over once
        # two are queued and three dropped.
        assert wait_until(lambda: feed.pending + feed.dropped == 5, timeout=10.0)
        assert (feed.pending, feed.dropped) == (2, 3)
        assert [a.raw["n"] for a in (feed.next(), feed.next())] == [0, 1]  # type: ignore[union-attr]
        with pytest.raises(nats.TimeoutError):
            feed.next(timeout=0.05)


def test_close_wakes_a_waiting_reader(nc: nats.Client) -> None:
    feed = AdvisoryFeed(nc, "$JS.EVENT.ADVISORY.TEST." + next_nuid())
    out: list[Advisory] = []
    reader = threading.Thread(target=lambda: out.extend(feed))
    reader.start()
    feed.close()
    reader.join(timeout=10.0)
    assert not reader.is_alive() and out == []
    with pytest.raises(nats.ConnectionClosedError):
        feed.next(timeout=1.0)
    feed.close()  # idempotent


def test_bad_arguments(nc: nats.Client) -> None:
    with pytest.raises(ValueError):
        AdvisoryFeed(nc, max_pending=0)
    with pytest.raises(ValueError):
        AdvisoryFeed(nc, [])
    with pytest.raises(ValueError):
        advisory_subjects(("nope",))


def test_closing_the_client_ends_the_iteration(shared_server: NatsServer) -> None:
    nc = nats.connect(shared_server.url)
    feed = AdvisoryFeed(nc, "$JS.EVENT.ADVISORY.TEST." + next_nuid())
    out: list[Advisory] = []
    reader = threading.Thread(target=lambda: out.extend(feed))
    reader.start()
    nc.close()
    reader.join(timeout=10.0)
    assert not reader.is_alive() and out == [] and feed.is_closed
    feed.close()


def test_iterating_skips_a_message_that_is_not_an_advisory(nc: nats.Client) -> None:
    """Anyone allowed to publish on an advisory subject can send something that does not decode: the
    iteration goes on past it (a dead-letter helper following the feed would otherwise stop)."""
    subject = "$JS.EVENT.ADVISORY.TEST." + next_nuid()
    with AdvisoryFeed(nc, subject) as feed:
        nc.publish(subject, b"not json")
        nc.publish(subject, b'{"type":"x.test","n":1}')
        nc.flush(timeout=5.0)
        adv = next(iter(feed))
        assert isinstance(adv, UnknownAdvisory) and adv.raw["n"] == 1
        assert feed.invalid == 1
        nc.publish(subject, b"[1]")
        nc.publish(subject, b'{"type":"x.test","n":2}')
        nc.flush(timeout=5.0)
        assert next(feed.until_idle(10.0)).raw["n"] == 2  # type: ignore[union-attr]
        assert feed.invalid == 2


def test_closing_a_full_feed_keeps_what_it_received(nc: nats.Client) -> None:
    """The readers get every advisory received before the close, then the end (none is made room for it)."""
    subject = "$JS.EVENT.ADVISORY.TEST." + next_nuid()
    feed = AdvisoryFeed(nc, subject, max_pending=2)
    for i in range(3):
        nc.publish(subject, b'{"type":"x.test","n":%d}' % i)
    nc.flush(timeout=5.0)
    assert wait_until(lambda: feed.pending + feed.dropped == 3, timeout=10.0)
    feed.close()
    assert feed.pending == 2
    assert [a.raw["n"] for a in feed] == [0, 1]  # type: ignore[union-attr]
    assert feed.dropped == 1
