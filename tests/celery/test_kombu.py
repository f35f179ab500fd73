"""The natsjs:// Kombu transport driven by Kombu alone (no Celery worker)."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("kombu")

from kombu import Connection, Exchange, Queue

import natsjs_sync.contrib.celery  # noqa: F401
from natsjs_sync.testing import NatsServer


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
