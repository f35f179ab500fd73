"""ack, nak, term and in_progress, as on the workshop's "Ack Example" slide.

Each order is processed once per delivery:

* processing succeeds -> ``msg.ack()``;
* it fails for now (a flaky downstream, here the first try of every fifth
  order) -> ``msg.nak()`` and the server redelivers it;
* it can never succeed (a malformed order) -> ``msg.term()``, never redelivered;
* it is slow (every seventh order) -> ``msg.in_progress()`` while working,
  so the ack deadline (``ack_wait``) is pushed back instead of expiring.

    python examples/ack_handling.py [nats://host:4222]
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import natsjs_sync as nats


class PermanentError(Exception):
    """The order can never be processed."""


class Result:
    def __init__(self, success: bool):
        self.success = success


def process_order(data: bytes, attempt: int, msg: Any, ack_wait: float) -> Result:
    order = json.loads(data)
    if "id" not in order:
        raise PermanentError("order without id")
    if order["id"] % 5 == 0 and attempt == 1:
        return Result(success=False)  # a transient failure: worth retrying
    if order["id"] % 7 == 0:
        # Slow work, longer than ack_wait in total: tell the server we are alive.
        for _ in range(3):
            time.sleep(ack_wait / 2)
            msg.in_progress()
    return Result(success=True)


def main(url: str, n_orders: int = 30, ack_wait: float = 0.5) -> dict[str, Any]:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="ACKS", subjects=["acks.>"])
    for i in range(n_orders):
        js.publish("acks.order", json.dumps({"id": i}).encode())
    js.publish("acks.order", b'{"no_id": true}')  # a poison message

    # One order in flight at a time: orders waiting in the client's buffer
    # while a slow one is worked on would otherwise pass their ack_wait and be
    # redelivered (at-least-once), which is not what this example is about.
    subscription = js.subscribe("acks.>", durable="processor", manual_ack=True, ack_wait=ack_wait,
                                max_deliver=5, max_ack_pending=1)
    outcome: Counter[str] = Counter()
    done: set[int] = set()
    deliveries = 0
    while len(done) < n_orders or outcome["term"] == 0:
        msg = subscription.next_msg(timeout=10.0)
        deliveries += 1
        attempt = msg.metadata.num_delivered
        try:
            result = process_order(msg.data, attempt, msg, ack_wait)
            if result.success:
                msg.ack_sync()
                done.add(json.loads(msg.data)["id"])
                outcome["ack"] += 1
            else:
                msg.nak()  # retry
                outcome["nak"] += 1
        except PermanentError:
            msg.term()  # give up
            outcome["term"] += 1
        if deliveries > 3 * n_orders:
            raise RuntimeError("too many deliveries")

    result = {**outcome, "deliveries": deliveries}
    subscription.unsubscribe()
    nc.close()
    return result


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        print(main(url))
