"""Publishing a partition's rows from an executor: :func:`publish_partition`.

It runs on an executor with the process's shared client (``cfg.client()``) and
finishes its work before returning: Spark's Python workers may leave with
``os._exit``, so nothing may be left for atexit or ``__del__``.
"""

from __future__ import annotations

import collections
import datetime
import decimal
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import NatsError
from ..jetstream import PubAck
from .config import NatsConfig

__all__ = ["PublishResult", "publish_partition", "row_payload"]

RowFn = Callable[[Any], Any]


@dataclass(frozen=True)
class PublishResult:
    """What :func:`publish_partition` did: messages stored, and repeats the
    stream recognised by their msg id (a retried task) and did not store again."""

    published: int = 0
    duplicates: int = 0

    def __add__(self, other: PublishResult) -> PublishResult:
        return PublishResult(self.published + other.published, self.duplicates + other.duplicates)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (datetime.datetime, datetime.date)):
        return obj.isoformat()
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).hex()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


_json = msgspec.json.Encoder(enc_hook=_json_default)


def _as_dict(row: Any) -> Mapping[str, Any] | None:
    if isinstance(row, Mapping):
        return row
    as_dict = getattr(row, "asDict", None)
    if as_dict is not None:
        return as_dict(recursive=True)  # type: ignore[no-any-return]
    return None


def row_payload(row: Any) -> bytes:
    """The message body for a row: bytes or str as they are; a row (or dict)
    with a ``data`` field, that field; any other row, its JSON."""
    if isinstance(row, (bytes, bytearray, memoryview)):
        return bytes(row)
    if isinstance(row, str):
        return row.encode()
    d = _as_dict(row)
    if d is None:
        raise TypeError(f"cannot publish a {type(row).__name__}: give bytes, str, a Row or a dict")
    if "data" in d:
        data = d["data"]
        if data is None:
            return b""
        return data.encode() if isinstance(data, str) else bytes(data)
    return _json.encode(d)


def _field(spec: str | RowFn | None, row: Any) -> Any:
    if spec is None:
        return None
    if callable(spec):
        return spec(row)
    d = _as_dict(row)
    if d is None:
        raise TypeError(f"cannot take column {spec!r} from a {type(row).__name__}")
    return d[spec]


def publish_partition(
    cfg: NatsConfig,
    subject: str | RowFn,
    rows: Iterable[Any],
    msg_id: str | RowFn | None = None,
    headers: Mapping[str, str] | RowFn | None = None,
    data: str | RowFn | None = None,
    window: int = 2000,
    timeout: float | None = None,
) -> PublishResult:
    """Publish every row of a partition to JetStream and wait for every ack.

    For ``df.foreachPartition(lambda rows: publish_partition(cfg, "orders.new", rows, msg_id=...))``.

    Args:
        subject: a subject, or ``row -> subject``.
        msg_id: a column name or ``row -> id``; with it a retried task stores
            nothing twice (within the stream's duplicate window).
        headers: a mapping, or ``row -> mapping``.
        data: a column name or ``row -> bytes``; default :func:`row_payload`.
        window: publishes in flight at most.

    Raises:
        NatsError: the first failure, after every other publish finished (so
            Spark can retry the task; msg ids keep the retry from duplicating).
    """
    js = cfg.jetstream()
    wait = cfg.timeout if timeout is None else timeout
    inflight: collections.deque[Future[PubAck]] = collections.deque()
    published = duplicates = 0
    first_error: BaseException | None = None

    def settle(fut: Future[PubAck]) -> None:
        nonlocal published, duplicates, first_error
        try:
            ack = fut.result(timeout=wait)
        except BaseException as exc:  # kept, and raised after the rest finish
            if first_error is None:
                first_error = exc
            return
        if ack.duplicate:
            duplicates += 1
        else:
            published += 1

    for row in rows:
        subj = subject(row) if callable(subject) else subject
        payload = row_payload(row) if data is None else _field(data, row)
        if isinstance(payload, str):
            payload = payload.encode()
        mid = _field(msg_id, row)
        hdrs = headers(row) if callable(headers) else headers
        try:
            inflight.append(js.publish_async(subj, payload, headers=hdrs,
                                             msg_id=None if mid is None else str(mid)))
        except NatsError as exc:
            first_error = first_error or exc
            break
        if len(inflight) >= window:
            settle(inflight.popleft())
    while inflight:
        settle(inflight.popleft())
    if first_error is not None:
        raise first_error
    return PublishResult(published, duplicates)
