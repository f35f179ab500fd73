"""A readiness check a web process can serve on every probe.

:func:`check_health` asks a :class:`~natsjs_sync.Client` how it is doing and
answers with a :class:`Health`: an overall status plus a plain dict per check,
ready to be serialised as JSON. The statuses are those of the IETF "health
check response format" draft: ``"pass"``, ``"warn"`` (working, but a stream
or consumer is close to its limits) and ``"fail"`` (not connected, JetStream
unreachable, a stream or consumer missing). :attr:`Health.http_status` maps
them to 200 (pass, warn) and 503 (fail).

It answers a *readiness* question, as Kubernetes means it: can this process
serve what needs NATS right now? A ``"fail"`` takes the process out of the
load balancer until its client has reconnected. It is no *liveness* check
(restart the process?): nothing it finds is mended by a restart (the client
reconnects by itself, and a new process would find the same servers and
streams), and failing liveness on it restarts every process at once during
an outage.

It is cheap: one PING round trip, one JetStream account request, and one info
request per stream or consumer named, all within one ``timeout`` budget. A
client that is not connected costs nothing: the check fails at once, without
waiting for a reconnect. It never raises for a NATS failure; the failure is
the answer.

Nothing here imports a web framework; :mod:`natsjs_sync.contrib.flask` and
:mod:`natsjs_sync.contrib.django` serve it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._timeout import Deadline, check_seconds
from .errors import BadSubjectError, NatsError, TimeoutError
from .jetstream._api import DEFAULT_API_PREFIX, api_prefix
from .jetstream.context import check_name
from .protocol.subjects import validate_subject

if TYPE_CHECKING:
    from .client import Client
    from .jetstream import JetStream

__all__ = ["Health", "HealthStatus", "check_health", "check_options"]

#: A check's status, as the IETF health check response format names them.
HealthStatus = Literal["pass", "warn", "fail"]

_RANK: dict[str, int] = {"pass": 0, "warn": 1, "fail": 2}

#: The default budget of a whole check: shorter than any load balancer's probe timeout.
DEFAULT_TIMEOUT = 2.0


@dataclass(frozen=True)
class Health:
    """The answer of :func:`check_health`. Immutable, so thread-safe.

    Attributes:
        status: the worst status of all checks: ``"pass"``, ``"warn"`` or ``"fail"``.
        checks: one dict per check, by name (``"connection"``, ``"jetstream"``,
            ``"stream:NAME"``, ``"consumer:STREAM/NAME"``); each has a
            ``"status"`` and what was measured, or an ``"error"``.
        elapsed: seconds the whole check took.
    """

    status: HealthStatus
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        """True unless the status is ``"fail"``: the process can serve."""
        return self.status != "fail"

    @property
    def http_status(self) -> int:
        """200 for ``"pass"`` and ``"warn"``, 503 for ``"fail"``."""
        return 200 if self.ok else 503

    def as_dict(self, details: bool = True) -> dict[str, Any]:
        """The JSON-ready body.

        Args:
            details: ``{"status": ..., "elapsed_ms": ..., "checks": {...}}`` with
                what each check measured (server URL and id, usage, errors); when
                false, ``{"status": ...}`` alone, for callers who may not see more.
        """
        if not details:
            return {"status": self.status}
        return {"status": self.status, "elapsed_ms": round(self.elapsed * 1000, 3), "checks": self.checks}

    @classmethod
    def failed(cls, error: BaseException | str, elapsed: float = 0.0) -> Health:
        """A failed connection check, for when there is no client to ask (it could not connect).

        Args:
            error: why there is no client.
            elapsed: seconds spent finding that out.
        """
        return cls("fail", {"connection": {"status": "fail", "connected": False, "error": _describe(error)}},
                   elapsed)


def _describe(error: BaseException | str) -> str:
    if isinstance(error, str):
        return error
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _usage(used: int, limit: int | None) -> float | None:
    """``used / limit`` where a limit is set (``None``, 0 and -1 mean "no limit")."""
    if limit is None or limit <= 0:
        return None
    return used / limit


def _highest_usage(*used_and_limits: tuple[int, int | None]) -> float | None:
    """The largest ``used / limit`` share among the pairs with a limit set, or ``None`` when none has one."""
    return max((u for u in (_usage(used, limit) for used, limit in used_and_limits) if u is not None), default=None)


def _worst(statuses: Iterable[HealthStatus]) -> HealthStatus:
    return max(statuses, key=_RANK.__getitem__, default="pass")


def _run(name: str, checks: dict[str, dict[str, Any]], deadline: Deadline,
         probe: Callable[[float | None], dict[str, Any]]) -> bool:
    """Run one probe within what is left of the budget; its failure becomes its answer.

    Returns:
        True when the probe ran and did not fail.
    """
    if deadline.expired():
        checks[name] = {"status": "fail", "error": "not checked: the health check's timeout ran out"}
        return False
    try:
        checks[name] = probe(deadline.remaining())
    except TimeoutError as exc:
        checks[name] = {"status": "fail", "error": f"timed out: {_describe(exc)}"}
    except NatsError as exc:
        checks[name] = {"status": "fail", "error": _describe(exc)}
    return bool(checks[name]["status"] != "fail")


def _listed(value: object, what: str) -> list[Any]:
    """The items of a list-like argument (a str is one name, not a list of letters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{what} is a list of names, not {value!r}")
    return list(value)


def _stream_names(streams: object) -> list[str]:
    return [check_name(name, "stream") for name in _listed(streams, "streams")]


def _consumer_names(consumers: object) -> list[tuple[str, str]]:
    names = []
    for item in _listed(consumers, "consumers"):
        if isinstance(item, str):
            stream, sep, name = item.partition("/")
            if not sep or not stream or not name:
                raise ValueError(f"a consumer is named 'STREAM/CONSUMER', not {item!r}")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            stream, name = item
        else:
            raise TypeError(f"a consumer is named 'STREAM/CONSUMER' or (stream, consumer), not {item!r}")
        names.append((check_name(stream, "stream"), check_name(name, "consumer")))
    return names


def _share(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"max_usage is a share of a limit (0.9 for 90 %), not {value!r}")
    if not 0 < value <= 1:
        raise ValueError(f"max_usage is a share of a limit, above 0 and at most 1 (0.9 for 90 %), not {value!r}")
    return float(value)


def _lag(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_pending is a number of messages (an int) or None, not {value!r}")
    if value < 0:
        raise ValueError(f"max_pending is a number of messages, 0 or more, not {value!r}")
    return value


def _budget(value: object) -> float | None:
    seconds = check_seconds(value)
    if seconds is not None and seconds <= 0:
        raise ValueError("timeout is the whole check's budget, a number of seconds above 0 or None, not 0: "
                         "every check would fail")
    return seconds


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"jetstream is True or False, not {value!r}")
    return value


def _text(what: str, optional: bool) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise TypeError(f"{what} is a non-empty str{' or None' if optional else ''}, not {value!r}")
        return value
    return check


#: Each keyword of :func:`check_health`, and what makes its value usable (or raises).
_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "timeout": _budget,
    "jetstream": _flag,
    "streams": _stream_names,
    "consumers": _consumer_names,
    "max_usage": _share,
    "max_pending": _lag,
    "domain": _text("domain", optional=True),
    "api_prefix": _text("api_prefix", optional=False),
}


def check_options(**options: Any) -> dict[str, Any]:
    """Check keywords of :func:`check_health` without checking anything else: what a web
    integration does with its settings at start-up, so a mistake stops the app there
    instead of failing every probe.

    Args:
        options: keywords of :func:`check_health` (any subset).

    Returns:
        The values as :func:`check_health` uses them (a duration as float seconds,
        consumers as ``(stream, consumer)`` pairs).

    Raises:
        TypeError: an unknown keyword, or a value of the wrong type (the message names it).
        ValueError: a value out of range (a ``timeout`` of 0, with which every check
            fails), a bad stream or consumer name, or a ``domain`` or ``api_prefix``
            that makes the check's JetStream requests unsendable.
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"check_health() takes no keyword {unknown[0]!r}")
    checked = {key: _OPTIONS[key](value) for key, value in options.items()}
    _check_requests(checked)
    return checked


def _check_requests(checked: dict[str, Any]) -> None:
    """Refuse what would make a JetStream request of the check unsendable (a domain or API
    prefix with a space or a wildcard, a name too long for a subject): every probe would fail."""
    prefix = api_prefix(checked.get("api_prefix", DEFAULT_API_PREFIX), checked.get("domain"))
    subjects = [f"{prefix}.INFO"]
    subjects += [f"{prefix}.STREAM.INFO.{name}" for name in checked.get("streams", ())]
    subjects += [f"{prefix}.CONSUMER.INFO.{stream}.{name}" for stream, name in checked.get("consumers", ())]
    for subject in subjects:
        try:
            validate_subject(subject)
        except BadSubjectError as exc:
            raise BadSubjectError(f"the check's JetStream requests could never be sent: {exc}") from None


def check_health(
    nc: Client | None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    jetstream: bool = True,
    streams: Sequence[str] = (),
    consumers: Sequence[str | tuple[str, str]] = (),
    max_usage: float = 0.9,
    max_pending: int | None = None,
    domain: str | None = None,
    api_prefix: str = "$JS.API",
) -> Health:
    """Check a client's connection, round trip, JetStream and, optionally, lag against limits.

    The checks, in order, each within what is left of ``timeout``:

    - ``connection``: connected (else ``"fail"`` at once, and nothing else is
      asked), the server's URL, and the round trip of a PING (``rtt_ms``);
    - ``jetstream`` (if ``jetstream``): the account's usage from one API
      request; ``"warn"`` when memory or storage use reaches ``max_usage`` of
      the account's limit;
    - ``stream:NAME`` for each of ``streams``: messages and bytes against the
      stream's ``max_msgs``/``max_bytes``; ``"warn"`` at ``max_usage``;
    - ``consumer:STREAM/NAME`` for each of ``consumers``: ``num_pending`` (the
      lag: messages not yet delivered) and ``num_ack_pending`` against
      ``max_ack_pending``; ``"warn"`` when the lag exceeds ``max_pending`` or
      the unacknowledged messages reach ``max_usage`` of ``max_ack_pending``.

    A stream or consumer that does not exist is a ``"fail"``.

    Args:
        nc: the client to check; ``None`` (no client could be made) is a ``"fail"``.
        timeout: seconds for the whole check, above 0 (``None``: no bound).
        jetstream: ask JetStream for the account's usage.
        streams: names of streams whose usage to check.
        consumers: consumers whose lag to check, as ``"STREAM/CONSUMER"`` or
            ``(stream, consumer)``.
        max_usage: the share of a limit (0 to 1) from which a check warns.
        max_pending: the lag (``num_pending``) above which a consumer check
            warns; ``None``: the lag is reported, never warned about.
        domain: the JetStream domain.
        api_prefix: the JetStream API prefix.

    Returns:
        The :class:`Health`; its :meth:`~Health.as_dict` is the body to serve.

    Raises:
        TypeError, ValueError: an argument it cannot use (see :func:`check_options`; a
            programming error, raised before anything is sent).
    """
    checked = check_options(timeout=timeout, jetstream=jetstream, streams=streams, consumers=consumers,
                            max_usage=max_usage, max_pending=max_pending, domain=domain, api_prefix=api_prefix)
    seconds, stream_names, consumer_names = checked["timeout"], checked["streams"], checked["consumers"]
    start = time.monotonic()
    deadline = Deadline(seconds)
    if nc is None:
        return Health.failed("no client", time.monotonic() - start)
    checks: dict[str, dict[str, Any]] = {}

    if not nc.is_connected:
        state = "closed" if nc.is_closed else "reconnecting" if nc.is_reconnecting else "not connected"
        last = nc.last_error
        check: dict[str, Any] = {"status": "fail", "connected": False, "state": state}
        if last is not None:
            check["error"] = _describe(last)
        checks["connection"] = check
        return Health("fail", checks, time.monotonic() - start)

    def connection(left: float | None) -> dict[str, Any]:
        rtt = nc.rtt(timeout=left)
        return {"status": "pass", "connected": True, "url": nc.connected_url,
                "server_id": nc.server_info.get("server_id"), "rtt_ms": round(rtt * 1000, 3)}

    if not _run("connection", checks, deadline, connection):
        checks["connection"]["connected"] = nc.is_connected
        return Health("fail", checks, time.monotonic() - start)

    if jetstream or stream_names or consumer_names:
        # Each call passes its own share of the budget; the context's default is never used.
        js: JetStream = nc.jetstream(domain=domain, api_prefix=api_prefix)

    if jetstream:
        def account(left: float | None) -> dict[str, Any]:
            info = js.account_info(timeout=left)
            limits = info.limits
            share = _highest_usage((info.memory, limits.max_memory), (info.storage, limits.max_storage))
            return {"status": "warn" if share is not None and share >= max_usage else "pass",
                    "streams": info.streams, "consumers": info.consumers,
                    "memory": info.memory, "storage": info.storage, "domain": info.domain}

        _run("jetstream", checks, deadline, account)

    for name in stream_names:
        def stream(left: float | None, name: str = name) -> dict[str, Any]:
            info = js.stream(name, timeout=left).cached_info
            cfg, state = info.config, info.state
            share = _highest_usage((state.messages, cfg.max_msgs), (state.bytes, cfg.max_bytes))
            return {"status": "warn" if share is not None and share >= max_usage else "pass",
                    "messages": state.messages, "bytes": state.bytes,
                    "max_msgs": cfg.max_msgs, "max_bytes": cfg.max_bytes,
                    "usage": round(share, 4) if share is not None else None}

        _run(f"stream:{name}", checks, deadline, stream)

    for stream_name, consumer_name in consumer_names:
        def consumer(left: float | None, stream_name: str = stream_name,
                     consumer_name: str = consumer_name) -> dict[str, Any]:
            info = js.consumer(stream_name, consumer_name, timeout=left).cached_info
            max_ack = info.config.max_ack_pending
            ack_share = _usage(info.num_ack_pending, max_ack)
            lagging = max_pending is not None and info.num_pending > max_pending
            stuck = ack_share is not None and ack_share >= max_usage
            return {"status": "warn" if lagging or stuck else "pass",
                    "num_pending": info.num_pending, "num_ack_pending": info.num_ack_pending,
                    "max_ack_pending": max_ack, "num_redelivered": info.num_redelivered,
                    "num_waiting": info.num_waiting}

        _run(f"consumer:{stream_name}/{consumer_name}", checks, deadline, consumer)

    return Health(_worst(c["status"] for c in checks.values()), checks, time.monotonic() - start)
