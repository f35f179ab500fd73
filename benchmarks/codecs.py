"""Typed publish and consume through msgspec JSON against the same by hand, in one run.

    python benchmarks/codecs.py [--url nats://...] [--n 50000] [--runs 5]

Two ways of sending a small msgspec Struct and reading it back on a core
subscription, run in turns on fresh connections against one server:

- by hand: ``nc.publish(subject, msgspec.json.encode(v))``, then
  ``decoder.decode(sub.next_msg().data)`` with a ``msgspec.json.Decoder(T)``;
- typed: ``nc.typed(subject, T).publish(v)`` (which also sends the
  ``content-type`` header), then ``sub.typed(T).next_msg().value``;
- by hand with the header: as by hand, publishing with
  ``headers={"content-type": "application/json"}`` (what a hand-written
  program sends to interoperate);
- by hand with the same header bytes: as by hand, each message carrying the
  typed path's header block, pre-encoded (the client's internal
  ``publish_headed``, one call per message as ``nc.publish`` is): the floor
  of the typed path, which must send those bytes; how much of the difference
  is the header's bytes (the server parses every header block it forwards).

Each figure is messages per second from the first publish to the last message
read; the script prints the medians and typed/by-hand (goal: >= 0.95).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

import msgspec
from _common import server_url

import natsjs_sync
from natsjs_sync._core import spi
from natsjs_sync.protocol.headers import encode_headers
from natsjs_sync.protocol.subjects import publish_subject


class Reading(msgspec.Struct):
    sensor: str
    value: float
    seq: int


def _run(url: str, n: int, typed: bool, header: bool = False, block: bool = False) -> float:
    values = [Reading("sensor-1", 21.5, i) for i in range(n)]
    subject = "bench.codecs"
    with natsjs_sync.connect(url) as sub_nc, natsjs_sync.connect(url) as pub_nc:
        sub = sub_nc.subscribe(subject, pending_msgs_limit=n + 1, pending_bytes_limit=-1)
        sub_nc.flush()
        out: list[float] = []
        got: list[int] = []

        if typed:
            reader = sub.typed(Reading)

            def consume() -> None:
                nxt = reader.next_msg
                last = 0
                for _ in range(n):
                    last = nxt(timeout=30).value.seq
                out.append(time.perf_counter())
                got.append(last)
        else:
            decode = msgspec.json.Decoder(Reading).decode

            def consume() -> None:
                nxt = sub.next_msg
                last = 0
                for _ in range(n):
                    last = decode(nxt(timeout=30).data).seq
                out.append(time.perf_counter())
                got.append(last)

        t = threading.Thread(target=consume)
        t.start()
        start = time.perf_counter()
        if typed:
            pub: Callable[[Reading], object] = pub_nc.typed(subject, Reading).publish
            for v in values:
                pub(v)
        elif block:
            encode = msgspec.json.encode
            headed = spi.link(pub_nc).publish_headed
            publish_subject(subject)  # validated (and cached, which the outlet needs) as a typed view does
            headers_block = encode_headers({"content-type": "application/json"})
            for v in values:
                headed(subject, encode(v), headers_block)
        elif header:
            encode = msgspec.json.encode
            raw = pub_nc.publish
            headers = {"content-type": "application/json"}
            for v in values:
                raw(subject, encode(v), headers=headers)
        else:
            encode = msgspec.json.encode
            raw = pub_nc.publish
            for v in values:
                raw(subject, encode(v))
        pub_nc.flush(timeout=60)
        t.join(120)
        assert got == [n - 1], got
        return n / (out[0] - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with server_url(args.url) as url:
        _run(url, 2_000, True)  # warm up both paths
        _run(url, 2_000, False)
        rows: dict[str, list[float]] = {"hand": [], "typed": [], "hand+header": [], "hand+block": []}
        kinds = list(rows)
        for i in range(args.runs):  # in turns, the order rotated each round: drift lands on all
            for kind in kinds[i % 4:] + kinds[:i % 4]:
                rows[kind].append(_run(url, args.n, kind == "typed", header=kind == "hand+header",
                                       block=kind == "hand+block"))
    h, t, hh, hb = (statistics.median(rows[k]) for k in kinds)
    print(f"by hand (msgspec.json around bytes):          {h:>10,.0f} msgs/s")
    print(f"by hand, with the content-type header (dict): {hh:>10,.0f} msgs/s")
    print(f"by hand, with the same header bytes (floor):  {hb:>10,.0f} msgs/s")
    print(f"typed (nc.typed / sub.typed):                 {t:>10,.0f} msgs/s")
    print(f"typed / by hand: {t / h:.3f}  (goal >= 0.95);  typed / by hand with the header: {t / hh:.3f};"
          f"  floor / by hand: {hb / h:.3f};  typed / floor: {t / hb:.3f}")


if __name__ == "__main__":
    main()
