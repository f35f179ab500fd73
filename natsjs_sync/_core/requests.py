"""Request/reply: one wildcard inbox subscription answers every request of a client.

Each request gets a token; its reply subject is ``<prefix><token>``. The
reader thread hands the reply to the :class:`Waiter` of that token in place
(no thread hop besides the waiting caller's wake-up).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from ..protocol._compiled import speedups


class Waiter:
    """A one-shot slot the reader fills and a caller waits on (a bare lock is the cheapest)."""

    __slots__ = ("_lock", "end", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.value: Any = None
        #: A request's: the stream offset past its bytes in the write buffer
        #: (0 until buffered); set and read under the connection's lock.
        self.end = 0

    def set(self, value: Any) -> None:
        if self.value is None:
            self.value = value
            try:
                self._lock.release()
            except RuntimeError:  # already woken
                pass

    def wait(self, timeout: float | None) -> bool:
        return self._lock.acquire(timeout=-1 if timeout is None else timeout)


class ResponseMux:
    """Tokens -> waiters for one client. The inbox subscription is the owner's job:
    :attr:`sid` is ``None`` until it subscribed ``prefix + "*"``."""

    def __init__(self) -> None:
        self.prefix = ""
        #: The prefix encoded once: a request's reply subject is this and its token.
        self.prefix_bytes = b""
        self.prefix_len = 0
        self.sid: int | None = None
        self.waiting: dict[str, Waiter] = {}
        #: The furthest write-stream offset a reply confirmed the server had read.
        self.replied_to = 0
        self._tokens = itertools.count(1)
        #: What the inbox subscription calls with each reply: :meth:`route`, in one
        #: compiled call where the extension is in use (it runs on every request's path).
        route = None if speedups is None else speedups.ReplyRoute(self, Waiter)
        self.reply_route: Callable[[Any], None] = self.route if route is None else route
        #: :meth:`_prepare_one`, in one compiled call where the extension is in use.
        self.prepare_one: Callable[[], tuple[str, Waiter, bytes]] = (
            self._prepare_one if route is None else route.prepare)

    def start(self, prefix: str, sid: int) -> None:
        self.prefix = prefix
        self.prefix_bytes = prefix.encode()
        self.prefix_len = len(prefix)
        self.sid = sid

    def _prepare_one(self) -> tuple[str, Waiter, bytes]:
        """:attr:`prepare_one`: a request's token, its new waiter and its reply subject's bytes
        (the reference of the compiled ``ReplyRoute.prepare``: a change here is made there too).

        The waiter is not entered in :attr:`waiting`: the caller does it (``waiting[token] =
        waiter``: no call, so no check point) right before the ``try`` that forgets it. An
        exception a signal handler raises as this call (or a call in it) returns then leaves
        no waiter behind; one left there would stay for the connection's life."""
        token = str(next(self._tokens))
        return token, Waiter(), self.prefix_bytes + token.encode()

    def forget(self, token: str) -> None:
        self.waiting.pop(token, None)

    def route(self, msg: Any) -> None:
        """Reader thread: wake the request this reply is for (the reference of the
        compiled ``ReplyRoute``: a change here is made there too)."""
        waiter = self.waiting.pop(msg.subject[self.prefix_len :], None)
        if waiter is not None:
            # The server took everything written before the request (it reads a connection
            # in order): a flush after a loss need not fear for those bytes.
            if waiter.end > self.replied_to:
                self.replied_to = waiter.end
            waiter.set(msg)

    def fail_all(self, exc: Exception) -> None:
        waiting = list(self.waiting.values())
        self.waiting.clear()
        for w in waiting:
            w.set(exc)

    def take_sent(self, taken: int) -> list[Waiter]:
        """Connection lock held, the connection lost: forget the requests whose bytes
        were taken for a write (up to stream offset ``taken``) and return their waiters.

        Their bytes went out on the lost connection, or were lost with it: no reply
        will come. The others' bytes are still buffered (or not yet): they go out
        on the next connection, and their replies come back on it.
        """
        sent = [(token, w) for token, w in list(self.waiting.items()) if 0 < w.end <= taken]
        for token, _ in sent:
            self.waiting.pop(token, None)
        return [w for _, w in sent]

    def reset(self) -> None:
        """A forked child: no inbox yet, nobody waiting."""
        self.waiting.clear()
        self.replied_to = 0  # the child's write stream starts again
        self.sid = None
        self.prefix = ""
        self.prefix_bytes = b""
        self.prefix_len = 0
