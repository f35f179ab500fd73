"""A group member in a process of its own, for the multi-process tests.

``python member.py URL KIND STREAM GROUP MEMBER ACK_WAIT [URL2,URL3...]``
joins ``GROUP`` (``static`` or ``elastic``) as ``MEMBER`` and, for each
message, publishes a record ``got`` on ``rec.GROUP`` (stream sequence, times
delivered, subject, pid), acknowledges it synchronously, then publishes
``acked``. The ``got`` record leaves on the same connection before the ack,
so an ack the server has seen always has its record. Prints ``READY`` once
joined; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig


def main() -> int:
    url, kind, stream, group, member, ack_wait = sys.argv[1:7]
    servers = url.split(",")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    nc = nats.connect(servers, name=f"member-{member}-{os.getpid()}", max_reconnect_attempts=-1)
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
    ctx = consume(js, stream, group, member, handle, template)
    print("READY", flush=True)
    while not done.wait(0.5) and not ctx.done.is_set():
        pass
    ctx.stop()
    nc.close()
    return 0 if ctx.error is None else 3


if __name__ == "__main__":
    sys.exit(main())
