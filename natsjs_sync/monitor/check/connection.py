"""The connection check: connect, measure the round trip, send a request to ourselves."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..._redact import without_userinfo
from ...errors import NatsError
from .durations import _ms
from .result import CheckResult
from .thresholds import _threshold


def without_credentials(url: str) -> str:
    """``url`` (a URL, a comma-separated list, or a message quoting them) without the
    ``user:password@`` (or ``token@``) of its URLs, whatever a password holds: a check's
    line ends up in logs and dashboards."""
    return without_userinfo(url)


def check_connection(
    servers: str | Sequence[str],
    *,
    connect_warn: float | None = 0.5,
    connect_critical: float | None = 1.0,
    rtt_warn: float | None = 0.5,
    rtt_critical: float | None = 1.0,
    req_warn: float | None = 0.5,
    req_critical: float | None = 1.0,
    timeout: float = 5.0,
    **connect_options: Any,
) -> CheckResult:
    """Connect, measure the round trip, and send a request to ourselves through the server.

    Args:
        servers: the server URL(s).
        connect_warn, connect_critical: seconds to connect.
        rtt_warn, rtt_critical: seconds of the round trip (PING/PONG).
        req_warn, req_critical: seconds of a request answered through the server.
        timeout: seconds allowed for the connection and for each step after it.
        connect_options: passed to :func:`natsjs_sync.connect` (``user``,
            ``user_credentials``, ``tls``, ...).

    Returns:
        CRITICAL when the server cannot be reached, refuses us, or a step fails;
        the threshold's level when a time crosses one; OK otherwise.
    """
    from ..._connect import connect

    url = servers if isinstance(servers, str) else ",".join(servers)
    result = CheckResult("connections", "Connection")
    options: dict[str, Any] = dict(name="natsjs-check", connect_timeout=timeout, allow_reconnect=False)
    options.update(connect_options)
    started = time.perf_counter()
    try:
        nc = connect(servers, **options)
    except (NatsError, OSError) as exc:
        result.critical(f"cannot connect to {without_credentials(url)}: {without_credentials(str(exc))}")
        return result
    try:
        took = time.perf_counter() - started
        result.ok(f"connected to {nc.connected_url} in {_ms(took)}")
        result.perf("connect_time", round(took, 6), "s", connect_warn, connect_critical,
                    description="Time taken to connect to NATS")
        _threshold(result, "connect time", took, connect_warn, connect_critical, _ms)
        rtt = nc.rtt(timeout)
        result.ok(f"rtt {_ms(rtt)}")
        result.perf("rtt", round(rtt, 6), "s", rtt_warn, rtt_critical,
                    description="The round-trip-time of the connection")
        _threshold(result, "rtt", rtt, rtt_warn, rtt_critical, _ms)
        inbox = nc.new_inbox()
        sub = nc.subscribe(inbox, cb=lambda msg: msg.respond(msg.data))
        try:
            started = time.perf_counter()
            nc.request(inbox, b"check", timeout=timeout)
            req = time.perf_counter() - started
        finally:
            sub.unsubscribe()
        result.ok(f"request {_ms(req)}")
        result.perf("request_time", round(req, 6), "s", req_warn, req_critical,
                    description="Time taken for a full Request-Reply operation")
        _threshold(result, "request time", req, req_warn, req_critical, _ms)
    except (NatsError, OSError) as exc:
        result.critical(f"connected, then failed: {exc}")
    finally:
        nc.close()
    return result
