"""Static consumer groups: members and partition count fixed when the group is made.

The stream itself carries the partition number as the first token of every
subject (a subject transform on the stream puts it there, e.g.
``orders.*`` -> ``{{Partition(4,1)}}.orders.{{Wildcard(1)}}``). Creating the
group writes its config under ``"<stream>.<group>"`` in the
``static-consumer-groups`` KV bucket; each member instance makes the member's
durable consumer ``"<group>-<member>"`` with the filters of its partitions.
Run several instances of one member for fail-over: one is pinned and
receives, the others take over when it stops pulling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ConsumerNotFoundError, InvalidKeyError, KeyNotFoundError, NatsError
from ..jetstream import ConsumerConfig, JetStream, KeyValue
from ._buckets import create_config, delete_config, encode, group_names, open_bucket, read_entry, require_names
from .config import PRIORITY_GROUP, STATIC_BUCKET, MemberMapping, StaticConsumerGroupConfig, validate_static_config
from .errors import (
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from .members import MemberState, member_names, member_states
from .partitions import (
    compose_key,
    compose_static_consumer_name,
    is_valid_name,
    member_partitions,
    require_member_names,
    static_get_partition_filters,
)
from .session import ConsumerGroupConsumeContext, MessageHandler

__all__ = [
    "StaticConsumeContext",
    "create_static",
    "delete_static",
    "get_static_config",
    "list_static_active_members",
    "list_static_groups",
    "list_static_members",
    "static_consume",
    "static_member_step_down",
]


def create_static(js: JetStream, stream: str, group: str, max_members: int, filters: Sequence[str] = (),
                  members: Sequence[str] = (), member_mappings: Sequence[MemberMapping] = ()
                  ) -> StaticConsumerGroupConfig:
    """Create a static group (again: nothing happens when the config is the same).

    Args:
        js: the JetStream context.
        stream: the stream, whose subjects start with the partition number.
        group: the group's name (no dots).
        max_members: the number of partitions.
        filters: the subject filters covered, without the partition token (none: all).
        members: members sharing the partitions evenly; or
        member_mappings: the partitions of each member (never both).

    Returns:
        The stored config.

    Raises:
        ConsumerGroupConfigError: the config breaks the rules, or a member's
            name is not a valid NATS name token (nothing is written).
        ConsumerGroupExistsError: the group exists with another config; or a
            member's consumer name ``"<group>-<member>"`` is one another static
            group of the stream uses (group ``a`` with member ``b-c`` and group
            ``a-b`` with member ``c`` would share ``a-b-c``; nothing is written,
            or, when the two are created at once, the later one's config is
            removed again: one of them stays).
        StreamNotFoundError: no such stream.
    """
    require_names(stream, group)
    require_member_names([*members, *(m.member for m in member_mappings)])
    cfg = StaticConsumerGroupConfig(
        max_members=max_members, filters=tuple(filters), members=tuple(members),
        member_mappings=tuple(MemberMapping(member=m.member, partitions=tuple(m.partitions)) for m in member_mappings))
    validate_static_config(cfg)
    try:
        _require_own_consumer_names(open_bucket(js, STATIC_BUCKET), stream, group, _consumer_names(group, cfg))
    except ConsumerGroupNotFoundError:
        pass  # no static group yet: no name is taken
    # Created compare-and-set: a creator with another config fails, never overwrites.
    _, entry, revision = create_config(js, STATIC_BUCKET, stream, group, encode(cfg.to_json()))
    if entry is None:
        # The creators of two groups sharing a consumer name may both have passed
        # the check above (each read before the other wrote): the later creation
        # gives way, so one of them stays and the other is told.
        kv = open_bucket(js, STATIC_BUCKET)
        try:
            _require_own_consumer_names(kv, stream, group, _consumer_names(group, cfg), before=revision)
        except ConsumerGroupExistsError:
            try:
                kv.delete(compose_key(stream, group), last=revision)
            except NatsError:
                pass  # changed meanwhile: left as it is (its members refuse to start)
            raise
        return cfg
    existing = StaticConsumerGroupConfig.from_json(entry.value)
    if not existing.same_group(cfg):
        raise ConsumerGroupExistsError(f"static consumer group {group!r} on stream {stream!r} exists "
                                       "with another config")
    return existing


def get_static_config(js: JetStream, stream: str, group: str) -> StaticConsumerGroupConfig:
    """The stored config of a static group.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    kv = open_bucket(js, STATIC_BUCKET)
    return StaticConsumerGroupConfig.from_json(read_entry(kv, stream, group, "static").value)


def delete_static(js: JetStream, stream: str, group: str) -> None:
    """Delete a static group: its config (running members stop), then its members' consumers.

    Exactly the group's own consumers go, ``"<group>-<member>"`` for each member
    its config names; never another group's whose name merely starts the same
    (group ``orders-eu`` when deleting ``orders``), nor one another group's
    config also names, nor one without the group's ``PCG`` priority group (no
    member made it: it is left alone, as a member leaves it). When the config is already gone (an earlier attempt got
    that far), the consumers found are those named ``"<group>-..."`` with the
    group's priority group that no other static group of the stream names.

    Raises:
        ConsumerGroupNotFoundError: no static group was ever made here.
        ConsumerGroupError: some consumers could not be deleted (the others were).
    """
    require_names(stream, group)
    kv = open_bucket(js, STATIC_BUCKET)
    key = compose_key(stream, group)
    try:
        cfg: StaticConsumerGroupConfig | None = StaticConsumerGroupConfig.from_json(kv.get(key).value)
    except (KeyNotFoundError, ConsumerGroupError):
        cfg = None  # gone already, or unreadable: its consumers are found by their marks
    delete_config(js, STATIC_BUCKET, stream, group)
    failed = []
    for name in _own_consumers(js, kv, stream, group, cfg):
        try:
            # The config names the members; only the server knows whose a consumer of
            # that name is: one without the group's priority group (a user's durable
            # that happens to be called "<group>-<member>") is no member's and stays.
            if PRIORITY_GROUP not in (js.consumer(stream, name).cached_info.config.priority_groups or ()):
                continue
            js.delete_consumer(stream, name)
        except ConsumerNotFoundError:
            continue
        except NatsError as exc:
            failed.append(f"{name}: {exc}")
    if failed:
        raise ConsumerGroupError(f"could not delete consumers of static group {group!r}: {'; '.join(failed)}")


def _consumer_names(group: str, cfg: StaticConsumerGroupConfig) -> set[str]:
    return {compose_static_consumer_name(group, m) for m in member_names(cfg.members, cfg.member_mappings)}


def _shared_names(kv: KeyValue, stream: str, group: str, names: set[str],
                  before: int | None = None) -> dict[str, str]:
    """The names in ``names`` another static group of ``stream`` also derives, each with that group
    (with ``before``: only groups whose config was stored at an earlier revision).

    ``"<group>-<member>"`` can only be derived by a group whose name is the part
    before one of its ``-`` (group and member are never empty): those few keys
    are read, one get each, and the bucket's groups are never listed, so a
    member's start costs the same with thousands of groups on the stream. A
    name with a single ``-`` has no other candidate and costs nothing.
    """
    derived: dict[str, set[str]] = {}  # a candidate group's consumer names (empty: no such group)
    shared = {}
    for name in sorted(names):
        for cut in (i for i in range(1, len(name) - 1) if name[i] == "-"):
            other = name[:cut]
            if other == group:
                continue
            if other not in derived:
                try:
                    entry = kv.get(compose_key(stream, other))
                    earlier = before is None or entry.revision < before
                    derived[other] = _consumer_names(other, StaticConsumerGroupConfig.from_json(entry.value)) \
                        if earlier else set()
                except (KeyNotFoundError, InvalidKeyError, ConsumerGroupError):
                    # no such group (or gone meanwhile), a name no key can hold, or an
                    # unreadable config (its members cannot run either)
                    derived[other] = set()
            if name in derived[other]:
                shared[name] = other
                break
    return shared


def _require_own_consumer_names(kv: KeyValue, stream: str, group: str, names: set[str],
                                before: int | None = None) -> None:
    """Refuse consumer names another static group of ``stream`` also derives
    (with ``before``: one stored at an earlier revision).

    orbit.go's ``"<group>-<member>"`` is not unique across groups when names
    hold ``-``; two groups sharing a consumer would delete and re-create each
    other's, so a name is one group's or refused.

    Raises:
        ConsumerGroupExistsError: a name in ``names`` is another group's too.
    """
    shared = _shared_names(kv, stream, group, names, before)
    if shared:
        name, other = next(iter(shared.items()))
        raise ConsumerGroupExistsError(
            f"consumer name {name} of static consumer group {group!r} on stream {stream!r} is also "
            f"one of static consumer group {other!r} ('<group>-<member>'); choose another group or member name")


def _own_consumers(js: JetStream, kv: KeyValue, stream: str, group: str,
                   cfg: StaticConsumerGroupConfig | None) -> list[str]:
    """The consumers of ``group`` on ``stream`` that no other static group of the stream names."""
    if cfg is not None:
        # A member name another client let through that no consumer can have (white
        # space, "."): nothing of that name exists to delete.
        mine = {name for name in _consumer_names(group, cfg) if is_valid_name(name)}
    else:
        mine = {info.name for info in js.list_consumers(stream) if info.name.startswith(f"{group}-")
                and PRIORITY_GROUP in (info.config.priority_groups or ())}
    return sorted(mine - _shared_names(kv, stream, group, mine).keys())


def list_static_groups(js: JetStream, stream: str) -> list[str]:
    """The names of the static groups on ``stream``.

    Raises:
        ConsumerGroupNotFoundError: no static group was ever made.
    """
    kv = open_bucket(js, STATIC_BUCKET)
    return group_names(kv, stream)


def list_static_members(js: JetStream, stream: str, group: str) -> list[MemberState]:
    """Every member of a static group with its partitions and what the server shows of it.

    A member is active while an instance of it pulls (see :class:`MemberState`).
    A static member that died keeps its partitions: start another instance of
    it (same name) and it takes over where the dead one stopped.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    cfg = get_static_config(js, stream, group)
    return member_states(js, stream, [
        (m, compose_static_consumer_name(group, m),
         member_partitions(cfg.members, cfg.max_members, cfg.member_mappings, m))
        for m in member_names(cfg.members, cfg.member_mappings)])


def list_static_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """Members with an instance pulling now (see :func:`list_static_members`).

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    return [s.member for s in list_static_members(js, stream, group) if s.active]


def static_member_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Make the pinned instance of ``member`` give up the pin; the next to pull gets it.

    Raises:
        ConsumerNotFoundError: the member has no consumer.
    """
    js.unpin_consumer(stream, compose_static_consumer_name(group, member), PRIORITY_GROUP)


class StaticConsumeContext(ConsumerGroupConsumeContext):
    """A static member instance at work (see :class:`ConsumerGroupConsumeContext`).

    It stops with :attr:`error` a :class:`GroupConfigChangedError` when the
    group's config changes (a static group cannot change while it runs), and
    without error when the group is deleted. Thread-safe.
    """

    _idle_period = 30.0  # nothing to correct: only the watch matters

    def __init__(self, *args: object, config: StaticConsumerGroupConfig, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.config = config

    @property
    def consumer_name(self) -> str:
        """The member's durable consumer: ``"<group>-<member>"``."""
        return compose_static_consumer_name(self.group, self.member)

    def _initial_join(self) -> None:
        filters = static_get_partition_filters(self.config, self.member)
        if not filters:
            return  # named, but with no partition (more members than partitions)
        consumer = self._create_consumer(self.stream, self._member_config(self.consumer_name, filters, durable=True))
        self._start_consuming(consumer)

    def _on_config(self, value: bytes, revision: int) -> None:
        try:
            cfg = StaticConsumerGroupConfig.from_json(value)
        except ConsumerGroupError as exc:
            self._stop_and_delete()
            self._finish(exc)
            return
        if cfg.same_group(self.config):
            return
        self._stop_and_delete()
        self._finish(GroupConfigChangedError(
            f"the config of static consumer group {self.group!r} on stream {self.stream!r} changed; "
            "a static group cannot change while it runs: this member stopped"))

    def _on_group_deleted(self) -> None:
        self._stop_and_delete()
        self._finish(None)

    def _stop_and_delete(self) -> None:
        self._let_go()  # a running handler's ack reaches the consumer before it goes
        try:
            self._js.delete_consumer(self.stream, self.consumer_name)
        except NatsError:
            pass  # already gone, or delete_static sweeps it


def static_consume(js: JetStream, stream: str, group: str, member: str, handler: MessageHandler,
                   config: ConsumerConfig | None = None, *,
                   error_cb: Callable[[Exception], None] | None = None,
                   keep_partition: bool = False) -> StaticConsumeContext:
    """Join a static group as ``member`` and start consuming.

    ``handler(msg)`` runs for each message of the member's partitions, one at
    a time and in order, on the client's dispatcher; ``msg.subject`` has the
    partition token stripped. It acknowledges as ``config.ack_policy`` says
    (explicit by default).

    Args:
        js: the JetStream context.
        stream: the stream.
        group: the group.
        member: this instance's member name (several instances may share one).
        handler: called with each message.
        config: a template for the member's consumer: the group sets its name,
            filters and priority group; ``ack_wait`` (default 5 s) also sets the
            pinned TTL (at least 1 s) and the pull expiry (half of it).
        error_cb: hears of problems while it runs (default: logged).
        keep_partition: give the handler the subject as stored, partition
            token first (for a caller that tracks partitions itself).

    Returns:
        The running instance; :meth:`~StaticConsumeContext.stop` ends it.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        MemberNotInGroupError: ``member`` is not named by the group.
        ConsumerGroupConfigError: ``member`` is not a valid name.
        ConsumerGroupExistsError: another static group of the stream derives
            the same consumer name (see :func:`create_static`).
        FeatureNotSupportedError: the server is older than 2.11 (no pinned clients).
    """
    if not callable(handler):
        raise TypeError("a message handler must be given")
    require_names(stream, group)
    require_member_names([member])
    js.stream(stream)  # StreamNotFoundError before anything else
    kv = open_bucket(js, STATIC_BUCKET)
    entry = read_entry(kv, stream, group, "static")
    cfg = StaticConsumerGroupConfig.from_json(entry.value)
    if not cfg.is_in_membership(member):
        raise MemberNotInGroupError(f"{member!r} is not a member of static consumer group {group!r}")
    # A group another client made may share our consumer's name: never take over its consumer.
    _require_own_consumer_names(kv, stream, group, {compose_static_consumer_name(group, member)})
    ctx = StaticConsumeContext(js, kv, stream, stream, group, member, handler, config or ConsumerConfig(),
                               error_cb, keep_partition, config=cfg)
    ctx._start(entry.revision)
    return ctx
