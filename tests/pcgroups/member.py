"""A group member in a process of its own, for the multi-process tests.

``python member.py URL KIND STREAM GROUP MEMBER ACK_WAIT [URL2,URL3...]``
joins ``GROUP`` (``static`` or ``elastic``) as ``MEMBER`` and, for each
message, publishes a record ``got`` on ``rec.GROUP`` (stream sequence, times
delivered, subject, pid), acknowledges it synchronously, then publishes
``acked``. The ``got`` record leaves on the same connection before the ack,
so an ack the server has seen always has its record. Prints ``READY`` once
joined; SIGTERM stops it cleanly.

Connecting and joining are tried again (for up to a minute, each failure on
stderr) while the cluster cannot answer: the group's R3 streams have just been
made, and on a loaded machine their leaders may still be elected when the
member starts (a JetStream API timeout or "cluster not available"), or a
replica not yet caught up may answer a read (orbit.go's members give up at
start then too; their supervisor starts them again, this loop is that).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig

#: Seconds a member keeps trying to connect and join.
START_WITHIN = 60.0
#: Errors that no retry mends: the test's own mistakes.
PERMANENT = (pcgroups.ConsumerGroupConfigError, pcgroups.ConsumerGroupExistsError, pcgroups.MemberNotInGroupError)

T = TypeVar("T")


def _again_until(until: float, what: str, call: Callable[[], T]) -> T:
    """``call()``, tried again after a NATS error (not a permanent one) until ``until``; each failure logged."""
    pause = threading.Event()  # never set: paces the attempts
    while True:
        try:
            return call()
        except PERMANENT:
            raise
        except (nats.NatsError, OSError) as exc:
            if time.monotonic() >= until:
                raise
            print(f"{what} failed, trying again: {exc!r}", file=sys.stderr, flush=True)
        pause.wait(0.5)


def main() -> int:
    url, kind, stream, group, member, ack_wait = sys.argv[1:7]
    servers = url.split(",")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    until = time.monotonic() + START_WITHIN
    nc = _again_until(until, "connect", lambda: nats.connect(servers, name=f"member-{member}-{os.getpid()}",
                                                             max_reconnect_attempts=-1))
    js = nc.jetstream(timeout=10.0)
    pid = os.getpid()
    subject = f"rec.{group}"

    def handle(msg: nats.Msg) -> None:
        md = msg.metadata
        rec = {"pid": pid, "member": member, "seq": md.sequence.stream, "n": md.num_delivered,
               "subject": msg.subject, "id": int(msg.data)}
        nc.publish(subject, json.dumps({"ev": "got", **rec}).encode())
        try:
            msg.ack_sync(timeout=5.0)
        except nats.NatsError:
            return  # not acknowledged: it comes again
        nc.publish(subject, json.dumps({"ev": "acked", **rec}).encode())

    # Strict order across a fail-over: one unacknowledged message at a time.
    template = ConsumerConfig(ack_wait=float(ack_wait), max_ack_pending=1)
    consume = pcgroups.static_consume if kind == "static" else pcgroups.elastic_consume
    ctx = _again_until(until, "join", lambda: consume(js, stream, group, member, handle, template))
    print("READY", flush=True)
    while not done.wait(0.5) and not ctx.done.is_set():
        pass
    ctx.stop()
    nc.close()
    return 0 if ctx.error is None else 3


if __name__ == "__main__":
    sys.exit(main())
