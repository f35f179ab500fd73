"""The small thread pool a service with ``max_concurrency`` runs its handlers on.

A subscription's callback gets its messages one at a time, in order. To handle
several requests of a service at once, the endpoint callbacks only
take a slot (a semaphore of ``size``, so at most ``size`` requests are in
progress and a full service holds further requests back in the subscriptions'
bounded queues) and hand the request to this pool.

Threads are started on demand, up to ``size``, and a thread left idle for
``idle_timeout`` seconds ends, so a pool whose client was closed without
stopping the service does not keep threads for ever.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("natsjs_sync.micro")

Task = Callable[[], None]


class WorkerPool:
    """Runs submitted callables on up to ``size`` daemon threads. Thread-safe."""

    def __init__(self, size: int, thread_name: str, idle_timeout: float = 2.0,
                 logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None):
        """Args:
            logger: where a task's escaped exception is logged (the client's adapter; default: this module's).
        """
        self._size = size
        self._log = log if logger is None else logger
        self._thread_name = thread_name
        self._idle_timeout = idle_timeout
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle_cond = threading.Condition(self._lock)
        self._slots = threading.BoundedSemaphore(size)
        self._threads: set[threading.Thread] = set()
        self._idle = 0  # threads waiting for a task that no submit has counted on yet
        self._in_flight = 0  # submitted and not finished
        self._closed = False

    @property
    def size(self) -> int:
        """The most tasks that run at once."""
        return self._size

    @property
    def in_flight(self) -> int:
        """Tasks submitted and not finished."""
        return self._in_flight

    def submit(self, task: Task) -> None:
        """Run ``task`` on a pool thread; blocks while ``size`` tasks are in flight.

        Raises:
            RuntimeError: the pool was shut down.
        """
        self._slots.acquire()
        with self._lock:
            if self._closed:
                self._slots.release()
                raise RuntimeError("the service's worker pool is shut down")
            self._in_flight += 1
            self._tasks.put(task)
            if self._idle:
                self._idle -= 1  # that waiting thread takes this task
            else:
                self._start_thread()

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._threads.add(thread)
        thread.start()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            try:
                task = self._tasks.get(timeout=self._idle_timeout)
            except queue.Empty:
                with self._lock:
                    # A submit may have counted on this thread just as it timed out.
                    if self._idle > 0 and self._tasks.empty():
                        self._idle -= 1
                        self._threads.discard(me)
                        return
                continue
            if task is None:
                with self._lock:
                    self._threads.discard(me)
                return
            try:
                task()
            except Exception:  # tasks handle their own errors; this is a last resort
                self._log.exception("exception in a service worker task")
            with self._lock:
                self._in_flight -= 1
                self._idle += 1
                if self._in_flight == 0:
                    self._idle_cond.notify_all()
            self._slots.release()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no task is in flight; False when ``timeout`` passed first."""
        with self._lock:
            return self._idle_cond.wait_for(lambda: self._in_flight == 0, timeout)

    def is_pool_thread(self) -> bool:
        """True when called from one of this pool's threads."""
        return threading.current_thread() in self._threads

    def shutdown(self, timeout: float | None = None) -> None:
        """Refuse new tasks; the threads end once the tasks already queued are done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(timeout)
