"""Request/reply with the clients mixed: which side of a round trip costs what.

    python benchmarks/mixed_request.py [--runs 5] [--requests 1500] [--server URL]

Every pairing of requester and responder among natsjs_sync and nats.go (the
Go peer of ``benchmarks/peers/go``; skipped with a note when its toolchain is
missing) makes ``--requests`` sequential requests per run, the pairings taking
turns within each run, and the script prints each pairing's p50 latency (the
median over runs of each run's p50). Against Go answering Go, the row where
only our requester takes part shows what our requesting side adds, and the
row where only our responder takes part what our responding side adds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from _common import server_url
from _peers import GoPeer
from core import RESPONDER_OURS, ours_request

OURS, GO = "natsjs_sync", "nats.go"


def _responder(kind: str, url: str, go: GoPeer) -> subprocess.Popen[str]:
    if kind == GO:
        return go.responder(url)
    proc = subprocess.Popen([sys.executable, "-c", RESPONDER_OURS, url], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("responder did not start")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--server")
    args = parser.parse_args()
    go = GoPeer()
    if not go.prepare():
        print(f"skipped: {go.note}")
        return
    p50s: dict[tuple[str, str], list[float]] = {}
    with server_url(args.server) as url:
        for _ in range(args.runs):
            for responder in (GO, OURS):
                proc = _responder(responder, url, go)
                try:
                    for requester in (GO, OURS):
                        if requester == GO:
                            lat = [float(x) for x in go.run("request", url, args.requests)["lat"]]
                        else:
                            lat = ours_request(url, args.requests)
                        p50s.setdefault((requester, responder), []).append(statistics.median(lat) * 1e6)
                finally:
                    proc.communicate("", timeout=10)
    print(f"request p50 by pairing, median of {args.runs} runs of {args.requests:,} requests")
    print(f"{'requester / responder':28} {'p50 us':>7}")
    for requester, responder in ((GO, GO), (OURS, GO), (GO, OURS), (OURS, OURS)):
        print(f"{requester + ' / ' + responder:28} {statistics.median(p50s[(requester, responder)]):7.0f}")


if __name__ == "__main__":
    main()
