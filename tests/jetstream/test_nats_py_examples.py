"""nats-py example code with the ``await``\\ s deleted (and ``async def`` made ``def``).

The examples are from the nats-py README and the nats-py JetStream workshop
slides (../shared/reference); only the import line and the server URL differ,
and reads of push subscriptions wait up to 5 s, not nats-py's default 1 s (a
loaded machine can take longer to deliver), the ordered read taking exactly the
messages the stream holds and then checking there is no more.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import AckPolicy, DeliverPolicy, RetentionPolicy
from natsjs_sync.testing import NatsServer


@pytest.fixture
def url(nats_server: NatsServer) -> str:
    return nats_server.url


def test_readme_jetstream_example(url: str) -> None:
    nc = nats.connect(url)
    js = nc.jetstream()

    js.add_stream(name="sample-stream", subjects=["foo"])

    for i in range(0, 10):
        ack = js.publish("foo", f"hello world: {i}".encode())
        print(ack)

    # Create pull based consumer on 'foo'.
    psub = js.pull_subscribe("foo", "psub")

    # Fetch and ack messagess from consumer.
    fetched = []
    for i in range(0, 10):  # noqa: B007  (verbatim example)
        msgs = psub.fetch(1)
        for msg in msgs:
            msg.ack()
            fetched.append(msg.data)
    assert fetched == [f"hello world: {i}".encode() for i in range(10)]

    # Create single push based subscriber that is durable across restarts.
    sub = js.subscribe("foo", durable="myapp")
    msg = sub.next_msg(timeout=5)
    msg.ack()
    assert msg.data == b"hello world: 0"

    # Create deliver group that will be have load balanced messages.
    def qsub_a(msg):  # type: ignore[no-untyped-def]
        print("QSUB A:", msg)
        msg.ack()

    def qsub_b(msg):  # type: ignore[no-untyped-def]
        print("QSUB B:", msg)
        msg.ack()

    js.subscribe("foo", "workers", cb=qsub_a)
    js.subscribe("foo", "workers", cb=qsub_b)

    for i in range(0, 10):
        ack = js.publish("foo", f"hello world: {i}".encode())
        print("\t", ack)

    # Create ordered consumer with flow control and heartbeats
    # that auto resumes on failures.
    osub = js.subscribe("foo", ordered_consumer=True)
    data = bytearray()

    for _ in range(20):  # the stream holds 20 messages
        msg = osub.next_msg(timeout=5)
        data.extend(msg.data)
    with pytest.raises(TimeoutError):
        osub.next_msg(timeout=0.5)  # and no more
    print("All data in stream:", len(data))
    assert len(data) == 2 * sum(len(f"hello world: {i}") for i in range(10))

    nc.close()


def test_workshop_full_example(url: str) -> None:
    def main() -> bytes:
        nc = nats.connect(url)
        js = nc.jetstream()

        # Create stream
        js.add_stream(name="ORDERS", subjects=["orders.>"])

        # Subscribe with durable consumer
        sub = js.subscribe("orders.>", durable="processor")

        # Publish
        js.publish("orders.new", b'{"id": 1}')

        # Consume
        msg = sub.next_msg(timeout=5)
        print(f"Got: {msg.data}")
        msg.ack()

        nc.close()
        return msg.data

    assert main() == b'{"id": 1}'


def test_workshop_publish_dedup_and_stream_operations(url: str) -> None:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    js.add_stream(name="TASKS", subjects=["tasks.>"], retention=RetentionPolicy.WORK_QUEUE)

    # Simple publish - returns ack with sequence number
    ack = js.publish("orders.new", b'{"id": 123}')
    print(f"Published: seq={ack.seq}")

    # Publish with message ID for deduplication
    ack = js.publish("orders.new", b'{"id": 123}', headers={"Nats-Msg-Id": "order-123"})
    again = js.publish("orders.new", b'{"id": 123}', headers={"Nats-Msg-Id": "order-123"})
    assert again.duplicate and again.seq == ack.seq

    for i in range(100):
        js.publish("orders.more", str(i).encode())

    # Get stream info
    info = js.stream_info("ORDERS")
    print(f"Messages: {info.state.messages}")
    print(f"Bytes: {info.state.bytes}")
    assert info.state.messages == 102

    # Delete specific message
    js.delete_msg("ORDERS", seq=42)

    # Get message by sequence
    msg = js.get_msg("ORDERS", seq=100)
    assert msg.data == b"97"

    # Purge all messages
    js.purge_stream("ORDERS")
    assert js.stream_info("ORDERS").state.messages == 0
    nc.close()


def test_workshop_consumers_push_pull_acks(url: str) -> None:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    for i in range(5):
        js.publish("orders.new", f'{{"id": {i}}}'.encode())

    sub = js.subscribe("orders.>", durable="processor")
    seen = 0
    for msg in sub.messages:
        try:
            seen += 1
            if seen == 2:
                msg.nak()  # Retry
            elif seen == 3:
                msg.in_progress()  # Need more time
                msg.ack()
            elif seen == 4:
                msg.term()  # Give up
            else:
                msg.ack()
        finally:
            pass
        if seen == 6:  # five messages and the nak'd one again
            break

    psub = js.pull_subscribe("orders.>", durable="batch-proc")
    # Fetch up to 100 messages, wait max 5 seconds
    msgs = psub.fetch(batch=100, timeout=5)
    for msg in msgs:
        msg.ack()
    assert len(msgs) == 5
    with pytest.raises(nats.TimeoutError):
        psub.fetch(batch=100, timeout=0.3)

    # Durable consumer - survives restarts; ephemeral consumer - temporary
    js.subscribe("orders.>", durable="my-service")
    js.subscribe("orders.>")

    # Multiple consumers with same queue group share the work
    js.subscribe("orders.>", queue="processors")
    # The slide's line names a durable other than the queue, which nats-py refuses (the
    # queue is the consumer's name): so does this client, with nats-py's text.
    with pytest.raises(nats.JetStreamError, match="cannot create queue subscription 'processors' to consumer"):
        js.subscribe("orders.>", queue="processors", durable="order-processor")

    # Replay everything from the beginning
    replay = js.subscribe("orders.>", durable="replay-all", deliver_policy=DeliverPolicy.ALL)
    assert replay.next_msg(timeout=5).data == b'{"id": 0}'

    # Start from sequence number / timestamp
    by_seq = js.subscribe("orders.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4)
    assert by_seq.next_msg(timeout=5).data == b'{"id": 3}'
    by_time = js.subscribe("orders.>", deliver_policy=DeliverPolicy.BY_START_TIME,
                           opt_start_time=datetime.now() - timedelta(hours=1))
    assert by_time.next_msg(timeout=5).data == b'{"id": 0}'

    # Consumer: use double-ack
    dbl = js.subscribe("orders.>", ack_policy=AckPolicy.ALL)
    dbl.next_msg(timeout=5).ack_sync()

    info = js.consumer_info("ORDERS", "processor")
    assert info.num_ack_pending == 0 and info.delivered.stream_seq == 5
    js.delete_consumer("ORDERS", "processor")
    nc.close()
