"""Service statistics and error replies under two handler habits.

A handler that hands its request to another thread, which answers after the
handler returned, had the request counted twice (requests and processing time).
A handler's exception went back whole (its ``repr``, payload included) in the
``Nats-Service-Error`` header: past max_payload no error reply could be sent and
the caller waited for its timeout, and internal details reached any caller.
"""

from __future__ import annotations

import threading

import natsjs_sync as nats
from natsjs_sync import micro
from natsjs_sync.micro import Request, add_service

from ..conftest import wait_until


def test_a_reply_sent_after_the_handler_returned_is_counted_once(nc: nats.Client, caller: nats.Client) -> None:
    handed: list[Request] = []
    taken = threading.Event()

    def hand_off(req: Request) -> None:
        handed.append(req)  # answered later by another thread
        taken.set()

    svc = add_service(nc, name="handoff", version="1.0.0")
    svc.add_endpoint("later", hand_off)
    nc.flush()
    replies: list[nats.Msg] = []

    def ask() -> None:
        replies.append(caller.request("later", b"q", timeout=10))

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        assert taken.wait(10)
        # The service counts the request when the handler returns; then the late answer.
        assert wait_until(lambda: svc.stats().endpoints[0].num_requests == 1, timeout=10)
        handed[0].respond(b"late answer")
        asker.join(10)
        assert [m.data for m in replies] == [b"late answer"]
        (stats,) = micro.ServiceClient(caller).stats("handoff", svc.id)
        (ep,) = stats.endpoints
        assert (ep.num_requests, ep.num_errors) == (1, 0)
        assert ep.average_processing_time == ep.processing_time
    finally:
        asker.join(10)
        svc.stop()


def test_a_handler_exception_with_a_huge_message_gets_a_short_500_reply(
        nc: nats.Client, caller: nats.Client) -> None:
    secret = "payload-" + "x" * (2 * 1024 * 1024)  # past the default 1 MiB max_payload

    def leaky(req: Request) -> None:
        raise ValueError(secret)

    svc = add_service(nc, name="leaky", version="1.0.0")
    svc.add_endpoint("boom", leaky)
    nc.flush()
    try:
        reply = caller.request("boom", b"q", timeout=10)  # the old code sent nothing: a timeout
        headers = reply.headers or {}
        assert headers["Nats-Service-Error-Code"] == "500"
        assert headers["Nats-Service-Error"] == "ValueError"
        assert "payload-" not in headers["Nats-Service-Error"]
        # The details stay on the service's side, short enough for a STATS reply.
        (stats,) = micro.ServiceClient(caller).stats("leaky", svc.id)
        (ep,) = stats.endpoints
        assert (ep.num_requests, ep.num_errors) == (1, 1)
        assert ep.last_error.startswith("ValueError('payload-xxx")
        assert len(ep.last_error) < 64 * 1024
        assert svc.stats().endpoints[0].last_error == ep.last_error
    finally:
        svc.stop()
