"""Exactly-once publishing with Nats-Msg-Id (the workshop's deduplication slides).

The publisher gives every message a unique id. When it does not know whether a
publish reached the stream (its ack was lost, a timeout, a reconnect) it simply
publishes again with the same id: within the stream's duplicate window the
server answers with the sequence it stored the first time and stores nothing.
On the consumer side ``ack_sync`` (a "double ack") waits for the server to
confirm the ack, so a processed message is not redelivered.

    python examples/dedup_publish.py [nats://host:4222]
"""

from __future__ import annotations

from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import AckPolicy


def main(url: str, n_orders: int = 50) -> dict[str, Any]:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="DEDUP", subjects=["dedup.>"], duplicate_window=120.0)

    first_seqs = {}
    for order_id in range(n_orders):
        # nats-py style: the id as a header ...
        ack = js.publish("dedup.new", f"order {order_id}".encode(), headers={"Nats-Msg-Id": f"order-{order_id}"})
        first_seqs[order_id] = ack.seq

    # ... and every publish "retried", this time with the msg_id argument.
    duplicates = 0
    for order_id in range(n_orders):
        ack = js.publish("dedup.new", f"order {order_id}".encode(), msg_id=f"order-{order_id}")
        assert ack.seq == first_seqs[order_id]
        duplicates += ack.duplicate

    # Pipelined publishes deduplicate the same way.
    futures = [js.publish_async("dedup.new", b"again", msg_id=f"order-{i}") for i in range(n_orders)]
    js.publish_async_complete(timeout=10.0)
    duplicates += sum(f.result().duplicate for f in futures)

    # Consumer: explicit acks confirmed by the server.
    cons = js.create_consumer("DEDUP", durable_name="once", ack_policy=AckPolicy.EXPLICIT)
    processed = []
    for msg in cons.fetch(n_orders, max_wait=5.0):
        processed.append(msg.data)
        msg.ack_sync(timeout=5.0)

    stored = js.stream_info("DEDUP").state.messages
    nc.close()
    return {"stored": stored, "duplicates_detected": duplicates, "processed": len(processed),
            "distinct_processed": len(set(processed))}


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        print(main(url))
