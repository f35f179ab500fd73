"""Errands: the library's own work that waits on the server, off the shared threads.

The reader, the timer and the dispatcher's workers never wait on the server
(a worker held by a round trip is one user callback fewer; a timer held is
every deadline late). Work of the consumers that needs a round trip and has
no caller's thread to run on runs here instead: an ordered consumer made
anew while nobody reads or for a ``consume()`` handler, a check whether a
pulled consumer still exists, the flush of a drain asked for from a handler.

Each client has one small pool of threads of its own for it
(``natsjs-errand-<client>-N``, at most :data:`ERRAND_THREADS`, none while
idle), and each owner one lane on it: an owner's errands run one at a time
and in order, and an errand that waits holds back only other errands, never
a user callback, a timer or the reader. Lanes take turns one errand at a
time: an owner whose heals keep failing (each waiting out its budget, the
next queued as the last ends) holds one thread at most while others wait,
and gives it up after each errand to the lanes queued behind it, so every
owner's errands (a heal, a consumer check, a drain's flush) are served in
the order their lanes came. Each owner keeps at most one heal queued or
running. Errands call no user code: what they find goes back to the owner's
own dispatcher lane.
"""

from __future__ import annotations

from collections.abc import Callable

from .._core.dispatch import Dispatcher, Lane
from .._core.spi import CoreLink

#: The most errand threads of one client at once (each errand is bounded by its own deadline).
ERRAND_THREADS = 4
#: Seconds an idle errand thread waits for work before it ends.
_IDLE = 5.0


class Errands:
    """One client's pool of errand threads, closed with the client. Thread-safe."""

    KEY = "natsjs_sync.jetstream.errands"

    def __init__(self, core: CoreLink):
        self._core = core
        # batch=1: an owner's lane goes to the back of the queue after each errand.
        self._pool = Dispatcher(core.tag, ERRAND_THREADS, idle_timeout=_IDLE, role="errand", keep_one=False,
                                batch=1)
        self._pool.log = core.logs.to("natsjs_sync.dispatch")
        core.on_close(self._close)

    @classmethod
    def of(cls, core: CoreLink) -> Errands:
        """The client's one pool (made on first use)."""
        return core.attachment(cls.KEY, lambda: cls(core))

    def lane(self, name: str) -> Lane[Callable[[], None]]:
        """A lane of errands (functions without arguments) for one owner; an
        exception from one goes to the client's ``error_cb`` (it is a bug)."""
        return self._pool.lane(_run, f"errand-{name}", on_error=self._bug)

    def _bug(self, exc: BaseException) -> None:
        self._core.report_error(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))

    def _close(self) -> None:
        # Waits for nothing: an errand still running ends with the client's
        # requests, which the close has failed already.
        self._pool.close(timeout=0)

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's errand threads do not exist here."""
        self._pool.reset_after_fork()


def _run(fn: Callable[[], None]) -> None:
    fn()


__all__ = ["ERRAND_THREADS", "Errands"]
