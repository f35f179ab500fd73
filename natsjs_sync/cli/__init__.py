"""The ``natsjs-sync`` command line (also ``python -m natsjs_sync``).

``demo`` and ``server`` start an embedded nats-server (from the ``server``
extra) when no server URL is given. User mistakes end with a one-line message
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence

from .. import __version__
from .._connect import connect
from ..client import Client
from ..errors import NatsError
from ..msg import Msg


def _print(*args: object) -> None:
    print(*args, flush=True)


@contextlib.contextmanager
def _server_url(url: str | None, embedded_ok: bool) -> Iterator[str]:
    """Yield ``url``, or ``$NATS_URL``, or the URL of an embedded server we start."""
    url = url or os.environ.get("NATS_URL")
    if url:
        yield url
        return
    if not embedded_ok:
        raise SystemExit("error: no server given: pass --server URL or set NATS_URL")
    from ..testing import NatsServer

    try:
        server = NatsServer(jetstream=True)
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    server.start()
    _print(f"started an embedded nats-server {server.url} (JetStream in {server.store_dir})")
    try:
        yield server.url
    finally:
        server.close()
        _print("stopped the embedded nats-server")


def cmd_demo(args: argparse.Namespace) -> int:
    with _server_url(args.server, embedded_ok=True) as url:
        with connect(url, name="natsjs-demo") as nc:
            info = nc.server_info
            _print(f"connected to {nc.connected_url} (server {info.get('version')}, max_payload {nc.max_payload})")

            sub = nc.subscribe("demo.>")
            _print("subscribed to demo.>")
            for i in range(args.count):
                nc.publish(f"demo.greeting.{i}", f"hello #{i}".encode(), headers={"Demo-Seq": str(i)})
            nc.flush()
            _print(f"published {args.count} messages to demo.greeting.*")
            for _ in range(args.count):
                msg = sub.next_msg(timeout=5.0)
                headers: dict[str, str] = msg.headers or {}
                _print(f"  received {msg.subject}: {msg.data.decode()} (Demo-Seq={headers.get('Demo-Seq')})")
            sub.unsubscribe()

            def answer(msg: Msg) -> None:
                msg.respond(b"pong: " + msg.data)

            nc.subscribe("demo.service", queue="workers", cb=answer)
            nc.flush()
            reply = nc.request("demo.service", b"ping", timeout=5.0)
            _print(f"request demo.service 'ping' -> reply {reply.data.decode()!r}")
            _print(f"round-trip time {nc.rtt() * 1e6:.0f} us")
            nc.drain(timeout=5.0)
            _print("drained and closed")
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    from ..testing import NatsServer

    try:
        server = NatsServer(port=args.port, jetstream=not args.no_jetstream)
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    server.start()
    _print(f"nats-server listening on {server.url} (JetStream {'off' if args.no_jetstream else 'on'}); Ctrl-C stops it")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set() and server.is_running:
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def cmd_pub(args: argparse.Namespace) -> int:
    with _server_url(args.server, embedded_ok=False) as url, connect(url, name="natsjs-cli") as nc:
        for _ in range(args.count):
            nc.publish(args.subject, args.data.encode())
        nc.flush()
        _print(f"published {args.count} message(s) to {args.subject}")
    return 0


def cmd_sub(args: argparse.Namespace) -> int:
    with _server_url(args.server, embedded_ok=False) as url, connect(url, name="natsjs-cli") as nc:
        sub = nc.subscribe(args.subject, queue=args.queue)
        _print(f"listening on {args.subject}")
        received = 0
        deadline = time.monotonic() + args.timeout if args.timeout else None
        while args.count == 0 or received < args.count:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            try:
                msg = sub.next_msg(timeout=remaining if remaining is not None else None)
            except NatsError:
                break
            received += 1
            _print(f"[#{received}] {msg.subject}: {msg.data.decode(errors='replace')}")
    return 0


@contextlib.contextmanager
def client_for(args: argparse.Namespace, embedded_ok: bool = False) -> Iterator[Client]:
    """A client on ``--server`` (or ``$NATS_URL``; an embedded server when allowed)."""
    with _server_url(getattr(args, "server", None), embedded_ok) as url, connect(url, name="natsjs-cli") as nc:
        yield nc


def add_server_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", "-s", help="server URL (default: $NATS_URL)")


def cmd_reply(args: argparse.Namespace) -> int:
    with client_for(args) as nc:
        done = threading.Event()
        answered = [0]

        def answer(msg: Msg) -> None:
            msg.respond(args.data.encode() if args.data is not None else msg.data)
            answered[0] += 1
            _print(f"[#{answered[0]}] answered a request on {msg.subject}")
            if args.count and answered[0] >= args.count:
                done.set()

        nc.subscribe(args.subject, queue=args.queue, cb=answer)
        nc.flush()
        _print(f"answering requests on {args.subject}" + (f" (queue {args.queue})" if args.queue else ""))
        try:
            done.wait(args.timeout or None)
        except KeyboardInterrupt:
            pass
    return 0


def cmd_req(args: argparse.Namespace) -> int:
    with _server_url(args.server, embedded_ok=False) as url, connect(url, name="natsjs-cli") as nc:
        reply = nc.request(args.subject, args.data.encode(), timeout=args.timeout)
        _print(reply.data.decode(errors="replace"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="natsjs-sync", description="Synchronous NATS and JetStream client")
    parser.add_argument("--version", action="version", version=f"natsjs-sync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="publish, subscribe and request (embedded server when no URL)")
    p.add_argument("--server", "-s", help="server URL (default: $NATS_URL, else an embedded server)")
    p.add_argument("--count", type=int, default=3, help="messages to publish")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("server", help="run an embedded nats-server until Ctrl-C")
    p.add_argument("--port", type=int, default=4222)
    p.add_argument("--no-jetstream", action="store_true")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("pub", help="publish a message")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--server", "-s")
    p.set_defaults(func=cmd_pub)

    p = sub.add_parser("sub", help="print messages of a subject")
    p.add_argument("subject")
    p.add_argument("--queue")
    p.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after this many seconds (0: never)")
    p.add_argument("--server", "-s")
    p.set_defaults(func=cmd_sub)

    p = sub.add_parser("req", help="send a request and print the reply")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--server", "-s")
    p.set_defaults(func=cmd_req)

    p = sub.add_parser("reply", help="answer requests (with DATA, or echo them)")
    p.add_argument("subject")
    p.add_argument("data", nargs="?", default=None)
    p.add_argument("--queue")
    p.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after this many seconds (0: never)")
    add_server_option(p)
    p.set_defaults(func=cmd_reply)

    from . import bench, jetstream, service, stores

    jetstream.register(sub)
    stores.register(sub)
    bench.register(sub)
    service.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except NatsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
