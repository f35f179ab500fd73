"""Garbage-collector helpers of the finalizer tests: collect on a thread that holds a
client's connection lock, with automatic collection paused meanwhile.

The collector runs finalizers on whichever thread's allocation crosses its
threshold, including one holding the connection's lock; these helpers make
that happen on purpose, so a finalizer that takes the lock shows as a hang.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

import natsjs_sync as nats


@contextlib.contextmanager
def automatic_gc_off() -> Iterator[None]:
    """No automatic collection inside: only a test's own ``gc.collect()`` frees cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def collect_holding_the_lock(nc: nats.Client, timeout: float = 10.0) -> bool:
    """``gc.collect()`` on a thread that holds ``nc``'s connection lock.

    Args:
        nc: the client whose connection lock the collecting thread holds.
        timeout: how long to wait for the collection to return, in seconds.

    Returns:
        True once the collection returned; False when it did not within ``timeout``
        (a finalizer waiting on the lock its own thread holds).
    """
    lock = nc._conn.lock
    done = threading.Event()

    def run() -> None:
        with lock:
            gc.collect()
        done.set()

    threading.Thread(target=run, name="collect-under-lock", daemon=True).start()
    return done.wait(timeout)
