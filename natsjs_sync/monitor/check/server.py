"""The server check: one server of the cluster, by name, through the system account."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import NatsError
from .durations import _secs
from .result import CheckResult
from .thresholds import _threshold

if TYPE_CHECKING:
    from ...client import Client
    from ..models import Varz


def check_server(
    nc: Client,
    name: str,
    *,
    cpu_warn: float | None = None,
    cpu_critical: float | None = None,
    memory_warn: int | None = None,
    memory_critical: int | None = None,
    connections_warn: int | None = None,
    connections_critical: int | None = None,
    subscriptions_warn: int | None = None,
    subscriptions_critical: int | None = None,
    uptime_warn: float | None = None,
    uptime_critical: float | None = None,
    js_required: bool = False,
    auth_required: bool = False,
    tls_required: bool = False,
    timeout: float = 5.0,
) -> CheckResult:
    """One server of the cluster, by name, through the system account: it answers, and says it is healthy.

    Args:
        nc: a connected client of a system-account user (any server of the cluster).
        name: the server's name.
        cpu_warn, cpu_critical: CPU use in percent (a critical threshold below the
            warning one is CRITICAL, as in the nats CLI).
        memory_warn, memory_critical: memory use in bytes (likewise).
        connections_warn, connections_critical: client connections; a critical
            threshold below the warning one checks at or *below* them, as the nats CLI.
        subscriptions_warn, subscriptions_critical: subscriptions (likewise).
        uptime_warn, uptime_critical: up for less than this many seconds (it restarted).
        js_required, auth_required, tls_required: CRITICAL unless it has JetStream,
            requires authentication, requires TLS.
        timeout: seconds to wait for the server's answers.

    Returns:
        CRITICAL when the server does not answer or its ``HEALTHZ`` is not ok;
        UNKNOWN when the user is not in the system account.
    """
    from ..client import ServerFilter, SystemClient
    from ..errors import SystemAccountRequiredError

    result = CheckResult("server", name)
    client = SystemClient(nc, timeout=timeout)
    try:
        answers = [r for r in client.varz(servers=ServerFilter(name=name), expected=1) if r.server.name == name]
        if not answers:
            result.critical(f"server {name} did not answer within {_secs(timeout)}")
            return result
        varz = answers[0].data
        health = client.healthz(server=answers[0].server.id)[0].data
    except SystemAccountRequiredError as exc:
        result.unknown(str(exc))
        return result
    except (NatsError, OSError) as exc:
        result.critical(f"no answer from server {name}: {exc}")
        return result
    if health.ok:
        result.ok(f"healthy, version {varz.version}, up {varz.uptime}")
    else:
        result.critical(f"unhealthy ({health.status}): {health.error or health.errors or health.status_code}")
    result.perf("cpu", varz.cpu, "%", cpu_warn, cpu_critical)
    result.perf("mem", varz.mem, "", memory_warn, memory_critical, description="NATS Server memory usage in bytes")
    result.perf("connections", varz.connections, "", connections_warn, connections_critical)
    result.perf("subscriptions", varz.subscriptions, "", subscriptions_warn, subscriptions_critical)
    # The nats CLI's rules: a critical threshold below the warning one is a mistake for CPU and
    # memory, and turns the check of connections and subscriptions around (too few is worse).
    for what, value, warn, crit, fmt, invertible in (
        ("cpu", varz.cpu, cpu_warn, cpu_critical, lambda v: f"{v:.0f}%", False),
        ("memory", varz.mem, memory_warn, memory_critical, lambda v: f"{v:.0f} B", False),
        ("connections", varz.connections, connections_warn, connections_critical, str, True),
        ("subscriptions", varz.subscriptions, subscriptions_warn, subscriptions_critical, str, True),
    ):
        _check_usage(result, what, value, warn, crit, fmt, invertible)
    if varz.start is not None and varz.now is not None:
        up = (varz.now - varz.start).total_seconds()
        result.perf("uptime", round(up, 3), "s", uptime_warn, uptime_critical)
        _threshold(result, "uptime", up, uptime_warn, uptime_critical, _secs, above=False)
    _check_required(result, varz, js_required, auth_required, tls_required)
    return result


def _check_usage(result: CheckResult, what: str, value: float, warn: float | None, crit: float | None,
                 fmt: Callable[[float], str], invertible: bool) -> None:
    """One measurement of the server's use against its thresholds; a critical threshold below the warning
    one checks at or below them when ``invertible``, and is a mistake otherwise."""
    if warn is not None and crit is not None and crit < warn:
        if not invertible:
            result.critical(f"{what}: invalid thresholds, critical {fmt(crit)} below warning {fmt(warn)}")
        elif value <= crit:
            result.critical(f"{what} {fmt(value)} <= {fmt(crit)}")
        elif value <= warn:
            result.warning(f"{what} {fmt(value)} <= {fmt(warn)}")
    else:
        _threshold(result, what, value, warn, crit, fmt)


def _check_required(result: CheckResult, varz: Varz, js_required: bool, auth_required: bool,
                    tls_required: bool) -> None:
    """What the server must have: JetStream, authentication, TLS (each CRITICAL when asked for and missing)."""
    extra = varz.unknown_fields or {}
    if js_required and not varz.jetstream:
        result.critical("JetStream is not enabled")
    if auth_required and not extra.get("auth_required"):
        result.critical("authentication is not required")
    if tls_required and not extra.get("tls_required"):
        result.critical("TLS is not required")
