"""ASGI: the one synchronous per-process client, used from async views and tied to the server's lifespan.

The client stays synchronous. An async view (Django under uvicorn, daphne or
gunicorn's ASGI worker; Starlette; FastAPI) must not call it on the event
loop: a JetStream publish that waits out a reconnect would stop every other
request of the process for its timeout. :func:`run_sync` runs the call on a
thread pool of this module and awaits it::

    from natsjs_sync.contrib.asgi import run_sync
    from natsjs_sync.contrib.django import get_jetstream

    async def place_order(request):
        ack = await run_sync(get_jetstream().publish, "orders.new", request.body, msg_id=...)
        ...

(``get_jetstream()`` itself may connect on first use: put it inside a
function run by :func:`run_sync` where that matters.)

The pool is its own, not the event loop's default executor, because the
default is sized for computation (``min(32, cpu_count + 4)`` threads) and is
shared with asyncio's own blocking work (``getaddrinfo``) and every library's
``run_in_executor(None, ...)``/``asyncio.to_thread``: during an outage a
handful of publishes waiting for their timeouts would hold all of it. The
threads of this pool spend their lives waiting on the client, which costs no
CPU, so there are many (:data:`DEFAULT_MAX_WORKERS`); a forked child makes a
pool of its own on first use.

:class:`NatsLifespan` wraps the ASGI app: it connects the process's client
when the server starts (a server that cannot be reached, or a setting that
cannot be used, fails the startup, which the ASGI server reports and stops
on) and drains it when the server shuts down, after the in-flight requests
have been answered.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .._core import fork
from .process import ProcessClient

__all__ = ["DEFAULT_MAX_WORKERS", "NatsLifespan", "get_executor", "run_sync", "set_max_workers",
           "shutdown_executor"]

log = logging.getLogger("natsjs_sync.contrib")

T = TypeVar("T")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Threads of :func:`run_sync`'s pool unless :func:`set_max_workers` says otherwise: how many
#: blocking client calls may wait at once (each for at most its timeout) before more queue.
DEFAULT_MAX_WORKERS = 64


class _CallPool:
    """The executor of :func:`run_sync`, made on first use and made again in a forked child. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self.max_workers = DEFAULT_MAX_WORKERS
        fork.track(self)

    def executor(self) -> ThreadPoolExecutor:
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(max_workers=self.max_workers,
                                                        thread_name_prefix="natsjs-asgi-call")
                executor = self._executor
        return executor

    def replace(self, max_workers: int, wait: bool = False) -> None:
        with self._lock:
            old, self._executor = self._executor, None
            self.max_workers = max_workers
        if old is not None:
            old.shutdown(wait=wait)  # calls already running finish; new ones go to the next pool

    def after_fork_in_child(self) -> None:
        # The parent's threads do not exist here, yet its executor counts them as idle and
        # would hand them work that no thread ever runs: forget it (and a lock a thread held).
        self._lock = threading.Lock()
        self._executor = None


_POOL = _CallPool()


def get_executor() -> ThreadPoolExecutor:
    """The thread pool :func:`run_sync` uses (this process's; made on first use).

    Hand it to asgiref where its adapter is wanted:
    ``sync_to_async(fn, thread_sensitive=False, executor=get_executor())``.
    """
    return _POOL.executor()


def set_max_workers(max_workers: int) -> None:
    """Size :func:`run_sync`'s pool (default :data:`DEFAULT_MAX_WORKERS`).

    Calls already running finish on the old pool; later calls use the new one.

    Raises:
        ValueError: ``max_workers`` is not a whole number above 0.
    """
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers is a whole number above 0, not {max_workers!r}")
    _POOL.replace(max_workers)


def shutdown_executor(wait: bool = True) -> None:
    """End the threads of :func:`run_sync`'s pool once their calls return; a later call makes a new pool.

    Not needed in an app (the pool lives as long as the process, as the event
    loop's default executor does); for tests and embedders that check for
    threads left running.

    Args:
        wait: wait for the calls running now to return.
    """
    _POOL.replace(_POOL.max_workers, wait=wait)


async def run_sync(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (``fn(*args, **kwargs)``) on this module's thread pool and await its result.

    The caller's context variables go with it (an OpenTelemetry span, a
    request id), as with ``asyncio.to_thread``. If the awaiting task is
    cancelled (the client went away), the call itself still runs to its end,
    bounded by its own timeout; its result is dropped.

    Returns:
        What ``fn`` returned.

    Raises:
        Exception: what ``fn`` raised.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_POOL.executor(), call)


class _InnerLifespan:
    """The wrapped app's side of the lifespan protocol, spoken through two queues."""

    def __init__(self, app: ASGIApp, scope: Scope):
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task = asyncio.ensure_future(app(scope, self._to_app.get, self._from_app.put))
        self.supported = True

    async def step(self, phase: str) -> str | None:
        """Send ``lifespan.<phase>`` and wait for the app's answer: ``None`` (complete) or a failure message."""
        self._to_app.put_nowait({"type": f"lifespan.{phase}"})
        answer = asyncio.ensure_future(self._from_app.get())
        await asyncio.wait({answer, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            message = answer.result()
            if message["type"] == f"lifespan.{phase}.complete":
                return None
            return str(message.get("message") or f"the app answered {message['type']}")
        answer.cancel()
        exc = self._task.exception()
        if phase == "startup":
            # It ended without a word: an app without lifespan support (Django's ASGIHandler
            # raises on any scope but http). The server is told nothing of it, as uvicorn does.
            log.debug("the ASGI app does not support lifespan (%r); it is handled without it", exc)
            self.supported = False
            return None
        return f"the app's lifespan ended without answering {phase}: {exc!r}"

    async def finish(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the app's lifespan to return; cancel it after."""
        await asyncio.wait({self._task}, timeout=timeout)
        if not self._task.done():
            self._task.cancel()
        elif not self._task.cancelled() and self._task.exception() is not None:
            log.warning("the ASGI app's lifespan raised after shutdown: %r", self._task.exception())


class NatsLifespan:
    """ASGI middleware: connect the process's client at startup, drain it at shutdown. Stateless between servers.

    Every scope but ``lifespan`` goes straight to ``app``. For ``lifespan``:

    - at ``lifespan.startup`` the holder's client is connected (its
      ``on_connect`` callables declare streams), then the app's own startup
      runs, so it can use the client. A failure of either (no server answers,
      a setting that cannot be used, an ``on_connect`` that raises) answers
      ``lifespan.startup.failed`` with the reason, and the ASGI server stops
      ("Application startup failed");
    - at ``lifespan.shutdown``, which the server sends once it has stopped
      taking connections and answered the requests in flight, the app's own
      shutdown runs, then the client drains (subscriptions finish their
      queues, what is buffered is flushed) within ``drain_timeout``; a drain
      that runs out of time answers ``lifespan.shutdown.failed`` (the client
      is closed anyway).

    An app that speaks the lifespan protocol itself (Starlette, FastAPI) has
    it forwarded; one that does not (Django's ``ASGIHandler`` raises on any
    scope but ``http``) is detected as uvicorn detects it (its lifespan
    raises before answering) and left out of it.

    Args:
        app: the ASGI app.
        holder: the process's :class:`~natsjs_sync.contrib.process.ProcessClient`,
            or a callable returning it, called at startup (Django:
            :func:`natsjs_sync.contrib.django.get_holder`; its ``SettingsError``
            fails the startup).
        drain_timeout: seconds the drain at shutdown may take (``None``: no limit).
        connect_at_startup: ``False`` to only resolve the holder at startup
            and leave the connect to the first use (a server that may start
            while NATS is down); the shutdown still drains.

    Raises:
        ValueError: ``drain_timeout`` is not a number of seconds above 0.
    """

    def __init__(self, app: ASGIApp, holder: ProcessClient | Callable[[], ProcessClient], *,
                 drain_timeout: float | None = 30.0, connect_at_startup: bool = True):
        if drain_timeout is not None and (isinstance(drain_timeout, bool) or not isinstance(drain_timeout, (int, float))
                                          or not drain_timeout > 0):
            raise ValueError(f"drain_timeout is a number of seconds above 0 or None, not {drain_timeout!r}")
        self.app = app
        self._holder = holder
        self._drain_timeout = drain_timeout
        self._connect_at_startup = connect_at_startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await self._lifespan(scope, receive, send)

    def _resolve(self) -> ProcessClient:
        holder = self._holder
        return holder if isinstance(holder, ProcessClient) else holder()

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return  # a server that ends the lifespan before starting it
        try:
            holder = await run_sync(self._resolve)
            if self._connect_at_startup:
                nc = await run_sync(holder)
                log.info("NATS connected at startup to %s", nc.connected_url)
        except Exception as exc:
            log.error("NATS: the startup failed: %s", exc)
            await send({"type": "lifespan.startup.failed", "message": f"NATS: {type(exc).__name__}: {exc}"})
            return
        inner = _InnerLifespan(self.app, scope)
        failure = await inner.step("startup")
        if failure is not None:
            await run_sync(holder.close)
            await send({"type": "lifespan.startup.failed", "message": failure})
            await inner.finish(5.0)
            return
        await send({"type": "lifespan.startup.complete"})

        message = await receive()  # lifespan.shutdown: the server has answered its requests
        failures = []
        if inner.supported:
            failure = await inner.step("shutdown")
            if failure is not None:
                failures.append(failure)
            await inner.finish(5.0)
        try:
            await run_sync(holder.drain, self._drain_timeout)
            log.info("NATS client drained at shutdown")
        except Exception as exc:
            log.error("NATS: the drain at shutdown failed: %s", exc)
            failures.append(f"NATS: the drain failed: {type(exc).__name__}: {exc}")
        if failures:
            await send({"type": "lifespan.shutdown.failed", "message": "; ".join(failures)})
        else:
            await send({"type": "lifespan.shutdown.complete"})
