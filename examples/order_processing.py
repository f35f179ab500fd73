"""The workshop's real-world order processing, with natsjs_sync.

Stream ``ORDERS`` (subjects ``orders.>``, limits retention, kept 7 days) and
three independent consumers, as on the "Real-World: Order Processing" slide:

* ``fulfillment``: durable, shared by a queue group of two workers, each order
  handled by exactly one of them and acknowledged;
* ``analytics``: durable, replays everything from the first order;
* ``notifications``: ephemeral, sees only orders placed after it started.

Orders are published with their id as ``Nats-Msg-Id``, so publishing one again
(a retry after a lost ack, say) stores nothing new.

    python examples/order_processing.py [nats://host:4222]
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import DeliverPolicy

SEVEN_DAYS = 7 * 24 * 3600.0


def place_orders(js: Any, first: int, count: int) -> None:
    for order_id in range(first, first + count):
        order = {"id": order_id, "item": f"sku-{order_id % 7}", "amount": 10 + order_id % 5}
        js.publish("orders.new", json.dumps(order).encode(), msg_id=f"order-{order_id}")


def main(url: str, n_orders: int = 200) -> dict[str, Any]:
    nc = nats.connect(url, name="order-processing")
    js = nc.jetstream()
    js.add_stream(name="ORDERS", subjects=["orders.>"], retention="limits", max_age=SEVEN_DAYS)

    # First half of the orders arrives before any service runs.
    place_orders(js, 0, n_orders // 2)

    # notifications: ephemeral, only what is new from now on.
    notifications = js.subscribe("orders.new", deliver_policy=DeliverPolicy.NEW)

    # fulfillment: two workers of one queue group on one durable consumer.
    handled: Counter[str] = Counter()
    fulfilled: set[int] = set()
    lock = threading.Lock()
    all_fulfilled = threading.Event()

    def worker(name: str) -> Any:
        def handle(msg: Any) -> None:
            order = json.loads(msg.data)
            with lock:
                handled[name] += 1
                fulfilled.add(order["id"])
                if len(fulfilled) == n_orders:
                    all_fulfilled.set()
            msg.ack()

        return handle

    workers = [js.subscribe("orders.>", queue="fulfillment", durable="fulfillment", cb=worker(f"worker-{i}"),
                            manual_ack=True) for i in range(2)]

    # The rest of the orders, and one retried publish that must not be stored twice.
    place_orders(js, n_orders // 2, n_orders - n_orders // 2)
    retry = js.publish("orders.new", b"{}", msg_id=f"order-{n_orders - 1}")
    print(f"retried order-{n_orders - 1}: duplicate={retry.duplicate}, seq={retry.seq}")

    # analytics: durable, replays every order from the beginning.
    psub = js.pull_subscribe("orders.>", durable="analytics", deliver_policy=DeliverPolicy.ALL)
    revenue = 0
    seen = 0
    for _ in range(100):  # bounded: at most 100 batches
        batch = psub.fetch(50, timeout=2.0)
        for msg in batch:
            revenue += json.loads(msg.data)["amount"]
            seen += 1
            msg.ack()
        if seen == n_orders:
            break

    notified = 0
    while notified < n_orders - n_orders // 2:
        notifications.next_msg(timeout=5.0).ack()
        notified += 1

    if not all_fulfilled.wait(10.0):
        raise RuntimeError(f"fulfillment handled only {len(fulfilled)} of {n_orders} orders")
    info = js.stream_info("ORDERS")
    result = {
        "stored": info.state.messages,
        "duplicate_detected": retry.duplicate,
        "fulfilled": len(fulfilled),
        "fulfilled_per_worker": dict(handled),
        "analytics_orders": seen,
        "analytics_revenue": revenue,
        "notified": notified,
    }
    for sub in workers:
        sub.unsubscribe()
    nc.close()
    return result


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for key, value in main(url).items():
            print(f"{key:>22}: {value}")
