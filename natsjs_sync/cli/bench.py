"""``natsjs-sync bench``: quick throughput scenarios, like the Go ``nats bench``.

Prints a table and, with ``--png FILE``, draws a bar chart with matplotlib
(the ``plot`` extra). Without matplotlib it says so and writes a plain chart
with no labels (:func:`write_bar_png`).
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
import threading
import time
import zlib
from typing import Any

from .._connect import connect
from ..client import Client
from ..errors import NatsError
from . import _print, connect_options, own_server_unless_named, positive_int

SCENARIOS = ("pub", "pubsub", "req", "js-pub", "js-pub-async", "js-consume")


def _pub(nc: Client, n: int, payload: bytes) -> float:
    start = time.perf_counter()
    for _ in range(n):
        nc.publish("bench.pub", payload)
    nc.flush(timeout=60)
    return n / (time.perf_counter() - start)


def _pubsub(url: str, context: str | None, n: int, payload: bytes, options: dict[str, Any]) -> float:
    with connect(url, name="bench-sub", context=context, **options) as sub_nc, \
            connect(url, name="bench-pub", context=context, **options) as pub_nc:
        sub = sub_nc.subscribe("bench.ps", pending_msgs_limit=n + 1)
        sub_nc.flush()
        done = threading.Event()
        failed: list[NatsError] = []

        def consume() -> None:
            # Its errors are the scenario's, raised by the thread that runs it: here one would only
            # be printed as a thread's traceback, as when the command is stopped (Ctrl-C, SIGTERM)
            # and closes the connection under it.
            try:
                for _ in range(n):
                    sub.next_msg(timeout=30)
            except NatsError as exc:
                failed.append(exc)
            finally:
                done.set()

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        start = time.perf_counter()
        for _ in range(n):
            pub_nc.publish("bench.ps", payload)
        pub_nc.flush(timeout=60)
        if not done.wait(120):
            raise TimeoutError("subscriber did not get every message")
        if failed:
            raise failed[0]
        return n / (time.perf_counter() - start)


def _req(nc: Client, n: int, payload: bytes) -> float:
    nc.subscribe("bench.req", cb=lambda m: m.respond(m.data))
    nc.flush()
    start = time.perf_counter()
    for _ in range(n):
        nc.request("bench.req", payload, timeout=5)
    return n / (time.perf_counter() - start)


def _js(nc: Client, scenario: str, n: int, payload: bytes) -> float:
    js = nc.jetstream()
    name = f"BENCH_{int(time.time() * 1000)}"
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    subject = f"{name}.x"
    try:
        if scenario == "js-pub":
            start = time.perf_counter()
            for _ in range(n):
                js.publish(subject, payload)
            return n / (time.perf_counter() - start)
        if scenario == "js-pub-async":
            start = time.perf_counter()
            for _ in range(n):
                js.publish_async(subject, payload)
            js.publish_async_complete(timeout=120)
            return n / (time.perf_counter() - start)
        for _ in range(n):
            js.publish_async(subject, payload)
        js.publish_async_complete(timeout=120)
        cons = js.create_consumer(name, durable_name="bench")
        start = time.perf_counter()
        count = 0
        with cons.messages(max_messages=1000) as it:
            for msg in it:
                msg.ack()
                count += 1
                if count == n:
                    break
        nc.flush()
        return n / (time.perf_counter() - start)
    finally:
        js.delete_stream(name)


def run_scenario(url: str, scenario: str, n: int, size: int, context: str | None = None,
                 options: dict[str, Any] | None = None) -> float:
    """Run one scenario on the server at ``url`` (with the NATS ``context``'s credentials and
    settings when one is given, and :func:`~natsjs_sync.connect`'s keywords ``options``);
    returns messages per second."""
    payload = b"x" * size
    options = options or {}
    if scenario == "pubsub":
        return _pubsub(url, context, n, payload, options)
    with connect(url, name="natsjs-bench", context=context, **options) as nc:
        if scenario == "pub":
            return _pub(nc, n, payload)
        if scenario == "req":
            return _req(nc, n, payload)
        return _js(nc, scenario, n, payload)


#: The largest payload a nats-server can be configured to take (its max_pending, 64 MiB).
MAX_MESSAGE_SIZE = 64 << 20

_SIZE = re.compile(r"(\d+)\s*([a-z]*)", re.IGNORECASE)
_SIZE_UNITS = {"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20}


def message_size(text: str) -> int:
    """Bytes from ``"128"``, ``"128B"``, ``"1KB"``, ``"1MiB"`` (units of 1024, as the nats CLI's
    ``bench --size`` takes them); argparse's ``type``."""
    m = _SIZE.fullmatch(text.strip())
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (give bytes, or e.g. 512B, 1KB, 1MB)")
    size = int(m.group(1)) << _SIZE_UNITS[m.group(2).lower()]
    if size > MAX_MESSAGE_SIZE:  # the payload is made before any server is asked for its max_payload
        raise argparse.ArgumentTypeError(f"{text!r} is more than 64MB, the most a nats-server takes")
    return size


# ---------------------------------------------------------------------- chart

def _png(width: int, height: int, pixels: bytearray) -> bytes:
    """RGB pixels -> PNG bytes."""
    rows = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def write_bar_png(path: str, values: list[float], width: int = 640, height: int = 320) -> None:
    """A bar chart (one bar per value, tallest = full height) as a PNG, no dependencies."""
    pixels = bytearray(b"\xff" * (width * height * 3))
    top = max(values) or 1.0
    slot = width // max(len(values), 1)
    colours = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28),
               (0x94, 0x67, 0xBD), (0x8C, 0x56, 0x4B)]
    for i, v in enumerate(values):
        h = int((height - 20) * v / top)
        x0, x1 = i * slot + slot // 6, (i + 1) * slot - slot // 6
        r, g, b = colours[i % len(colours)]
        for y in range(height - 10 - h, height - 10):
            row = y * width * 3
            for x in range(x0, x1):
                p = row + x * 3
                pixels[p:p + 3] = bytes((r, g, b))
    with open(path, "wb") as f:
        f.write(_png(width, height, pixels))


def _chart(path: str, labels: list[str], values: list[float]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed, so the chart has no labels; "
              "python -m pip install matplotlib (the 'plot' extra) adds them", file=sys.stderr, flush=True)
        write_bar_png(path, values)
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(labels, values)
    ax.set_ylabel("msg/s")
    ax.set_title("natsjs-sync bench")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cmd_bench(args: argparse.Namespace) -> int:
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    results: list[tuple[str, float]] = []
    with own_server_unless_named(args) as (url, context):
        for sc in scenarios:
            n = args.msgs if sc not in ("req", "js-pub") else min(args.msgs, args.sync_msgs)
            rate = run_scenario(url, sc, n, args.size, context, connect_options(args))
            results.append((sc, rate))
    _print(f"\n{'scenario':14} {'messages':>10} {'size':>6} {'msg/s':>12} {'MB/s':>8}")
    for sc, rate in results:
        n = args.msgs if sc not in ("req", "js-pub") else min(args.msgs, args.sync_msgs)
        _print(f"{sc:14} {n:>10,} {args.size:>6} {rate:>12,.0f} {rate * args.size / 1e6:>8.1f}")
    if args.png:
        _chart(args.png, [sc for sc, _ in results], [r for _, r in results])
        _print(f"chart written to {args.png}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="measure publish/subscribe/JetStream throughput",
                       description="Measure throughput on an embedded nats-server unless --server or "
                                   "--context names one; $NATS_URL, $NATS_CONTEXT and the selected context "
                                   "are not used.")
    p.add_argument("scenario", nargs="?", choices=(*SCENARIOS, "all"), default="all",
                   help="the scenario to run (default: all of them)")
    p.add_argument("--msgs", type=positive_int, default=100_000, help="messages per scenario (default 100000)")
    p.add_argument("--sync-msgs", type=positive_int, default=5_000,
                   help="messages for request-bound scenarios: req, js-pub (default 5000)")
    p.add_argument("--size", type=message_size, default=128, metavar="SIZE",
                   help="payload size: bytes, or e.g. 1KB, 1MB (default 128)")
    p.add_argument("--png", metavar="FILE", help="also draw a bar chart (labelled with the 'plot' extra: matplotlib)")
    p.set_defaults(func=cmd_bench)
