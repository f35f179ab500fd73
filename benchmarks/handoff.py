"""What one thread waking another costs on this machine: the floor under request latency.

    python benchmarks/handoff.py [--rounds 20000]

Two threads hand a token back and forth, each waking the other and then
sleeping until woken, and the script prints the round trip's p50 and p99 (two
wake-ups a round trip). Twice: with Python's cheapest hand-off (a bare
``threading.Lock``, what a request's caller waits on) and, where a C compiler
is present, with two C threads on a futex (no interpreter at all), which is
the operating system's own cost. A request/reply of natsjs_sync has two such
hand-offs more than nats.go's (its reader wakes the caller; the responder's
reader wakes a dispatcher worker), so about one round trip of this table is
the part of the latency gap to Go that the threading design accounts for.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

C_PINGPONG = r"""
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static atomic_int turn;
static int rounds;
static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static void wait_for(int v) {
    while (atomic_load(&turn) != v) syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 1 - v, NULL, NULL, 0);
}
static void hand_to(int v) { atomic_store(&turn, v); syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
static void *other(void *arg) { (void)arg; for (int i = 0; i < rounds; i++) { wait_for(1); hand_to(0); } return NULL; }
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 20000;
    double *lat = malloc(sizeof(double) * rounds);
    pthread_t t;
    pthread_create(&t, NULL, other, NULL);
    for (int i = 0; i < rounds; i++) { double t0 = now_us(); hand_to(1); wait_for(0); lat[i] = now_us() - t0; }
    pthread_join(t, NULL);
    qsort(lat, rounds, sizeof(double), cmp);
    printf("%.1f %.1f\n", lat[rounds / 2], lat[rounds * 99 / 100]);
    return 0;
}
"""


def python_round_trips(rounds: int) -> tuple[float, float]:
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def other() -> None:
        for _ in range(rounds):
            ping.acquire()
            pong.release()

    t = threading.Thread(target=other)
    t.start()
    lat = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ping.release()
        pong.acquire()
        lat.append(time.perf_counter() - t0)
    t.join()
    lat.sort()
    return lat[rounds // 2] * 1e6, lat[rounds * 99 // 100] * 1e6


def c_round_trips(rounds: int) -> tuple[float, float] | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp, "pingpong.c"), Path(tmp, "pingpong")
        src.write_text(C_PINGPONG)
        subprocess.run([cc, "-O2", "-o", str(exe), str(src), "-lpthread"], check=True)
        out = subprocess.run([str(exe), str(rounds)], check=True, capture_output=True, text=True, timeout=120)
    p50, p99 = (float(x) for x in out.stdout.split())
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    print(f"thread hand-off round trip (two wake-ups), {args.rounds:,} rounds")
    print(f"{'':28} {'p50 us':>8} {'p99 us':>8}")
    p50, p99 = python_round_trips(args.rounds)
    print(f"{'Python threading.Lock':28} {p50:8.1f} {p99:8.1f}")
    c = c_round_trips(args.rounds)
    if c is None:
        print("C futex: skipped (no C compiler)")
    else:
        print(f"{'C threads on a futex':28} {c[0]:8.1f} {c[1]:8.1f}")


if __name__ == "__main__":
    main()
