"""The consumer check: how far behind its readers are, its pinned clients, its Raft group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import NatsError
from .cluster import _check_group
from .durations import _age, _go_duration, _go_time
from .metadata import CONSUMER_METADATA, _from_metadata
from .result import CheckResult, Status

if TYPE_CHECKING:
    from ...client import Client


def check_consumer(
    nc: Client,
    stream: str,
    consumer: str,
    *,
    outstanding_ack_critical: int | None = None,
    waiting_critical: int | None = None,
    unprocessed_critical: int | None = None,
    redelivery_critical: int | None = None,
    last_delivery_critical: float | None = None,
    last_ack_critical: float | None = None,
    pinned: bool | None = None,
    timeout: float = 5.0,
) -> CheckResult:
    """A consumer, as ``nats server check consumer`` sees it: how far behind its readers are.

    Each threshold not given (``None``) is read from the consumer's metadata under the nats
    CLI's key (:data:`~natsjs_sync.monitor.CONSUMER_METADATA`, ``io.nats.monitor.waiting-critical: 20``); a
    threshold of 0 or less is not checked.

    Args:
        nc: a connected client of the stream's account.
        stream, consumer: which consumer.
        outstanding_ack_critical: this many messages delivered and not acked is CRITICAL.
        waiting_critical: this many pull requests waiting is CRITICAL.
        unprocessed_critical: this many messages not yet delivered is CRITICAL.
        redelivery_critical: this many messages redelivered and not acked is CRITICAL.
        last_delivery_critical, last_ack_critical: no delivery / no ack for this many
            seconds is CRITICAL (never delivered / acked counts as too long).
        pinned: the consumer must have the ``pinned_client`` priority policy and each of
            its priority groups a pinned client.
        timeout: seconds for the consumer's info.

    Returns:
        CRITICAL when the consumer cannot be loaded or has no leader; WARNING when a
        replica is offline or behind while it has one.
    """
    result = CheckResult("consumer", f"{stream}_{consumer}")
    try:
        info = nc.jetstream(timeout=timeout).consumer(stream, consumer).info()
    except (NatsError, OSError) as exc:
        result.critical(f"could not load info: {exc}")
        return result
    given = dict(outstanding_ack_critical=outstanding_ack_critical, waiting_critical=waiting_critical,
                 unprocessed_critical=unprocessed_critical, redelivery_critical=redelivery_critical,
                 last_delivery_critical=last_delivery_critical, last_ack_critical=last_ack_critical,
                 pinned=pinned)
    limits = _from_metadata(result, info.config.metadata, CONSUMER_METADATA, given)
    if limits is None:
        return result
    delivered_age, acked_age = _age(info.delivered.last_active), _age(info.ack_floor.last_active)
    result.perf("ack_pending", info.num_ack_pending, "", None, limits["outstanding_ack_critical"],
                description="The number of messages waiting to be Acknowledged")
    result.perf("pull_waiting", info.num_waiting, "", None, limits["waiting_critical"],
                description="The number of waiting Pull requests")
    result.perf("pending", info.num_pending, "", None, limits["unprocessed_critical"],
                description="The number of messages that have not yet been consumed")
    result.perf("redelivered", info.num_redelivered, "", None, limits["redelivery_critical"],
                description="The number of messages currently being redelivered")
    if delivered_age is not None:
        result.perf("last_delivery", round(delivered_age, 6), "s", None, limits["last_delivery_critical"],
                    description="Seconds since the last message was delivered")
    if acked_age is not None:
        result.perf("last_ack", round(acked_age, 6), "s", None, limits["last_ack_critical"],
                    description="Seconds since the last message was acknowledged")
    for what, value, crit in (("Ack Pending", info.num_ack_pending, limits["outstanding_ack_critical"]),
                              ("Waiting Pulls", info.num_waiting, limits["waiting_critical"]),
                              ("Unprocessed Messages", info.num_pending, limits["unprocessed_critical"]),
                              ("Redelivered", info.num_redelivered, limits["redelivery_critical"])):
        if crit is not None and crit > 0:
            result.add(Status.CRITICAL if value >= crit else Status.OK, f"{what}: {value}")
    for what, none, age, t, crit in (
        ("delivery", "No deliveries", delivered_age, info.delivered.last_active, limits["last_delivery_critical"]),
        ("ack", "No acks", acked_age, info.ack_floor.last_active, limits["last_ack_critical"]),
    ):
        if crit is None or crit <= 0:
            continue
        if age is None or t is None:
            result.critical(none)
        elif age >= crit:
            result.critical(f"Last {what} {_go_duration(age)} ago")
        else:
            result.ok(f"Last {what} {_go_time(t)}")
    _check_pinned(result, info, bool(limits["pinned"]))
    _check_group(result, "consumer", info.cluster, None, None)
    return result


def _check_pinned(result: CheckResult, info: Any, required: bool) -> None:
    """A consumer's priority groups: how many have a pinned client (``--pinned``: all of them)."""
    config = info.config
    groups = list(config.priority_groups or ())
    states = list(info.priority_groups or ())
    pinned = sum(1 for g in states if g.pinned_client_id)
    if config.priority_policy == "pinned_client":
        result.perf("pinned_groups", pinned, description="The number of consumers groups with pinned clients")
        result.perf("groups", len(groups), description="The total number of consumers groups")
    if not required:
        return
    if not states or not groups or config.priority_policy != "pinned_client":
        result.critical("Not pinned client priority mode")
    elif pinned != len(groups):
        result.critical(f"{pinned} / {len(groups)} pinned clients")
    else:
        result.ok(f"{pinned} pinned clients")
