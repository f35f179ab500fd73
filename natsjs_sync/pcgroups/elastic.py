"""Elastic consumer groups: membership in a KV bucket, changed while members run.

Creating the group writes its config under ``"<stream>.<group>"`` in the
``elastic-consumer-groups`` KV bucket and makes a work-queue stream
``"<stream>-<group>"`` sourcing the stream, whose subject transforms put the
partition number in front of every subject. Each member's consumer on it is
named after the member, has the filters of the member's partitions and is
removed by the server once idle. When the membership changes every running
member computes its new partitions from the config; the pinned instance of
each member deletes and re-creates its consumer. The work queue refuses
overlapping filters, so two members never hold one partition at once.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence

import msgspec

from ..errors import (
    APIError,
    ConsumerNotFoundError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NatsError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from ..jetstream import ConsumerConfig, JetStream, StreamConfig, StreamSource, SubjectTransform
from ._buckets import create_config, delete_config, encode, group_names, open_bucket, read_entry, require_names
from .config import (
    CONSUMER_IDLE_TIMEOUT_FACTOR,
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    normalised_filters,
    validate_elastic_config,
)
from .errors import ConsumerGroupConfigError, ConsumerGroupError, ConsumerGroupExistsError, GroupConfigChangedError
from .members import MemberState, member_names, member_states
from .partitions import (
    compose_group_stream_name,
    compose_key,
    elastic_get_partition_filters,
    member_partitions,
    partitioning_transform_destination,
    require_member_names,
)
from .session import ConsumerGroupConsumeContext, MessageHandler, PinnedElsewhere

__all__ = [
    "ElasticConsumeContext",
    "add_members",
    "create_elastic",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "elastic_consume",
    "elastic_is_in_membership_and_active",
    "elastic_member_step_down",
    "get_elastic_config",
    "list_elastic_active_members",
    "list_elastic_groups",
    "list_elastic_members",
    "set_member_mappings",
]

# JSConsumerWQConsumerNotUniqueErr: another member still holds a partition
# that moves to us; expected while members converge, retried when idle.
_WQ_CONSUMER_NOT_UNIQUE = 10100
# Joins in a row a member tries while the config changes under each (then: when idle).
_JOIN_ATTEMPTS = 3
# Concurrent membership writers (every process of a pre-forked pool adding
# itself at start) lose a compare-and-set now and then: read and try again.
_UPDATE_ATTEMPTS = 20


def create_elastic(js: JetStream, stream: str, group: str, max_members: int,
                   partitioning_filters: Sequence[PartitioningFilter] = (), max_buffered_msgs: int = 0,
                   max_buffered_bytes: int = 0) -> ElasticConsumerGroupConfig:
    """Create an elastic group and its work-queue stream (again: nothing happens when the same).

    Args:
        js: the JetStream context.
        stream: the stream whose messages the group shares out.
        group: the group's name (no dots).
        max_members: the number of partitions.
        partitioning_filters: the subjects copied and what keys their partitions
            (none: every subject, keyed by the whole subject).
        max_buffered_msgs: the most messages waiting in the group's stream (0 or
            negative: no limit).
        max_buffered_bytes: the most bytes waiting there (0 or negative: no limit).

    Returns:
        The stored config. A group made before, by any client, with the same
        meaning is accepted as it is (natsio-pcgroups' ``-1`` sizes equal 0
        here, a ``null`` filter list an empty one); creators that race each
        other never lose a member one of them added meanwhile.

    Raises:
        ConsumerGroupConfigError: the config breaks the rules.
        ConsumerGroupExistsError: the group exists with other fixed settings; or
            a stream ``"<stream>-<group>"`` exists that is not this group's work
            queue (then nothing is written), or is one made with other settings.
        StreamNotFoundError: no such stream.
        JetStreamError: the group's stream could not be made (the config this
            call stored is removed again).
    """
    require_names(stream, group)
    cfg = ElasticConsumerGroupConfig(max_members=max_members,
                                     partitioning_filters=normalised_filters(partitioning_filters or ()),
                                     max_buffered_msgs=max(max_buffered_msgs, 0),
                                     max_buffered_bytes=max(max_buffered_bytes, 0))
    validate_elastic_config(cfg)
    name = compose_group_stream_name(stream, group)
    try:
        found = js.stream(name).cached_info.config
    except StreamNotFoundError:
        found = None
    # Refused before anything is written: a stream of that name that is not a
    # group's work queue on ``stream`` is somebody else's.
    if found is not None and not _is_group_stream(found, stream):
        raise ConsumerGroupExistsError(
            f"stream {name!r} exists and is not the work queue of an elastic consumer group on stream {stream!r}; "
            "nothing was written")
    # Created compare-and-set: hosts that all create the group as they start
    # never overwrite each other, nor a membership written meanwhile.
    source, entry, revision = create_config(js, ELASTIC_BUCKET, stream, group, encode(cfg.to_json()))
    if entry is None:
        stored = msgspec.structs.replace(cfg, revision=revision)
    else:
        stored = ElasticConsumerGroupConfig.from_json(entry.value, entry.revision)
        if stored.fixed_part() != cfg.fixed_part():
            raise ConsumerGroupExistsError(
                f"elastic consumer group {group!r} on stream {stream!r} exists with other settings; "
                "delete it and create it again to change them")
    transforms = [SubjectTransform(src=f.filter, dest=partitioning_transform_destination(
        f.filter, f.partitioning_wildcards, max_members)) for f in stored.partitioning_filters] or [
        SubjectTransform(src=">", dest=partitioning_transform_destination(">", (), max_members))]
    # Created, never updated (orbit.go's rule): the server accepts the same
    # config again and refuses another one, so an existing stream is reused
    # only when it is exactly the one this group makes.
    try:
        js.create_stream(
            name=name, retention="workqueue", num_replicas=source.num_replicas, storage=source.storage,
            max_msgs=stored.max_buffered_msgs or -1, max_bytes=stored.max_buffered_bytes or -1, discard="new",
            sources=[StreamSource(name=stream, subject_transforms=transforms)], allow_direct=True)
    except StreamNameInUseError as exc:
        if entry is None:
            _withdraw_config(js, stream, group, revision)
        raise ConsumerGroupExistsError(
            f"stream {name!r} exists with another configuration than elastic consumer group {group!r} on stream "
            f"{stream!r} makes; delete the group (or that stream) and create it again") from exc
    except NatsError:
        # Refused (no room for its limits, the account's stream limit, ...) or no
        # answer: a config without its stream is a group members join and cannot
        # consume from, and one with other settings could not be made again.
        if entry is None:
            _withdraw_config(js, stream, group, revision)
        raise
    return stored


def _is_group_stream(cfg: StreamConfig, stream: str) -> bool:
    """Whether a stream with config ``cfg`` is an elastic group's work queue on ``stream``."""
    return (getattr(cfg.retention, "value", cfg.retention) == "workqueue"
            and [src.name for src in cfg.sources or ()] == [stream])


def _withdraw_config(js: JetStream, stream: str, group: str, revision: int) -> None:
    """Delete the config this call created (only if nobody changed it since): its group could not be made."""
    try:
        open_bucket(js, ELASTIC_BUCKET).delete(compose_key(stream, group), last=revision)
    except NatsError:
        pass  # changed meanwhile (somebody uses it now) or unreachable: left as it is


def get_elastic_config(js: JetStream, stream: str, group: str) -> ElasticConsumerGroupConfig:
    """The stored config of an elastic group (with the revision it was read at).

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    kv = open_bucket(js, ELASTIC_BUCKET)
    entry = read_entry(kv, stream, group, "elastic")
    return ElasticConsumerGroupConfig.from_json(entry.value, entry.revision)


def delete_elastic(js: JetStream, stream: str, group: str) -> None:
    """Delete an elastic group: its config (running members stop), then its stream.

    The stream ``"<stream>-<group>"`` goes only when it is this group's, a work
    queue sourcing ``stream``; the members' consumers go with it.

    Raises:
        ConsumerGroupNotFoundError: no elastic group was ever made (no bucket).
        ConsumerGroupError: a stream of that name exists but is not the group's
            (nothing is deleted).
        StreamNotFoundError: the group's stream is already gone (its config was deleted).
    """
    require_names(stream, group)
    name = compose_group_stream_name(stream, group)
    try:
        cfg = js.stream(name).cached_info.config
    except StreamNotFoundError:
        cfg = None
    if cfg is not None and not _is_group_stream(cfg, stream):
        raise ConsumerGroupError(f"stream {name!r} is not the work queue of elastic consumer group {group!r} "
                                 f"on stream {stream!r}; nothing was deleted")
    delete_config(js, ELASTIC_BUCKET, stream, group)
    js.delete_stream(name)


def list_elastic_groups(js: JetStream, stream: str) -> list[str]:
    """The names of the elastic groups on ``stream``."""
    return group_names(open_bucket(js, ELASTIC_BUCKET), stream)


def _modify(js: JetStream, stream: str, group: str,
            change: Callable[[ElasticConsumerGroupConfig], ElasticConsumerGroupConfig]
            ) -> ElasticConsumerGroupConfig:
    """Read, change and write back the config, compare-and-set, again on a lost race.

    What the change leaves alone is written back as it was stored (another
    client's spelling and fields included).
    """
    require_names(stream, group)
    kv = open_bucket(js, ELASTIC_BUCKET)
    key = compose_key(stream, group)
    for attempt in range(_UPDATE_ATTEMPTS):
        entry = read_entry(kv, stream, group, "elastic")
        new = change(ElasticConsumerGroupConfig.from_json(entry.value, entry.revision))
        validate_elastic_config(new)
        try:
            rev = kv.update(key, encode(new.to_json(as_stored=json.loads(entry.value))), last=entry.revision)
        except KeyWrongLastSequenceError:
            # Spread the writers out (a pool's processes all join at once).
            time.sleep(random.uniform(0, min(0.01 * 2 ** attempt, 0.5)))
            continue
        return msgspec.structs.replace(new, revision=rev)
    raise ConsumerGroupError(f"the config of elastic group {group!r} kept changing under {_UPDATE_ATTEMPTS} writes")


def _change_members(js: JetStream, stream: str, group: str, members: Sequence[str], action: str,
                    edit: Callable[[tuple[str, ...]], tuple[str, ...]]) -> list[str]:
    """Apply ``edit`` to the members list of a group that has no member mappings.

    Args:
        action: what the change does, for the error message (``"add members to"``).
        edit: the current members -> the new members.

    Returns:
        The membership after the change.

    Raises:
        ConsumerGroupError: no names given, or the group uses member mappings.
        ConsumerGroupNotFoundError: no such group.
    """
    if not members:
        raise ConsumerGroupError("no member names given")

    def change(cfg: ElasticConsumerGroupConfig) -> ElasticConsumerGroupConfig:
        # Mappings pin partitions to names: editing the list would silently do nothing.
        if cfg.member_mappings:
            raise ConsumerGroupError(f"can't {action} an elastic consumer group that uses member mappings")
        return msgspec.structs.replace(cfg, members=edit(cfg.members))

    return list(_modify(js, stream, group, change).members)


def add_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> list[str]:
    """Add members to an elastic group; running members rebalance.

    Returns:
        The membership after the change.

    Raises:
        ConsumerGroupConfigError: (a ``ValueError``) a name is not a valid NATS
            name token (empty, ``.``, ``*``, ``>``, white space); nothing is written.
        ConsumerGroupError: no names given, or the group uses member mappings.
        ConsumerGroupNotFoundError: no such group.
    """
    require_member_names(members)
    # dict.fromkeys: one entry a name, the first-come order kept.
    return _change_members(js, stream, group, members, "add members to",
                           lambda current: tuple(dict.fromkeys([*current, *members])))


def delete_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> list[str]:
    """Remove members from an elastic group; the others take over their partitions.

    Returns:
        The membership after the change.

    Raises:
        ConsumerGroupError: no names given, or the group uses member mappings.
        ConsumerGroupNotFoundError: no such group.
    """
    drop = set(members)
    return _change_members(js, stream, group, members, "drop members from",
                           lambda current: tuple(m for m in current if m not in drop))


def set_member_mappings(js: JetStream, stream: str, group: str, member_mappings: Sequence[MemberMapping]) -> None:
    """Assign partitions explicitly (the members list is cleared).

    Raises:
        ConsumerGroupConfigError: the mappings do not assign every partition
            once, or name an invalid member (nothing is written).
        ConsumerGroupNotFoundError: no such group.
    """
    if not member_mappings:
        raise ConsumerGroupError("no member mappings given")
    require_member_names(m.member for m in member_mappings)
    _modify(js, stream, group,
            lambda cfg: msgspec.structs.replace(cfg, members=(), member_mappings=tuple(member_mappings)))


def delete_member_mappings(js: JetStream, stream: str, group: str) -> None:
    """Drop the explicit assignment (no member has partitions until members are added).

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    _modify(js, stream, group, lambda cfg: msgspec.structs.replace(cfg, member_mappings=()))


def list_elastic_members(js: JetStream, stream: str, group: str) -> list[MemberState]:
    """Every member of an elastic group with its partitions and what the server shows of it.

    Membership is explicit: a member whose instances all died stays in the
    group and keeps its partitions (nobody consumes them) until it is removed
    with :func:`delete_members` or an instance of it starts again. This shows
    which: a dead member is not :attr:`~natsjs_sync.pcgroups.MemberState.active` once its last pull
    request went with its connection and its pin timed out (``ack_wait``), and
    its consumer is gone ``ack_wait`` after its last pull.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    cfg = get_elastic_config(js, stream, group)
    return member_states(js, compose_group_stream_name(stream, group), [
        (m, m, member_partitions(cfg.members, cfg.max_members, cfg.member_mappings, m))
        for m in member_names(cfg.members, cfg.member_mappings)])


def list_elastic_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """Members of the group with an instance consuming now (see :func:`list_elastic_members`).

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    return [s.member for s in list_elastic_members(js, stream, group) if s.active]


def elastic_is_in_membership_and_active(js: JetStream, stream: str, group: str, member: str) -> tuple[bool, bool]:
    """Whether ``member`` is in the membership, and whether an instance of it consumes now.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    state = next((s for s in list_elastic_members(js, stream, group) if s.member == member), None)
    return state is not None, state is not None and state.active


def elastic_member_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Make the pinned instance of ``member`` give up the pin; the next to pull gets it.

    Raises:
        ConsumerNotFoundError: the member has no consumer now.
    """
    js.unpin_consumer(compose_group_stream_name(stream, group), member, PRIORITY_GROUP)


class ElasticConsumeContext(ConsumerGroupConsumeContext):
    """An elastic member instance at work (see :class:`ConsumerGroupConsumeContext`).

    It follows membership changes: partitions come and go, the consumer is
    made again with the new filters. It may start before the member is added
    (it waits). It stops with :attr:`error` a :class:`GroupConfigChangedError`
    when the group's fixed settings change, without error when the group is
    deleted. Thread-safe.
    """

    def __init__(self, *args: object, config: ElasticConsumerGroupConfig, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.config = config
        # Retry a join a little after the consumer's inactive threshold, by
        # when a consumer nobody pulls from any more has been removed.
        self._idle_period = self.ack_wait * CONSUMER_IDLE_TIMEOUT_FACTOR + 0.5

    def _initial_join(self) -> None:
        if self.config.is_in_membership(self.member):
            self._join(fresh=True)

    def _on_config(self, value: bytes, revision: int) -> None:
        if revision <= self.config.revision:
            return  # read from the bucket already, by a join
        seen = self.config
        if not self._take(value, revision):
            return
        if self.config.same_membership(seen) and self.consuming:
            return
        self._membership_changed()

    def _take(self, value: bytes, revision: int) -> bool:
        """Make a newer entry of the group's key the config; whether the member goes on.

        Returns:
            ``False`` when it stopped: the entry is not a valid config, or the
            group's fixed settings changed.
        """
        try:
            cfg = ElasticConsumerGroupConfig.from_json(value, revision)
        except ConsumerGroupError as exc:
            self._stop_consuming()
            self._finish(exc)
            return False
        if cfg.fixed_part() != self.config.fixed_part():
            self._stop_consuming()
            self._finish(GroupConfigChangedError(
                f"the fixed settings of elastic consumer group {self.group!r} changed (partitions, filters or "
                "buffer limits); this member stopped"))
            return False
        self.config = cfg
        return True

    def _catch_up(self) -> bool:
        """Read the group's key now and take a newer entry than the config (the watch may lag).

        Any replica of the bucket answers (a direct get): one a moment behind a
        write may still give the entry before it, as if the read came first;
        the watch brings the newer one then.

        Returns:
            Whether :attr:`config` is now as new as the bucket's: ``False`` when
            the key could not be read (reported), or the member stopped.
        """
        try:
            entry = self._kv.get(self._key)
        except KeyNotFoundError:  # deleted (KeyDeletedError) or purged
            self._on_group_deleted()
            return False
        except NatsError as exc:
            self._report(exc)
            return False
        # An older one: a replica behind the one the watch or an earlier read saw.
        return entry.revision <= self.config.revision or self._take(entry.value, entry.revision)

    def _on_idle(self) -> None:
        if self._consuming is not None and not self.consuming:
            self._stop_consuming(timeout=0)  # its consumer went away (made again by another instance)
        if self._consuming is None and self.config.is_in_membership(self.member):
            self._join()

    def _on_group_deleted(self) -> None:
        self._stop_consuming()
        self._finish(None)

    def _membership_changed(self) -> None:
        # New partitions may need an earlier position than the consumer has:
        # the consumer is made anew. Only the pinned instance deletes it, once
        # its running handler is done (its ack then counts); the others let it
        # go first, so members do not fight over the name.
        pinned = self._is_pinned()
        self._let_go()
        if self._stopping.is_set():
            return
        if pinned:
            try:
                self._js.delete_consumer(self.stream, self.member)
            except ConsumerNotFoundError:
                pass
        elif self._stopping.wait(random.uniform(0.4, 0.5)):
            return
        self._join()

    def _join(self, *, fresh: bool = False) -> None:
        """Make the member's consumer for the config in the bucket now and consume from it.

        The watch is not enough to go by: after its server died it may lag for
        a while, and a member that joined on the config it last saw would take
        partitions back after its removal. So the key is read before the
        consumer is made, and again once it is made: one removed or moved
        while its create was under way deletes what it made instead of
        consuming from it. A change written after that second read reaches it
        through the watch, as any change does.

        Args:
            fresh: :attr:`config` was just read from the bucket.
        """
        for _ in range(_JOIN_ATTEMPTS):
            if not fresh and not self._catch_up():
                return
            filters = elastic_get_partition_filters(self.config, self.member)
            # Never two handler calls at once: a handler of the previous consumer
            # may still run (longer than ack_wait); consuming starts after it.
            if not filters or not self._wait_handler_done(None):
                return
            cfg = msgspec.structs.replace(self._member_config(self.member, filters, durable=False),
                                          inactive_threshold=self.ack_wait * CONSUMER_IDLE_TIMEOUT_FACTOR)
            try:
                consumer = self._create_consumer(self.stream, cfg, spare_pinned=True)
            except PinnedElsewhere:
                return  # its pinned instance lets it go first; tried again when idle
            except APIError as exc:
                if exc.err_code != _WQ_CONSUMER_NOT_UNIQUE:
                    self._report(exc)
                return  # tried again when idle
            except NatsError as exc:
                self._report(exc)
                return
            current = self._catch_up()
            if current and elastic_get_partition_filters(self.config, self.member) == filters:
                self._start_consuming(consumer)
                return
            if not current and not self._stopping.is_set():
                # The key could not be read. Not consumed, not deleted either: with the same
                # name and filters it may be the live consumer of another instance of this
                # member (the create then changed nothing); one nobody uses goes once idle.
                return
            self._withdraw(filters)
            if not current:
                return  # it stopped (the group deleted, or its fixed settings changed)
            fresh = True  # read just now
        # The config kept changing under it: tried again when idle.

    def _withdraw(self, filters: list[str]) -> None:
        """Delete the member's consumer if it still has ``filters`` and no instance holds its pin:
        this instance made it from a config the group has left behind (or one it could not check).

        A pinned one is another instance's (this one has not pulled from it): its create found
        that consumer as it was. That instance deletes it itself on seeing the change, once its
        running handler is done, as every rebalance goes; deleting it here would hand the message
        that handler has to the next consumer while the handler still runs.
        """
        try:
            info = self._js.consumer(self.stream, self.member).cached_info
            if list(info.config.filter_subjects or ()) == filters and not any(
                    g.group == PRIORITY_GROUP and g.pinned_client_id for g in info.priority_groups or ()):
                self._js.delete_consumer(self.stream, self.member)
        except NatsError:
            pass  # gone already, or unreachable: it goes once idle past its inactive threshold


def elastic_consume(js: JetStream, stream: str, group: str, member: str, handler: MessageHandler,
                    config: ConsumerConfig | None = None, *,
                    error_cb: Callable[[Exception], None] | None = None,
                    keep_partition: bool = False) -> ElasticConsumeContext:
    """Run as ``member`` of an elastic group (consuming once and while it is in the membership).

    ``handler(msg)`` runs for each message of the member's partitions, one at
    a time and in order, on the client's dispatcher; ``msg.subject`` has the
    partition token stripped. It must acknowledge each message.

    Args:
        js: the JetStream context.
        stream: the stream the group was made on.
        group: the group.
        member: this instance's member name (several instances may share one).
        handler: called with each message.
        config: a template for the member's consumer (explicit acks): the group
            sets its name, filters, priority group and inactive threshold;
            ``ack_wait`` (default 5 s) also sets the pinned TTL, the pull expiry
            and how soon a stale consumer is gone.
        error_cb: hears of problems while it runs (default: logged).
        keep_partition: give the handler the subject as stored, partition
            token first (for a caller that tracks partitions itself).

    Returns:
        The running instance; :meth:`~ElasticConsumeContext.stop` ends it.

    Raises:
        ConsumerGroupNotFoundError: no such group.
        ConsumerGroupConfigError: the template's ack policy is not explicit, or
            ``member`` is not a valid name.
        FeatureNotSupportedError: the server is older than 2.11 (no pinned clients).
    """
    if not callable(handler):
        raise TypeError("a message handler must be given")
    require_names(stream, group)
    require_member_names([member])
    template = config or ConsumerConfig()
    if getattr(template.ack_policy, "value", template.ack_policy) != "explicit":
        raise ConsumerGroupConfigError("the ack policy when consuming from elastic consumer groups must be explicit "
                                       "(its stream is a work queue)")
    cg_stream = compose_group_stream_name(stream, group)
    js.stream(cg_stream)  # StreamNotFoundError before anything else
    kv = open_bucket(js, ELASTIC_BUCKET)
    entry = read_entry(kv, stream, group, "elastic")
    cfg = ElasticConsumerGroupConfig.from_json(entry.value, entry.revision)
    ctx = ElasticConsumeContext(js, kv, cg_stream, stream, group, member, handler, template, error_cb,
                                keep_partition, config=cfg)
    ctx._start(entry.revision)
    return ctx
