"""Same-run A/B of two source trees of natsjs_sync: which change pays.

    python benchmarks/ab.py OLD_TREE NEW_TREE ROWS [RUNS]

ROWS: a comma-separated list of pub, pubsub, req, req99, reqlocal, req8,
req64, req256, kvget, kvput, jspub, ack, noack, ordered.

Each tree is a directory holding a ``natsjs_sync`` package, e.g. made with
``git archive <commit> natsjs_sync | tar -x -C /tmp/old`` (copy the compiled
``protocol/_speedups*.so`` beside it, or both trees run the pure-Python
parser). Every run of every row starts a fresh process per tree, the two
taking turns against one server, so the machine's drift lands on both; each
figure is the median of RUNS runs (3 by default). The rows are those of
``compare.py`` (``req`` is the p50 latency in microseconds, lower is better;
the responder process runs the same tree as the requester), and: ``req99`` the
p99 of the same; ``reqlocal`` the p50 with the responder on the requester's own
client; ``req8``, ``req64`` and ``req256`` requests per second of 8, 64 and
256 threads sharing one client; ``kvget`` and ``kvput`` key-value reads and
writes per second of one thread.
Each run's figures are printed too (``old``/``new`` in run order), so a
ratio can be read with the count of rounds each side won.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

from _common import server_url

HERE = Path(__file__).resolve().parent

CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[5])
# The responder process (req rows) runs the tree under test too: responder-side changes count.
os.environ["PYTHONPATH"] = sys.argv[1]
import natsjs_sync
assert natsjs_sync.__file__.startswith(sys.argv[1]), natsjs_sync.__file__
url, kind, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
import core as C
import jetstream as J
if kind == "jspub":
    r = J._with_stream(url, 0, J.ours_pipelined(url, n))()
elif kind in ("ack", "noack"):
    r = J._with_stream(url, n, J.ours_consume(url, n, kind == "ack"))()
elif kind == "ordered":
    r = J._with_stream(url, n, J.ours_ordered(url, n))()
elif kind == "pub":
    r = C.ours_publish(url, n, 16)
elif kind == "pubsub":
    r = C.ours_pubsub(url, n, 16)
elif kind == "reqlocal":
    r = C.pct(C.ours_request_local(url, n), 0.5)
elif kind in ("req8", "req64", "req256"):
    with C.Responder(C.RESPONDER_OURS, url):
        r = C.ours_request_threads(url, n, int(kind[3:]))
elif kind in ("kvget", "kvput"):
    import kv_object as K
    r = K.ours_kv(url, n, kind[2:])()
else:
    with C.Responder(C.RESPONDER_OURS, url):
        r = C.pct(C.ours_request(url, n), 0.99 if kind == "req99" else 0.5)
print(r)
"""

COUNTS = {"pub": 200_000, "pubsub": 100_000, "req": 2_000, "req99": 2_000, "reqlocal": 2_000, "req8": 500,
          "req64": 100, "req256": 25, "kvget": 5_000, "kvput": 5_000,
          "jspub": 50_000, "ack": 50_000, "noack": 50_000,
          "ordered": 50_000}


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    trees = {"old": str(Path(sys.argv[1]).resolve()), "new": str(Path(sys.argv[2]).resolve())}
    kinds = sys.argv[3].split(",")
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    unknown = set(kinds) - set(COUNTS)
    if unknown:
        sys.exit(f"unknown rows {sorted(unknown)}; known: {','.join(COUNTS)}")
    with server_url(None) as url:
        for kind in kinds:
            got: dict[str, list[float]] = {k: [] for k in trees}
            for _ in range(runs):
                for k, tree in trees.items():
                    out = subprocess.run([sys.executable, "-c", CHILD, tree, url, kind, str(COUNTS[kind]), str(HERE)],
                                         capture_output=True, text=True, timeout=600)
                    if out.returncode:
                        sys.exit(out.stderr[-2000:])
                    got[k].append(float(out.stdout.strip().splitlines()[-1]))
            old, new = statistics.median(got["old"]), statistics.median(got["new"])
            lower_better = kind in ("req", "req99", "reqlocal")
            won = sum((n < o) if lower_better else (n > o) for o, n in zip(got["old"], got["new"], strict=True))
            print(f"{kind}: old {old:,.0f}  new {new:,.0f}  new/old {new / old:.2f}"
                  f"  (new better in {won}/{runs} rounds)", flush=True)


if __name__ == "__main__":
    main()
