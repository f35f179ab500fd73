"""Issue 20, calls from the library's own threads never hang: a subscription
callback that drains its subscription or the client must get its answer at
once (it works, or raises RuntimeError), never wait for itself until the drain
timeout runs out."""

from __future__ import annotations

import threading

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

DRAIN_TIMEOUT = 6.0  # what the bug makes the callback wait
BOUND = 4.0  # what a fix may take at most


def test_sub_drain_from_its_own_callback(shared_server: NatsServer) -> None:
    outcome: list[BaseException | None] = []
    done = threading.Event()
    with nats.connect(shared_server.url, drain_timeout=DRAIN_TIMEOUT) as nc:
        def handler(msg: nats.Msg) -> None:
            try:
                sub.drain()
                outcome.append(None)
            except Exception as exc:
                outcome.append(exc)
            finally:
                done.set()

        sub = nc.subscribe("re.sub", cb=handler)
        nc.publish("re.sub", b"x")
        nc.flush()
        assert done.wait(BOUND), "sub.drain() called from its own callback did not return"
        assert outcome[0] is None or isinstance(outcome[0], RuntimeError), outcome
        if outcome[0] is None:
            assert not sub.is_valid


def test_client_drain_from_a_message_callback(shared_server: NatsServer) -> None:
    outcome: list[BaseException | None] = []
    done = threading.Event()
    nc = nats.connect(shared_server.url, drain_timeout=DRAIN_TIMEOUT)
    try:
        def handler(msg: nats.Msg) -> None:
            try:
                nc.drain()
                outcome.append(None)
            except Exception as exc:
                outcome.append(exc)
            finally:
                done.set()

        nc.subscribe("re.client", cb=handler)
        nc.publish("re.client", b"x")
        nc.flush()
        assert done.wait(BOUND), "nc.drain() called from a message callback did not return"
        assert outcome[0] is None or isinstance(outcome[0], RuntimeError), outcome
    finally:
        nc.close()


def test_close_and_request_from_a_callback_still_work(shared_server: NatsServer) -> None:
    """What already works from a callback keeps working (the issue's fix must not refuse it)."""
    replies: list[bytes] = []
    done = threading.Event()
    with nats.connect(shared_server.url) as responder:
        responder.subscribe("re.echo", cb=lambda m: m.respond(m.data))
        responder.flush()
        nc = nats.connect(shared_server.url)

        def handler(msg: nats.Msg) -> None:
            replies.append(nc.request("re.echo", b"inner", timeout=5).data)
            nc.close()
            done.set()

        nc.subscribe("re.close", cb=handler)
        nc.publish("re.close", b"x")
        nc.flush()
        assert done.wait(10)
        assert replies == [b"inner"] and nc.is_closed
