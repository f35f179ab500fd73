"""Replay a stream from a sequence or from a point in time (workshop slides
"Replay Policies" and "Start From Specific Point").

Two batches of events are stored a moment apart. Consumers then start at:

* ``DeliverPolicy.ALL``: everything;
* ``DeliverPolicy.LAST``: the last message only;
* ``DeliverPolicy.BY_START_SEQUENCE`` with ``opt_start_seq``: from a sequence;
* ``DeliverPolicy.BY_START_TIME`` with ``opt_start_time``: from a time (a
  ``datetime``; naive ones are local time, as ``datetime.now()`` gives);
* ``DeliverPolicy.NEW``: only what arrives after the consumer was made.

The nats-py form (``js.subscribe(..., deliver_policy=...)``) and the ordered
consumer of the new API are shown side by side.

    python examples/replay.py [nats://host:4222]
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import DeliverPolicy


def drain(sub: Any, expected: int) -> list[int]:
    """The sequences of the next ``expected`` messages of a push subscription."""
    return [sub.next_msg(timeout=5.0).metadata.sequence.stream for _ in range(expected)]


def main(url: str) -> dict[str, Any]:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="EVENTS", subjects=["events.>"])
    for i in range(10):
        js.publish("events.early", f"early {i}".encode())
    time.sleep(0.05)  # the clock must move on between the batches: timestamps are what we replay by
    boundary = datetime.now()
    time.sleep(0.05)
    for i in range(10):
        js.publish("events.late", f"late {i}".encode())

    result: dict[str, Any] = {}
    result["all"] = drain(js.subscribe("events.>", deliver_policy=DeliverPolicy.ALL), 20)
    result["last"] = drain(js.subscribe("events.>", deliver_policy=DeliverPolicy.LAST), 1)
    result["from_seq_15"] = drain(js.subscribe("events.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                               opt_start_seq=15), 6)
    result["from_time"] = drain(js.subscribe("events.>", deliver_policy=DeliverPolicy.BY_START_TIME,
                                             opt_start_time=boundary), 10)
    result["last_hour"] = drain(js.subscribe("events.>", deliver_policy=DeliverPolicy.BY_START_TIME,
                                             opt_start_time=datetime.now() - timedelta(hours=1)), 20)

    # The same with the simplified API: an ordered consumer reads and forgets.
    oc = js.ordered_consumer("EVENTS", deliver_policy="by_start_time", opt_start_time=boundary)
    result["ordered_from_time"] = [m.metadata.sequence.stream for m in oc.fetch(10, max_wait=5.0)]

    new = js.subscribe("events.>", deliver_policy=DeliverPolicy.NEW)
    js.publish("events.late", b"newest")
    result["new"] = drain(new, 1)
    nc.close()
    return result


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for policy, seqs in main(url).items():
            print(f"{policy:>18}: {seqs}")
