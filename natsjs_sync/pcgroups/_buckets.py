"""The KV buckets group configs live in: opened, or made on first use."""

from __future__ import annotations

import json
import re

from ..errors import BucketExistsError, BucketNotFoundError, KeyExistsError, KeyNotFoundError, NoKeysError
from ..jetstream import Entry, JetStream, KeyValue, StreamConfig
from .errors import ConsumerGroupConfigError, ConsumerGroupError, ConsumerGroupNotFoundError
from .partitions import compose_key, is_valid_name

# A group's config is the KV key "<stream>.<group>": each name is one key token
# (what every client's KV allows: letters, digits, "-", "_", "=" and "/") and a
# stream or consumer name (no "/"). Checked before anything is written, the
# bucket included.
_GROUP_KEY_TOKEN = re.compile(r"[-_=a-zA-Z0-9]+")


def require_names(stream: str, group: str) -> None:
    """Refuse names that would make a malformed key, stream or consumer name.

    Raises:
        ConsumerGroupConfigError: (a ``ValueError``) ``stream`` or ``group`` is
            not a NATS name token (``.``, ``*``, ``>``, ``/``, ``\\``, white
            space), or holds a character no KV key can (the config's key is
            ``"<stream>.<group>"``: letters, digits, ``-``, ``_`` and ``=``).
    """
    for what, name in (("stream", stream), ("consumer group", group)):
        if not is_valid_name(name) or not _GROUP_KEY_TOKEN.fullmatch(name):
            raise ConsumerGroupConfigError(
                f"invalid {what} name {name!r}: a consumer group needs ASCII letters, digits, '-', '_' and '=' "
                "only (each name is a token of the group's KV key; no client can store another)")


def open_bucket(js: JetStream, bucket: str) -> KeyValue:
    """The bucket; its absence means no group of that kind exists.

    Raises:
        ConsumerGroupNotFoundError: no such bucket.
    """
    try:
        return js.key_value(bucket)
    except BucketNotFoundError as exc:
        raise ConsumerGroupNotFoundError(f"the KV bucket {bucket!r} does not exist (no such group)") from exc


def open_or_create_bucket(js: JetStream, bucket: str, replicas: int) -> KeyValue:
    """The bucket, made (file storage, ``replicas`` copies) when missing."""
    try:
        return js.key_value(bucket)
    except BucketNotFoundError:
        pass
    try:
        return js.create_key_value(bucket=bucket, replicas=replicas, storage="file")
    except BucketExistsError:
        return js.key_value(bucket)  # made meanwhile by another member: the same bucket


def read_entry(kv: KeyValue, stream: str, group: str, kind: str) -> Entry:
    """The group's current entry.

    Raises:
        ConsumerGroupNotFoundError: no such group.
    """
    require_names(stream, group)
    try:
        return kv.get(compose_key(stream, group))
    except KeyNotFoundError as exc:
        raise ConsumerGroupNotFoundError(f"no {kind} consumer group {group!r} on stream {stream!r}") from exc


# A key created and deleted again between our create and our read, this many
# times over, is a fight between administrators: reported, not retried for ever.
_CREATE_ATTEMPTS = 10


def create_config(js: JetStream, bucket: str, stream: str, group: str, payload: bytes
                  ) -> tuple[StreamConfig, Entry | None, int]:
    """Store a new group's config, or read what a creator before us stored.

    The bucket is made when missing (replicated like ``stream``). Creation is a
    compare-and-set on the key having no value, so creators that run at once
    (every host starting with "create the group") never overwrite each other,
    nor a membership written meanwhile: one creates, the others read its
    config and compare.

    Returns:
        ``(stream's config, None, revision)`` when this call created the
        config; else ``(stream's config, entry, entry.revision)``, the one found.

    Raises:
        StreamNotFoundError: no such stream.
        ConsumerGroupError: the key was deleted and created again under every attempt.
    """
    require_names(stream, group)
    config = js.stream(stream).cached_info.config
    kv = open_or_create_bucket(js, bucket, config.num_replicas)
    key = compose_key(stream, group)
    for _ in range(_CREATE_ATTEMPTS):
        try:
            return config, None, kv.create(key, payload)
        except KeyExistsError:
            pass
        try:
            entry = kv.get(key)
        except KeyNotFoundError:
            continue  # deleted between our create and our read: create again
        return config, entry, entry.revision
    raise ConsumerGroupError(f"the consumer group config {key!r} kept being deleted and created again")


def delete_config(js: JetStream, bucket: str, stream: str, group: str) -> None:
    """Delete a group's config entry: its running members see it go and stop.

    An entry already deleted is fine: deleting a group finishes its other
    parts (stream, consumers) even when an earlier attempt got this far.

    Raises:
        ConsumerGroupError: ``stream`` or ``group`` is not a valid name.
        ConsumerGroupNotFoundError: no group of that kind was ever made (no bucket).
    """
    require_names(stream, group)
    kv = open_bucket(js, bucket)
    try:
        kv.delete(compose_key(stream, group))
    except KeyNotFoundError:
        pass


def encode(obj: object) -> bytes:
    """Compact JSON, as Go's encoder writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def group_names(kv: KeyValue, stream: str) -> list[str]:
    """The groups of ``stream`` found in a bucket (keys ``"<stream>.<group>"``)."""
    try:
        keys = kv.keys(f"{stream}.*")
    except NoKeysError:
        return []
    return [key.partition(".")[2] for key in keys]
