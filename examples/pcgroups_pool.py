"""A pre-forked worker pool where each process is a member of an elastic consumer group.

The shape of a Celery prefork pool, a gunicorn worker set or any
multiprocessing pool: the parent forks N processes and makes no connection
itself; each process connects on its own, adds itself to the group under a
name tied to its pool slot (``<host>-<slot>``, so a recycled process takes
its predecessor's place instead of leaving a stale member), consumes, and on
SIGTERM removes itself and stops, so the others take over its partitions at
once. Messages of one key are handled by one process at a time, in order.

    python examples/pcgroups_pool.py [nats://host:4222] [workers]

With no URL (and no ``NATS_URL``) it starts an embedded nats-server for the
run. Each handled message is printed as ``<member> <subject> <data>``. Ctrl-C
(SIGINT, to every process of the pool) or SIGTERM to the parent stops the pool
at any moment, during the start too: each member that joined leaves the group
and stops, with no traceback. (An embedded server does not take Ctrl-C itself:
it runs in a session of its own and is stopped after the members left.)
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import traceback

import natsjs_sync as nats
from natsjs_sync import pcgroups
from natsjs_sync.jetstream import ConsumerConfig

STREAM, GROUP, PARTITIONS = "ORDERS", "billing", 6


def setup(url: str) -> None:
    """Make the stream and the group (idempotent: every start may call it)."""
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(name=STREAM, subjects=["orders.*"])
        pcgroups.create_elastic(js, STREAM, GROUP, PARTITIONS,
                                [pcgroups.PartitioningFilter(filter="orders.*", partitioning_wildcards=(1,))])


def say(*words: object) -> None:
    """One line on stdout in one write: the pool's processes (and each one's
    consumer thread and main thread) share the pipe, and a print() of several
    pieces can be split by another writer's line."""
    os.write(1, (" ".join(str(w) for w in words) + "\n").encode())


#: The signals that stop the pool. They stay blocked in the members, whose main thread waits for one
#: with sigwait(): no handler runs in the middle of the client's code, and the client's threads
#: (which inherit the mask) never take them.
STOP = {signal.SIGINT, signal.SIGTERM}


def member(url: str, slot: int) -> None:
    """One pool process: join as ``<host>-<slot>``, consume until SIGINT or SIGTERM, then leave."""
    # A member name is one NATS token: a fully qualified host name's dots would be refused.
    name = f"{socket.gethostname().partition('.')[0]}-{slot}"
    nc = nats.connect(url, name=name, max_reconnect_attempts=-1)
    js = nc.jetstream()

    def handle(msg: nats.Msg) -> None:
        say(name, msg.subject, msg.data.decode())
        msg.ack_sync()  # acknowledged before the next one of its partitions comes

    ctx = pcgroups.elastic_consume(js, STREAM, GROUP, name, handle, ConsumerConfig(ack_wait=5.0))
    pcgroups.add_members(js, STREAM, GROUP, [name])
    say("JOINED", name, os.getpid())
    signal.sigwait(STOP)
    try:
        pcgroups.delete_members(js, STREAM, GROUP, [name])  # the others take its partitions now
    except (nats.NatsError, OSError) as exc:
        # The server went first (stopped by its operator): there is no group to leave.
        print(f"{name}: stopped without leaving the group ({exc})", file=sys.stderr, flush=True)
    ctx.stop()
    nc.close()


def main(url: str, workers: int) -> int:
    """Fork ``workers`` members and wait for them; SIGINT or SIGTERM stops them all.

    Returns:
        The exit code: 130 after Ctrl-C (as a shell reports it), else 0.
    """
    setup(url)  # before forking: the parent keeps no connection
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP)  # until this process's handler is in place
    children = []
    for slot in range(workers):
        pid = os.fork()
        if pid == 0:  # the child never returns into the parent's code
            try:
                member(url, slot)
            except (nats.NatsError, OSError) as exc:  # the server went away, say: one line, not a traceback
                print(f"member {slot}: stopped: {exc}", file=sys.stderr, flush=True)
                os._exit(1)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        children.append(pid)

    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        for p in children:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass  # that one has left already

    for sig in STOP:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP)
    for pid in children:
        os.waitpid(pid, 0)  # a signal's handler runs, then the wait goes on
    return 130 if signal.SIGINT in received else 0


def workers_arg(argv: list[str]) -> int:
    """The pool's size: the second argument (default 3), a positive number."""
    text = argv[2] if len(argv) > 2 else "3"
    if not text.isdigit() or int(text) < 1:
        raise SystemExit(f"error: the number of workers must be a positive whole number, not {text!r}")
    return int(text)


if __name__ == "__main__":
    from _server import server_url

    size = workers_arg(sys.argv)
    try:
        with server_url(sys.argv[1:2]) as nats_url:
            code = main(nats_url, size)
    except KeyboardInterrupt:  # Ctrl-C before the pool ran
        code = 130
    except nats.NatsError as exc:  # no server at the URL given, say
        print(f"error: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)
