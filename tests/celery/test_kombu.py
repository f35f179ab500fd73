"""The natsjs:// Kombu transport driven by Kombu alone (no Celery worker)."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest

pytest.importorskip("kombu")

from kombu import Connection, Exchange, Queue

import natsjs_sync
import natsjs_sync.contrib.celery
from natsjs_sync.contrib.celery import transport as nt
from natsjs_sync.testing import NatsServer, nats_server_version

from ..conftest import wait_until
from ..server_bins import nats_server_binary


def drain_until(conn: Connection, got: list[Any], n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} messages within {timeout} s"
        try:
            conn.drain_events(timeout=1)
        except TimeoutError:
            pass


def test_direct_topic_fanout_and_expiration(nats_server: NatsServer) -> None:
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    direct = Queue("d1", Exchange("ex.direct", "direct"), routing_key="k")
    topic = Queue("t1", Exchange("ex.topic", "topic"), routing_key="a.*")
    fan = Queue("f1", Exchange("ex.fan", "fanout"))
    got: list[Any] = []

    def on_message(body: Any, message: Any) -> None:
        got.append(body)
        message.ack()

    with Connection(url) as conn, conn.Consumer([direct, topic, fan], callbacks=[on_message]):
        producer = conn.Producer()
        producer.publish({"to": "direct"}, exchange=direct.exchange, routing_key="k")
        producer.publish({"to": "nobody"}, exchange=topic.exchange, routing_key="b.x")
        producer.publish({"to": "topic"}, exchange=topic.exchange, routing_key="a.x")
        producer.publish({"to": "fanout"}, exchange=fan.exchange, routing_key="")
        # Kombu's expiration property: published (not refused by the stream), delivered.
        producer.publish({"to": "expiring"}, exchange=direct.exchange, routing_key="k", expiration=60)
        try:
            drain_until(conn, got, 4)
        finally:
            print(got)
    assert sorted(b["to"] for b in got) == ["direct", "expiring", "fanout", "topic"], got


def test_another_process_routes_by_bindings_it_did_not_declare(nats_server: NatsServer) -> None:
    # The bindings live on the server: a second connection that only declared the exchange
    # (as a Celery worker replying to `celery inspect`) routes to the queue the first bound.
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    exchange = Exchange("replies", "direct")
    queue = Queue("client-1.replies", exchange, routing_key="client-1")
    got: list[Any] = []
    with Connection(url) as conn, conn.Consumer([queue], callbacks=[lambda b, m: (got.append(b), m.ack())]):
        with Connection(url) as other:
            other.Producer().publish({"reply": 1}, exchange=exchange, routing_key="client-1", declare=[exchange])
        drain_until(conn, got, 1)
    assert got == [{"reply": 1}]


def test_a_nats_context_names_the_server(nats_server: NatsServer, tmp_path: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # natsjs:// with no host and the context transport option: the context's URL is used.
    import json

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    ctx = tmp_path / "nats" / "context"
    ctx.mkdir(parents=True)
    (ctx / "work.json").write_text(json.dumps({"url": nats_server.url}))
    got: list[Any] = []
    queue = Queue("ctxq")
    with Connection("natsjs://", transport_options={"context": "work"}) as conn, \
            conn.Consumer([queue], callbacks=[lambda b, m: (got.append(b), m.ack())]):
        conn.Producer().publish({"via": "context"}, routing_key="ctxq", declare=[queue])
        drain_until(conn, got, 1)
    assert got == [{"via": "context"}]


def test_priorities_are_refused_by_name(nats_server: NatsServer) -> None:
    # A message priority or a priority queue cannot be honoured by a stream: refused, not dropped.
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    queue = Queue("prio", Exchange("prio", "direct"), routing_key="prio")
    with Connection(url) as conn:
        producer = conn.Producer()
        with pytest.raises(NotImplementedError, match="priorities are not supported"):
            producer.publish({"n": 1}, exchange=queue.exchange, routing_key="prio", declare=[queue], priority=5)
        with pytest.raises(NotImplementedError, match="x-max-priority"):
            Queue("prio-q", queue.exchange, routing_key="pq", max_priority=10)(conn.default_channel).declare()
        # Priority 0 is what Kombu gives every message: accepted.
        producer.publish({"n": 2}, exchange=queue.exchange, routing_key="prio", declare=[queue], priority=0)
        got: list[Any] = []
        with conn.Consumer([queue], callbacks=[lambda b, m: (got.append(b), m.ack())]):
            drain_until(conn, got, 1)
    assert got == [{"n": 2}]


def _server(version: str | None) -> NatsServer:
    """A server of ``version`` (``None``: the suite's own), started."""
    server = NatsServer(binary=nats_server_binary(version)) if version else NatsServer()
    server.start()
    return server


def _publish_with_eta(url: str, queue_name: str, ahead: datetime.timedelta) -> datetime.datetime:
    """Publish ``{"n": 0}``, then ``{"n": 1}`` with an eta ``ahead`` of the moment the first one
    is in (its stream made); returns that eta."""
    queue = Queue(queue_name)
    with Connection(url) as conn:
        producer = conn.Producer()
        producer.publish({"n": 0}, routing_key=queue_name, declare=[queue])
        eta = datetime.datetime.now(datetime.timezone.utc) + ahead
        producer.publish({"n": 1}, routing_key=queue_name, declare=[queue], headers={"eta": eta.isoformat()})
    return eta


def _consume_all(url: str, queue_name: str, n: int) -> list[Any]:
    got: list[Any] = []
    with Connection(url) as conn, conn.Consumer([Queue(queue_name)], callbacks=[lambda b, m: (got.append(b), m.ack())]):
        drain_until(conn, got, n, timeout=60)
    return got


@pytest.mark.parametrize("version", [None, "2.12.4"])
def test_eta_messages_wait_in_the_server_until_due(version: str | None) -> None:
    # ADR-51 message schedules: the message with an eta waits on a schedule subject of the
    # queue's stream; the server publishes it to the queue's subject when due (a second before
    # its eta: the worker holds that second) and removes the schedule in the same step.
    if version is None and (nats_server_version() or (0, 0, 0)) < nt.SCHEDULES_MIN_SERVER:
        pytest.skip("the suite's nats-server has no usable message schedules")
    server = _server(version)
    try:
        url = f"natsjs://127.0.0.1:{server.port}"
        # Far enough ahead of the first message (connected, its stream made) that a loaded
        # machine cannot reach the moment the task is due before its own publish (then it goes
        # to the queue at once, unscheduled): seconds for one publish on an open connection.
        eta = _publish_with_eta(url, "later", datetime.timedelta(seconds=4))
        with natsjs_sync.connect(server.url) as nc:
            stream = nc.jetstream().stream("STREAM_later")
            assert stream.config.allow_msg_schedules
            assert stream.config.subjects == ["later", "celery.schedule.STREAM_later.*"]

            def on_queue_subject() -> int:
                return sum((stream.info(subjects_filter="later").state.subjects or {}).values())

            assert wait_until(lambda: on_queue_subject() >= 2, timeout=60), \
                "the scheduled message never reached the queue"
            msg = stream.get_last_msg_for_subject("later")
            assert msg.headers is not None
            assert msg.headers["Nats-Scheduler"].startswith("celery.schedule.STREAM_later.")
            assert msg.time is not None
            # Never before the second it was scheduled for (the whole second before eta - lead).
            due = (eta - datetime.timedelta(seconds=nt.SCHEDULE_LEAD)).replace(microsecond=0)
            assert msg.time >= due
            assert stream.info().state.messages == 2  # the schedule itself is gone
        assert sorted(b["n"] for b in _consume_all(url, "later", 2)) == [0, 1]
        with natsjs_sync.connect(server.url) as nc:
            assert nc.jetstream().stream("STREAM_later").info().state.messages == 0
    finally:
        server.close()


@pytest.mark.parametrize("version", ["2.11.0", "2.12.0"])
def test_eta_messages_go_to_the_queue_at_once_without_usable_schedules(version: str) -> None:
    # 2.11 has no message schedules, 2.12.0's scheduler can stop firing: the message goes to
    # the queue at once and the worker holds it until its eta (Kombu's way for every broker).
    server = _server(version)
    try:
        url = f"natsjs://127.0.0.1:{server.port}"
        _publish_with_eta(url, "later", datetime.timedelta(seconds=3600))
        with natsjs_sync.connect(server.url) as nc:
            stream = nc.jetstream().stream("STREAM_later")
            assert stream.config.subjects == ["later"]
            assert not stream.config.allow_msg_schedules
            assert stream.info().state.messages == 2
        assert sorted(b["n"] for b in _consume_all(url, "later", 2)) == [0, 1]
    finally:
        server.close()


def test_eta_messages_in_a_stream_made_without_schedules_go_to_the_queue(nats_server: NatsServer) -> None:
    # A stream made by an earlier version of the transport, or by an operator, is used as it is.
    with natsjs_sync.connect(nats_server.url) as nc:
        nc.jetstream().create_stream(name="STREAM_older", subjects=["older"], retention="workqueue")
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    _publish_with_eta(url, "older", datetime.timedelta(seconds=3600))
    with natsjs_sync.connect(nats_server.url) as nc:
        assert nc.jetstream().stream("STREAM_older").info().state.messages == 2
    assert sorted(b["n"] for b in _consume_all(url, "older", 2)) == [0, 1]


def test_a_queue_laid_out_by_the_nats_py_transport_is_shared(nats_server: NatsServer) -> None:
    # The layout of the nats-py transport proposed for Kombu (pull requests 2541 and 2653):
    # memory stream STREAM_<queue> on the queue's subject, durable CONSUMER_<queue> filtered on
    # it with the server's default ack wait, the Kombu envelope as the JSON payload.
    from natsjs_sync.jetstream import ConsumerConfig

    url = f"natsjs://127.0.0.1:{nats_server.port}"
    with natsjs_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="STREAM_shared", subjects=["shared"], retention="workqueue", storage="memory",
                         duplicate_window=120.0, allow_direct=True)
        theirs = js.create_consumer("STREAM_shared", ConsumerConfig(
            durable_name="CONSUMER_shared", ack_policy="explicit", deliver_policy="all", filter_subject="shared",
            ack_wait=3.0))
        # Our producer into their stream: their consumer reads the envelope as they do.
        with Connection(url) as conn:
            conn.Producer().publish({"from": "natsjs"}, routing_key="shared", declare=[Queue("shared")])
        [raw] = list(theirs.fetch(1, max_wait=10))
        envelope = json.loads(raw.data)
        assert {"body", "content-type", "properties"} <= set(envelope)
        # Their producer (the same bytes on the same subject), and a clean-body message (no
        # envelope: dropped with a term, not redelivered for ever).
        js.publish("shared", raw.data)
        raw.ack()
        js.publish("shared", b'[[1, 2], {}, {}]', headers={"Kombu-Content-Type": "application/json"})
        got: list[Any] = []
        with Connection(url) as conn, conn.Consumer([Queue("shared")], callbacks=[lambda b, m: got.append(m)]):
            drain_until(conn, got, 1)
            # Their consumer's ack wait (3 s), not our visibility timeout (1800 s), paces the
            # in-progress acks of what this connection holds.
            assert conn.transport.progress_interval == pytest.approx(1.0)
            got[0].ack()
            # While this consumer runs, its puller reaches the clean-body message and drops it.
            deadline = time.monotonic() + 60
            while js.stream("STREAM_shared").info().state.messages:
                assert time.monotonic() < deadline, "the clean-body message was not dropped"
                try:
                    conn.drain_events(timeout=0.2)
                except TimeoutError:
                    pass
        assert [m.payload for m in got] == [{"from": "natsjs"}]


def test_messages_that_are_not_kombu_messages_are_dropped_not_raised(nats_server: NatsServer) -> None:
    # On a fanout subject (anyone may publish there) and on a queue's subject, read by a consumer
    # and by basic_get: dropped (a queue's terminated), never raised to the caller.
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    fan = Queue("nk-fan", Exchange("nk.fan", "fanout"))
    queue = Queue("nk")
    bad = [b'{"hello": 1}', b'{"body": "x", "properties": 1}', b"[1]", b"\xff",
           b'{"body": "!!!notb64", "properties": {"body_encoding": "base64"}}']
    got: list[Any] = []
    with Connection(url) as conn, conn.Consumer([fan, queue], callbacks=[lambda b, m: (got.append(b), m.ack())]):
        producer = conn.Producer()
        producer.publish({"n": 0}, exchange=fan.exchange, routing_key="")
        drain_until(conn, got, 1)  # the fanout subscription is in place
        with natsjs_sync.connect(nats_server.url) as nc:
            js = nc.jetstream()
            for data in bad:
                nc.publish(nt.fanout_subject("nk.fan"), data)
                js.publish("nk", data)
            nc.flush()
        producer.publish({"n": 1}, exchange=fan.exchange, routing_key="")
        producer.publish({"n": 2}, routing_key="nk", declare=[queue])
        drain_until(conn, got, 3)
        with natsjs_sync.connect(nats_server.url) as nc:
            stream = nc.jetstream().stream("STREAM_nk")
            # every message acked or terminated
            assert wait_until(lambda: not stream.info().state.messages, timeout=30), "a message was left in the queue"
    # The fanout's message and the queue's come through two subscriptions: either may come first.
    assert got[0] == {"n": 0} and sorted(got, key=lambda b: b["n"]) == [{"n": 0}, {"n": 1}, {"n": 2}]
    # basic_get: the message Kombu cannot read is terminated, the next one is returned.
    with natsjs_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.publish("nk", bad[0])
    with Connection(url) as conn:
        simple = conn.SimpleQueue(queue)
        producer = conn.Producer()
        producer.publish({"n": 3}, routing_key="nk", declare=[queue])
        channel = conn.default_channel
        bound = queue(channel)
        deadline = time.monotonic() + 30
        message = None
        while message is None:
            assert time.monotonic() < deadline, "basic_get found no message"
            message = bound.get(no_ack=True)
        assert message.payload == {"n": 3}
        simple.close()


def test_a_stream_that_discards_new_messages_is_made_without_schedules(nats_server: NatsServer) -> None:
    # The server refuses message schedules with discard="new": the queue's stream is made
    # without them and eta messages go to the queue at once, rather than every publish failing.
    if (nats_server_version() or (0, 0, 0)) < nt.SCHEDULES_MIN_SERVER:
        pytest.skip("the suite's nats-server has no usable message schedules")
    url = f"natsjs://127.0.0.1:{nats_server.port}"
    options = {"stream_config": {"discard": "new", "max_msgs": 1000}}
    eta = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3600)
    queue = Queue("bounded")
    with Connection(url, transport_options=options) as conn:
        producer = conn.Producer()
        producer.publish({"n": 0}, routing_key="bounded", declare=[queue])
        producer.publish({"n": 1}, routing_key="bounded", declare=[queue], headers={"eta": eta.isoformat()})
    with natsjs_sync.connect(nats_server.url) as nc:
        stream = nc.jetstream().stream("STREAM_bounded")
        assert (stream.config.subjects, stream.config.discard) == (["bounded"], "new")
        assert stream.info().state.messages == 2
    assert sorted(b["n"] for b in _consume_all(url, "bounded", 2)) == [0, 1]
