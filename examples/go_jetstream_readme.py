"""The Go client's ``jetstream`` package README, section by section, in Python.

Each function is one section of the README (../shared/reference in the
project), with the Go calls mapped one to one: ``js.CreateStream(ctx, cfg)``
becomes ``js.create_stream(cfg)``, ``ctx`` deadlines become ``timeout=``
arguments, ``msgs.Messages()`` channels become plain iteration, and errors are
exceptions instead of return values.

    python examples/go_jetstream_readme.py [nats://host:4222]
"""

from __future__ import annotations

import io
import threading
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import AckPolicy, ConsumerConfig, KeyValueConfig, ObjectMeta, StreamConfig


def basic_usage(nc: nats.Client) -> int:
    """"Basic usage": stream, 100 publishes, a durable consumer, then Fetch,
    Consume and Messages until all 100 are processed."""
    js = nc.jetstream(timeout=30.0)
    s = js.create_stream(StreamConfig(name="ORDERS", subjects=["ORDERS.*"]))
    for i in range(100):
        js.publish("ORDERS.new", f"hello message {i}".encode())
    print("Published 100 hello messages")

    c = s.create_or_update_consumer(ConsumerConfig(durable_name="CONS", ack_policy=AckPolicy.EXPLICIT))

    message_counter = 0
    counter_lock = threading.Lock()
    all_done = threading.Event()

    msgs = c.fetch(10)
    for msg in msgs:
        msg.ack()
        message_counter += 1
    print(f"received {message_counter} messages via fetch")
    if msgs.error is not None:
        print("Error during fetch():", msgs.error)

    # Receive messages continuously in a callback ... (drained after 70 so the
    # iterator below gets the rest; in the Go README both race).
    def handler(msg: Any) -> None:
        nonlocal message_counter
        msg.ack()
        with counter_lock:
            message_counter += 1
            if message_counter == 70:
                all_done.set()

    cons = c.consume(handler, max_messages=10)
    all_done.wait(10.0)
    cons.drain()  # stop pulling; what was already buffered still reaches the handler

    # ... and iterate over messages until all 100 have been processed.
    with c.messages() as it:
        for _ in range(100):
            with counter_lock:
                if message_counter >= 100:
                    break
            msg = it.next(timeout=10.0)
            msg.ack()
            with counter_lock:
                message_counter += 1
    return message_counter


def streams(nc: nats.Client) -> dict[str, Any]:
    """"Streams": CRUD, listing, purge, get/delete messages, info."""
    js = nc.jetstream()
    s = js.create_stream(StreamConfig(name="ORDERS2", subjects=["ORDERS2.*"]))
    s = js.update_stream(StreamConfig(name="ORDERS2", subjects=["ORDERS2.*"], description="updated stream"))
    s = js.stream("ORDERS2")
    names = list(js.stream_names())
    configs = [info.config.name for info in js.list_streams()]
    for i in range(200):
        js.publish("ORDERS2.new" if i % 2 else "ORDERS2.old", f"{i}".encode())

    msg = s.get_msg(100)
    last = s.get_last_msg_for_subject("ORDERS2.new")
    s.delete_msg(100)
    s.purge(subject="ORDERS2.old")  # WithPurgeSubject
    s.purge(sequence=150)           # WithPurgeSequence: everything below 150
    s.purge(keep=10)                # WithPurgeKeep
    info = s.info()
    cached = s.cached_info
    s.purge()                       # everything
    empty = s.info().state.messages
    js.delete_stream("ORDERS2")
    return {"names": names, "configs": configs, "msg_100": msg.data, "last_new": last.seq,
            "kept": info.state.messages, "description": cached.config.description, "after_purge": empty}


def consumers(nc: nats.Client) -> dict[str, Any]:
    """"Consumers": management on JetStream and on Stream, info, listing, ordered."""
    js = nc.jetstream()
    cons = js.create_consumer("ORDERS", ConsumerConfig(durable_name="foo", ack_policy=AckPolicy.EXPLICIT))
    ephemeral = js.create_consumer("ORDERS", ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
    js.create_or_update_consumer("ORDERS", ConsumerConfig(name="bar"))
    updated = js.update_consumer("ORDERS", ConsumerConfig(durable_name="foo", ack_policy=AckPolicy.EXPLICIT,
                                                          description="updated consumer"))
    cons = js.consumer("ORDERS", "foo")
    stream = js.stream("ORDERS")
    names = sorted(stream.consumer_names())
    listed = sorted(ci.name for ci in stream.list_consumers())
    info = cons.info()
    js.delete_consumer("ORDERS", "foo")
    stream.delete_consumer("bar")

    ordered = js.ordered_consumer("ORDERS", filter_subjects=["ORDERS.new"])
    first = ordered.next(timeout=5.0)
    return {"names": names, "listed": listed, "description": updated.cached_info.config.description,
            "durable": info.config.durable_name, "ephemeral_name": ephemeral.cached_info.name,
            "ordered_first": first.data}


def receiving(nc: nats.Client) -> dict[str, Any]:
    """"Receiving messages": Fetch, FetchBytes, FetchNoWait, Consume, Messages."""
    js = nc.jetstream()
    c = js.create_or_update_consumer("ORDERS", ConsumerConfig(name="recv", ack_policy=AckPolicy.EXPLICIT,
                                                              filter_subject="ORDERS.new"))
    got: dict[str, Any] = {}
    got["fetch"] = len([m.ack() for m in c.fetch(10)])
    got["fetch_bytes"] = len([m.ack() for m in c.fetch_bytes(1024)])
    got["fetch_no_wait"] = len([m.ack() for m in c.fetch_no_wait(10)])

    received = threading.Event()
    count = 0

    def on_msg(msg: Any) -> None:
        nonlocal count
        msg.ack()
        count += 1
        if count == 5:
            received.set()

    ctx = c.consume(on_msg, max_messages=5)
    received.wait(10.0)
    ctx.stop()
    got["consume"] = count
    # consume() pulls on until stop(): on a slow machine it may have taken every
    # message there was (and the few it received after stop() come back only
    # after ack_wait), so give the one-by-one read a message of its own.
    js.publish("ORDERS.new", b"hello one by one")
    with c.messages(max_messages=1) as it:  # one by one, as for a work queue
        got["messages_one_by_one"] = it.next(timeout=5.0).data
    return got


def publishing(nc: nats.Client) -> dict[str, Any]:
    """"Publishing on stream": sync with message ids, and async with futures."""
    js = nc.jetstream()
    ack = js.publish("ORDERS.new", b"hello")
    print(f"Published msg with sequence number {ack.seq} on stream {ack.stream!r}")
    a1 = js.publish("ORDERS.new", b"hello", headers={"Nats-Msg-Id": "id"})
    a2 = js.publish("ORDERS.new", b"hello", msg_id="id")
    future = js.publish_async("ORDERS.new", b"hello")
    try:
        async_ack = future.result(timeout=5.0)
    except nats.NatsError as err:
        print(err)
        raise
    return {"first_dup": a1.duplicate, "second_dup": a2.duplicate, "same_seq": a1.seq == a2.seq,
            "async_seq": async_ack.seq}


def key_value(nc: nats.Client) -> dict[str, Any]:
    """"KeyValue Store": CRUD, watch, keys, purge deletes, status."""
    js = nc.jetstream()
    kv = js.create_key_value(KeyValueConfig(bucket="profiles"))
    kv.put("sue.color", b"blue")
    entry = kv.get("sue.color")
    print(f"{entry.key} @ {entry.revision} -> {entry.value!r}")
    kv.update("sue.color", b"red", 1)
    try:
        kv.create("sue.color", b"purple")
    except nats.KeyExistsError:
        create_error = "KeyExistsError"  # (the class raised is nats-py's KeyWrongLastSequenceError, a subclass)
    kv.delete("sue.color")
    try:
        kv.get("sue.color")
    except nats.KeyNotFoundError as err:
        get_error = type(err).__name__

    kv.put("sue.color", b"blue")
    with kv.watch("sue.*") as watcher:
        kv.put("sue.age", b"43")
        kv.put("sue.color", b"red")
        seen = [watcher.updates(timeout=5.0) for _ in range(4)]
    watched = [None if e is None else (e.key, e.revision, e.value) for e in seen]

    kv.put("bucket", b"profiles")
    keys = sorted(kv.keys())
    kv.purge("bucket")
    kv.purge_deletes(older_than=0)
    status = kv.status()
    result = {"create_error": create_error, "get_error": get_error, "watched": watched, "keys": keys,
              "bucket": status.bucket, "values": status.values}
    js.delete_key_value("profiles")
    return result


def object_store(nc: nats.Client, tmp_file: str) -> dict[str, Any]:
    """"Object Store": put from a reader/string/bytes/file, get, delete, watch,
    update meta (rename), list, status."""
    js = nc.jetstream()
    os_ = js.create_object_store(bucket="configs")
    os_.put(ObjectMeta(name="config-1"), io.BytesIO(b"first config"))
    os_.put_string("config-2", "second config")
    os_.put_bytes("config-3", b"third config")
    os_.put_file(tmp_file)
    with os_.get("config-1") as obj:
        data = obj.read()
        info = obj.info
    print(f"{info.bucket}.{info.name} -> {data!r}")
    os_.delete("config-1")
    try:
        os_.get("config-1")
    except nats.ObjectNotFoundError as err:
        get_error = type(err).__name__

    os_.put_string("config-1", "first config")
    with os_.watch() as watcher:
        os_.put_string("config-5", "fifth config")
        os_.update_meta("config-1", ObjectMeta(name="config-1", description="updated config"))
        updates = []
        for _ in range(7):  # 4 current objects, the end marker, 2 changes
            o = watcher.updates(timeout=5.0)
            updates.append(None if o is None else (o.name, o.description))
    os_.update_meta("config-2", ObjectMeta(name="config-2-renamed", description="moved"))
    names = sorted(o.name for o in os_.list())
    status = os_.status()
    result = {"data": data, "get_error": get_error, "updates": updates, "names": names,
              "bucket": status.bucket, "size": status.size}
    js.delete_object_store("configs")
    return result


def main(url: str, tmp_file: str | None = None) -> dict[str, Any]:
    import os
    import tempfile

    with nats.connect(url) as nc, tempfile.TemporaryDirectory() as tmp:
        if tmp_file is None:
            tmp_file = os.path.join(tmp, "config-4.txt")
            with open(tmp_file, "w") as f:
                f.write("fourth config")
        return {
            "basic_usage": basic_usage(nc),
            "streams": streams(nc),
            "consumers": consumers(nc),
            "receiving": receiving(nc),
            "publishing": publishing(nc),
            "key_value": key_value(nc),
            "object_store": object_store(nc, tmp_file),
        }


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for section, outcome in main(url).items():
            print(f"{section}: {outcome}")
