"""A pre-forked worker pool where each process is a member of an elastic consumer group.

The shape of a Celery prefork pool, a gunicorn worker set or any
multiprocessing pool: the parent forks N processes and makes no connection
itself; each process connects on its own, adds itself to the group under a
name tied to its pool slot (``<host>-<slot>``, so a recycled process takes
its predecessor's place instead of leaving a stale member), consumes, and on
SIGTERM removes itself and stops, so the others take over its partitions at
once. Messages of one key are handled by one process at a time, in order.

    python examples/pcgroups_pool.py [nats://host:4222] [workers]

Each handled message is printed as ``<member> <subject> <data>``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig

STREAM, GROUP, PARTITIONS = "ORDERS", "billing", 6


def setup(url: str) -> None:
    """Make the stream and the group (idempotent: every start may call it)."""
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(name=STREAM, subjects=["orders.*"])
        pcgroups.create_elastic(js, STREAM, GROUP, PARTITIONS,
                                [pcgroups.PartitioningFilter(filter="orders.*", partitioning_wildcards=(1,))])


def say(*words: object) -> None:
    """One line on stdout in one write: the pool's processes (and each one's
    consumer thread and main thread) share the pipe, and a print() of several
    pieces can be split by another writer's line."""
    os.write(1, (" ".join(str(w) for w in words) + "\n").encode())


def member(url: str, slot: int) -> None:
    """One pool process: join as ``<host>-<slot>``, consume until SIGTERM, then leave."""
    # The handler only sets a flag: a signal lands on the main thread between any two
    # bytecodes, possibly while it holds the lock a threading.Event would take.
    stopped = [False]
    signal.signal(signal.SIGTERM, lambda *_: stopped.__setitem__(0, True))
    name = f"{socket.gethostname()}-{slot}"
    nc = nats.connect(url, name=name, max_reconnect_attempts=-1)
    js = nc.jetstream()

    def handle(msg: nats.Msg) -> None:
        say(name, msg.subject, msg.data.decode())
        msg.ack_sync()  # acknowledged before the next one of its partitions comes

    ctx = pcgroups.elastic_consume(js, STREAM, GROUP, name, handle, ConsumerConfig(ack_wait=5.0))
    pcgroups.add_members(js, STREAM, GROUP, [name])
    say("JOINED", name, os.getpid())
    while not stopped[0]:
        time.sleep(0.1)
    pcgroups.delete_members(js, STREAM, GROUP, [name])  # the others take its partitions now
    ctx.stop()
    nc.close()


def main(url: str, workers: int) -> None:
    """Fork ``workers`` members and wait; SIGTERM stops them all."""
    setup(url)  # before forking: the parent keeps no connection
    children = []
    for slot in range(workers):
        pid = os.fork()
        if pid == 0:  # the child never returns into the parent's code
            try:
                member(url, slot)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        children.append(pid)

    def forward(*_: object) -> None:
        for p in children:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass  # that one has left already

    signal.signal(signal.SIGTERM, forward)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
         int(sys.argv[2]) if len(sys.argv) > 2 else 3)
