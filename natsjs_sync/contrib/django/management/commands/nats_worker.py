"""``manage.py nats_worker``: run the project's NATS services and consumers until told to stop, then drain.

The project declares its workers in ``settings.NATS["workers"]``: dotted paths
of callables taking the client. Each is called once, with the process's
client (:func:`natsjs_sync.contrib.django.get_client`); it subscribes, starts
a ``consume()``, or adds a service, and returns. What it returns, if anything,
is stopped first at shutdown: an object with ``drain()`` (a consume context)
is drained, one with only ``stop()`` (a service) is stopped.

On SIGTERM or SIGINT the worker drains: every ``consume()`` stops pulling,
the messages already received are handled and acknowledged, subscriptions
finish their queues, then the connection is flushed and closed, all within
``drain_timeout`` (the setting, or ``--drain-timeout``). A message
acknowledged before the signal is never delivered again; one received and not
yet acknowledged is handled before the process exits, or (if the drain runs out
of time) redelivered to another worker.
"""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

import natsjs_sync.contrib.django as integration
from natsjs_sync.contrib.process import SettingsError, import_callable
from natsjs_sync.errors import NatsError

# A worker started before the servers are up waits for them, retrying this often.
_CONNECT_RETRY = 1.0


class Command(BaseCommand):
    help = ("Run the NATS workers of settings.NATS['workers'] (or those named) until SIGTERM/SIGINT, "
            "then drain: received messages are handled and acknowledged before the process exits.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workers", nargs="*", metavar="module.callable",
                            help="workers to run instead of settings.NATS['workers']")
        parser.add_argument("--drain-timeout", type=float, default=None,
                            help="seconds the drain may take (default: settings.NATS['drain_timeout'], 30)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            settings = integration.get_settings()
            paths = options["workers"] or list(settings.workers)
            workers = [import_callable(path) for path in paths]
        except (SettingsError, ImportError, TypeError) as exc:
            raise CommandError(str(exc)) from exc
        if not workers:
            raise CommandError("no workers: list them in settings.NATS['workers'] or on the command line")
        drain_timeout = options["drain_timeout"] or settings.drain_timeout

        stop = _Signalled()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.flag = True

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            nc = self._connect(stop)
            if nc is None:
                return
            handles = [worker(nc) for worker in workers]
            self.stdout.write(f"nats_worker: {len(workers)} worker(s) running on {nc.connected_url}")
            self.stdout.flush()
            while not stop.wait(1.0):
                if nc.is_closed:
                    raise CommandError(f"the NATS client closed: {nc.last_error}")
            self.stdout.write("nats_worker: draining")
            self.stdout.flush()
            for handle in reversed(handles):
                try:
                    if hasattr(handle, "drain"):
                        handle.drain(timeout=drain_timeout)
                    elif hasattr(handle, "stop"):
                        handle.stop()
                except NatsError as exc:
                    self.stderr.write(f"nats_worker: stopping {handle!r} failed: {exc}")
            try:
                integration.get_holder().drain(timeout=drain_timeout)
            except NatsError as exc:
                raise CommandError(f"the drain did not finish: {exc}") from exc
            self.stdout.write("nats_worker: drained")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _connect(self, stop: _Signalled) -> Any:
        """The client, waiting for a server while none answers; ``None`` if told to stop first."""
        while True:
            try:
                return integration.get_client()
            except NatsError as exc:
                self.stderr.write(f"nats_worker: waiting for NATS: {exc}")
            if stop.wait(_CONNECT_RETRY):
                return None


class _Signalled:
    """Set by the signal handler: a plain attribute, never a lock.

    A handler runs on the main thread between two bytecodes, possibly while
    that thread holds the lock a ``threading.Event`` would take to set itself
    (inside its own ``wait``): setting an Event there can hang the worker.
    """

    def __init__(self) -> None:
        self.flag = False

    def wait(self, timeout: float) -> bool:
        """Whether the flag was set within ``timeout`` seconds (sleeps, which signals interrupt)."""
        deadline = time.monotonic() + timeout
        while not self.flag:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.1))
        return True
