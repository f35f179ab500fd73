"""Run under gevent or eventlet monkey patching: every blocking call of the client lets the
hub run other greenlets while it waits, and returns within its timeout.

``python hub_probe.py gevent|eventlet`` prints one JSON line: for each call, how long it took
and how many times a 10 ms ticker greenlet ran meanwhile (0: the call blocked the hub).
"""

from __future__ import annotations

import json
import sys
import time

LIBRARY = sys.argv[1]
if LIBRARY == "gevent":
    from gevent import monkey

    monkey.patch_all()
    import gevent

    spawn, sleep = gevent.spawn, gevent.sleep
else:
    import eventlet

    eventlet.monkey_patch()
    spawn, sleep = eventlet.spawn, eventlet.sleep

import natsjs_sync as nats  # noqa: E402
from natsjs_sync.testing import NatsServer  # noqa: E402

ticks = 0


def ticker() -> None:
    global ticks
    while True:
        sleep(0.01)
        ticks += 1


def measured(call) -> dict[str, float | int | str]:  # type: ignore[no-untyped-def]
    start_ticks, start = ticks, time.monotonic()
    outcome = "ok"
    try:
        call()
    except nats.NatsError as exc:
        outcome = type(exc).__name__
    return {"seconds": time.monotonic() - start, "ticks": ticks - start_ticks, "outcome": outcome}


def flush_after_outage(nc: nats.Client) -> None:
    try:
        nc.flush(timeout=30.0)
    except nats.ConnectionError:  # the first flush says what the outage may have swallowed
        nc.flush(timeout=30.0)


def main() -> None:
    spawn(ticker)
    report: dict[str, dict[str, float | int | str]] = {}
    with NatsServer(jetstream=True) as server:
        nc = nats.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        nc.subscribe("silent", cb=lambda msg: None)  # never answers
        nc.flush()
        js = nc.jetstream()
        js.create_stream(name="PROBE", subjects=["probe.>"])
        consumer = js.create_consumer("PROBE", durable_name="idle")
        report["request"] = measured(lambda: nc.request("silent", b"?", timeout=1.0))
        with nats.connect(server.url, requester_reads=True) as reading:  # asked for: still green-safe
            report["request_reading"] = measured(lambda: reading.request("silent", b"?", timeout=1.0))
            report["flush_reading"] = measured(lambda: reading.flush(timeout=10.0))  # one that must succeed
        report["fetch"] = measured(lambda: list(consumer.fetch(1, max_wait=1.0)))  # a batch waits as it is read
        report["next"] = measured(lambda: consumer.next(timeout=1.0))
        with consumer.messages() as it:
            report["iterator"] = measured(lambda: it.next(timeout=1.0))
        server.stop()
        report["flush_while_away"] = measured(lambda: nc.flush(timeout=1.0))
        report["publish_while_away"] = measured(lambda: js.publish("probe.x", b"x", timeout=1.0))
        server.start()
        report["flush_after_restart"] = measured(lambda: flush_after_outage(nc))
        report["publish_after_restart"] = measured(lambda: js.publish("probe.x", b"y", timeout=30.0))
        report["drain"] = measured(lambda: nc.drain(timeout=10.0))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
