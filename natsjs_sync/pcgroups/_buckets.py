"""The KV buckets group configs live in: opened, or made on first use."""

from __future__ import annotations

import json

from ..errors import BucketExistsError, BucketNotFoundError, KeyNotFoundError, NoKeysError
from ..jetstream import Entry, JetStream, KeyValue
from .errors import ConsumerGroupError, ConsumerGroupNotFoundError
from .partitions import compose_key


def require_names(stream: str, group: str) -> None:
    """Refuse empty names before they make a malformed key.

    Raises:
        ConsumerGroupError: ``stream`` or ``group`` is empty.
    """
    if not stream or not group or "." in group:
        raise ConsumerGroupError(f"invalid stream name {stream!r} or consumer group name {group!r}")


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
