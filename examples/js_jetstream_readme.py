"""The JavaScript ``@nats-io/jetstream`` README, in Python.

The JavaScript client splits management (``jetstreamManager``) from use
(``jetstream``); in natsjs_sync both are the one JetStream context:
``jsm.streams.add(cfg)`` is ``js.add_stream(...)``/``js.create_stream(...)``,
``jsm.consumers.add(stream, cfg)`` is ``js.add_consumer(stream, ...)``,
``js.consumers.get(stream, name)`` is ``js.consumer(stream, name)`` and
``js.consumers.get(stream)`` (no name) is ``js.ordered_consumer(stream)``.
Promises become return values; ``for await`` becomes ``for``.

    python examples/js_jetstream_readme.py [nats://host:4222]
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, wait
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import AckPolicy, PubAck


def manager(nc: nats.Client) -> dict[str, Any]:
    """"JetStreamManager (JSM)": streams and consumers CRUD."""
    jsm = nc.jetstream()
    listed_before = [si.config.name for si in jsm.list_streams()]
    stream = "mystream"
    subj = "mystream.*"
    jsm.add_stream(name=stream, subjects=[subj])
    # JetStream publishes return once the stream stored the message. (Core
    # publishes plus a flush would only mean the server had read them: the
    # stream stores them a moment later, and the counts below could lag.)
    for i in range(100):
        jsm.publish(f"mystream.{'abcd'[i % 4]}", b"")

    name = jsm.find_stream_name_by_subject("mystream.A")
    si = jsm.stream_info(name)
    si.config.subjects.append("a.b")
    jsm.update_stream(si.config)
    sm = jsm.get_msg(stream, seq=1)
    jsm.delete_msg(stream, 5)
    counts = [jsm.stream_info(stream).state.messages]
    jsm.purge_stream(stream)
    for subject in ("a.b", "a.c", "a.d", "mystream.x"):
        for _ in range(10):
            if subject in ("a.c", "a.d"):
                nc.publish(subject, b"")  # no stream captures these yet: not stored
            else:
                jsm.publish(subject, b"")
    jsm.update_stream(si.config.replace(subjects=["mystream.*", "a.*"]))
    for subject in ("a.c", "a.d"):
        for _ in range(10):
            jsm.publish(subject, b"")
    counts.append(jsm.stream_info(stream).state.messages)
    jsm.purge_stream(stream, subject="a.b")
    jsm.purge_stream(stream, subject="a.c", keep=5)
    jsm.stream("mystream").purge(sequence=90)          # { seq: 90 }
    jsm.stream("mystream").purge(subject="a.d", sequence=150)
    counts.append(jsm.stream_info(stream).state.messages)

    consumers = list(jsm.consumers_info(stream))
    jsm.add_consumer(stream, durable_name="me", ack_policy=AckPolicy.EXPLICIT)
    ci = jsm.consumer_info(stream, "me")
    jsm.delete_consumer(stream, "me")
    jsm.delete_stream(stream)  # the next section's stream "a" takes the subjects a.*
    return {"streams_before": listed_before, "found": name, "first_seq": sm.seq, "counts": counts,
            "consumers_before": len(consumers), "added": ci.name}


def client(nc: nats.Client) -> dict[str, Any]:
    """"JetStream Client": publish with options, and 100 concurrent publishes."""
    js = nc.jetstream()
    js.add_stream(name="a", subjects=["a.*"])
    pa = js.publish("a.b")
    stream, seq, duplicate = pa.stream, pa.seq, pa.duplicate
    js.publish("a.b", b"", msg_id="a")
    js.publish("a.b", b"", expected_last_msg_id="a")
    js.publish("a.b", b"", expected_last_seq=3)
    pa = js.publish("a.b", b"", expected_stream="a")
    buf: list[Future[PubAck]] = [js.publish_async("a.a", b"") for _ in range(100)]
    wait(buf, timeout=10.0)
    last = js.publish("a.b", b"", expected_last_subject_seq=pa.seq)
    try:
        js.publish("a.b", b"", expected_last_seq=1)
        refused = False
    except nats.WrongLastSequenceError:
        refused = True
    return {"first": (stream, seq, duplicate), "async_ok": sum(f.result().seq > 0 for f in buf),
            "last_seq": last.seq, "wrong_last_seq_refused": refused}


def processing(nc: nats.Client) -> dict[str, Any]:
    """"Processing Messages": next, fetch, consume (iterator and callback),
    processing a whole stream, ordered consumers."""
    js = nc.jetstream()
    js.add_stream(name="work", subjects=["work.>"])
    for i in range(60):
        js.publish_async(f"work.{['red', 'green', 'blue'][i % 3]}", str(i).encode())
    js.publish_async_complete(timeout=10.0)
    js.add_consumer("work", durable_name="a", ack_policy=AckPolicy.EXPLICIT)
    c = js.consumer("work", "a")
    out: dict[str, Any] = {}

    # Requesting a single message: None when there is none (here there is).
    m = c.next(timeout=5.0)
    out["next"] = m.subject
    m.ack()

    # Fetching batches: three batches of at most 4, each expiring after 2 s.
    processed = []
    for _ in range(3):
        messages = c.fetch(4, max_wait=2.0)
        n = 0
        for m in messages:
            m.ack()
            n += 1
        processed.append(n)
        print(f"batch completed: {n} msgs processed")
    out["fetch"] = processed

    # Consuming messages (the iterator form), one buffered at a time.
    with c.messages(max_messages=1) as messages:
        out["consume_seqs"] = []
        for _ in range(5):
            m = messages.next(timeout=5.0)
            out["consume_seqs"].append(m.metadata.sequence.stream)
            m.ack()
    # The callback form.
    got = threading.Event()
    seqs: list[int] = []

    def callback(m: Any) -> None:
        seqs.append(m.metadata.sequence.stream)
        m.ack()
        if len(seqs) == 5:
            got.set()

    ctx = c.consume(callback, max_messages=5)
    out["callback_reached_5"] = got.wait(10.0)
    ctx.stop()

    # Processing a stream: a frequency table of the second subject token,
    # until nothing is pending; then the consumer is deleted.
    js.add_consumer("work", durable_name="freq", ack_policy=AckPolicy.EXPLICIT)
    freq = js.consumer("work", "freq")
    data: Counter[str] = Counter()
    with freq.messages() as messages:
        for m in messages:
            data[m.subject.split(".")[1]] += 1
            m.ack()
            if m.metadata.num_pending == 0:
                break
    js.delete_consumer("work", "freq")
    for k in sorted(data):
        print(f"{k}: {data[k]}")
    out["frequency"] = dict(sorted(data.items()))

    # Ordered consumers: no name, optionally filtered.
    a = js.ordered_consumer("work")
    b = js.ordered_consumer("work", filter_subjects=["work.red"])
    out["ordered_all"] = sum(1 for _ in a.fetch(60, max_wait=5.0))
    out["ordered_red"] = [m.subject for m in b.fetch(20, max_wait=5.0)]
    return out


def main(url: str) -> dict[str, Any]:
    with nats.connect(url) as nc:
        return {"manager": manager(nc), "client": client(nc), "processing": processing(nc)}


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for section, outcome in main(url).items():
            print(f"{section}: {outcome}")
