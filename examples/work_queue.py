"""A work queue: a stream with work-queue retention and competing workers.

From the workshop slides ("Retention Policies": WorkQueue, delete after first
ack) and the JetStream skill note (work queues, and the gotcha that a
work-queue stream refuses overlapping consumers):

* stream ``TASKS`` with ``RetentionPolicy.WORK_QUEUE``: a task is removed
  from the stream as soon as a worker acknowledges it;
* one durable pull consumer shared by several worker threads, each pulling
  one task at a time (``messages(max_messages=1)``), the way the Go README
  recommends for work queues, so no worker hoards tasks;
* a second consumer on the same subjects is refused by the server.

    python examples/work_queue.py [nats://host:4222]
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import natsjs_sync as nats
from natsjs_sync.jetstream import RetentionPolicy


def main(url: str, n_tasks: int = 300, n_workers: int = 3) -> dict[str, Any]:
    nc = nats.connect(url)
    js = nc.jetstream()
    js.add_stream(name="TASKS", subjects=["tasks.>"], retention=RetentionPolicy.WORK_QUEUE)
    for i in range(n_tasks):
        js.publish_async(f"tasks.{'resize' if i % 2 else 'email'}", str(i).encode())
    js.publish_async_complete(timeout=10.0)
    queued = js.stream_info("TASKS").state.messages

    cons = js.create_consumer("TASKS", durable_name="workers", ack_policy="explicit")
    try:  # the skill note's gotcha: overlapping consumers on a work queue
        js.create_consumer("TASKS", durable_name="second", ack_policy="explicit")
        refused = ""
    except nats.JetStreamError as err:
        refused = err.description

    done: Counter[str] = Counter()
    tasks: list[int] = []
    lock = threading.Lock()
    finished = threading.Event()

    def worker(name: str) -> None:
        with cons.messages(max_messages=1, expires=2.0) as it:
            while not finished.is_set():
                try:
                    msg = it.next(timeout=0.5)
                except nats.TimeoutError:
                    continue
                msg.ack_sync()  # confirmed ack: the task leaves the stream
                with lock:
                    done[name] += 1
                    tasks.append(int(msg.data))
                    if len(tasks) == n_tasks:
                        finished.set()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(n_workers)]
    for t in threads:
        t.start()
    finished.wait(30.0)
    finished.set()
    for t in threads:
        t.join(10.0)

    left = js.stream_info("TASKS").state.messages
    nc.close()
    return {"queued": queued, "processed": len(tasks), "distinct": len(set(tasks)),
            "per_worker": dict(done), "left_in_stream": left, "second_consumer_refused": refused}


if __name__ == "__main__":
    from _server import server_url

    with server_url() as url:
        for key, value in main(url).items():
            print(f"{key:>24}: {value}")
