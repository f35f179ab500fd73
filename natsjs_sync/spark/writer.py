"""The write side of the ``jetstream`` data source: rows published with their message ids.

:class:`JetStreamBatchWriter` (``df.write``) and :class:`JetStreamStreamWriter`
(``writeStream``) are made on the driver by
:class:`~natsjs_sync.spark.datasource.JetStreamDataSource`, after
:func:`check_write_schema` has checked the DataFrame's columns, and pickled to
the executors, whose tasks publish Arrow record batches (:func:`_write_batches`).

With ``valueFormat`` json or msgpack every row also carries the payload's
``content-type`` (``application/json``, ``application/msgpack``) unless its
``headers`` column names one (in any case): the row's own header is kept.

Every row is published with a ``Nats-Msg-Id``: the ``msg_id`` column, or one
made from the write, the partition, the row's content and how many identical
rows came before it in the partition (:class:`_ContentIds`). A retried task
therefore sends the same ids for the same rows in whatever order it gets them,
and the stream stores each row once (within its duplicate window).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from .._core.spi import link
from ..codecs import CONTENT_TYPE
from ..jetstream.bulk import FramePublisher, msg_id_headers
from ..jetstream.publish_options import publish_headers
from ..protocol.headers import encode_headers
from ..protocol.subjects import publish_subject
from .options import WriteOptions
from .payloads import content_type, encoder

_WRITE_COLUMNS = ("data", "value", "subject", "topic", "headers", "msg_id")


def check_write_schema(schema: StructType, wo: WriteOptions) -> None:
    """The DataFrame's columns, checked on the driver before anything is sent.

    Raises:
        ValueError: a column missing, unknown, given twice, or of a type that cannot be written.
    """
    names = {f.name.lower(): f for f in schema.fields}
    unknown = [f.name for f in schema.fields if f.name.lower() not in _WRITE_COLUMNS]
    if unknown:
        raise ValueError(f"writing to jetstream: unknown column(s) {', '.join(map(repr, unknown))}; the columns "
                         "are data (or value), subject (or topic), headers, msg_id: select(...) them")
    for a, b in (("data", "value"), ("subject", "topic")):
        if a in names and b in names:
            raise ValueError(f"writing to jetstream: columns {a!r} and {b!r} are the same column: give one")
    data = names.get("data") or names.get("value")
    if data is None:
        raise ValueError("writing to jetstream needs a 'data' (or 'value') column, binary or string")
    if wo.value_format != "binary":
        if not isinstance(data.dataType, (StructType, MapType, ArrayType)):
            raise ValueError(f"writing to jetstream with valueFormat {wo.value_format!r}: column {data.name!r} must "
                             f"be a struct, map or array (struct(...).alias('value')), not "
                             f"{data.dataType.simpleString()}")
    elif not isinstance(data.dataType, (BinaryType, StringType)):
        raise ValueError(f"writing to jetstream: column {data.name!r} must be binary or string (or a struct, map "
                         f"or array with valueFormat json or msgpack), not {data.dataType.simpleString()}")
    subject = names.get("subject") or names.get("topic")
    if subject is None and not wo.subject:
        raise ValueError("writing to jetstream needs a 'subject' (or 'topic') column or the option 'subject'")
    if subject is not None and not isinstance(subject.dataType, StringType):
        raise ValueError(f"writing to jetstream: column {subject.name!r} must be a string, not "
                         f"{subject.dataType.simpleString()}")
    mid = names.get("msg_id")
    if mid is not None and not isinstance(mid.dataType, StringType):
        raise ValueError(f"writing to jetstream: column 'msg_id' must be a string, not {mid.dataType.simpleString()}")
    hdr = names.get("headers")
    if hdr is not None and not _header_type_ok(hdr.dataType):
        raise ValueError("writing to jetstream: column 'headers' must be map<string,string>, "
                         "map<string,array<string>> or array<struct<key:string,value:binary or string>> (Kafka's), "
                         f"not {hdr.dataType.simpleString()}")


def _header_type_ok(t: Any) -> bool:
    if isinstance(t, MapType):
        v = t.valueType
        return isinstance(t.keyType, StringType) and (
            isinstance(v, StringType) or (isinstance(v, ArrayType) and isinstance(v.elementType, StringType)))
    if isinstance(t, ArrayType) and isinstance(t.elementType, StructType):
        fields = {f.name: f.dataType for f in t.elementType.fields}
        return set(fields) == {"key", "value"} and isinstance(fields["key"], StringType) and isinstance(
            fields["value"], (StringType, BinaryType))
    return False


def _header_dict(h: Any) -> dict[str, Any] | None:
    """A headers cell (a map as pairs, or Kafka's list of key/value structs) as a dict."""
    if not h:
        return None
    out: dict[str, Any] = {}
    if isinstance(h, dict):
        h = h.items()
    for item in h:
        if isinstance(item, dict):  # Kafka's shape: {"key": k, "value": v}, keys may repeat
            k, v = item["key"], item["value"]
            v = v.decode() if isinstance(v, (bytes, bytearray)) else v
            if v is None:
                continue
            prev = out.get(k)
            out[k] = v if prev is None else ([*prev, v] if isinstance(prev, list) else [prev, v])
        else:
            k, v = item
            if v is None:
                continue
            out[k] = list(v) if isinstance(v, (list, tuple)) else str(v)
    return out or None


@dataclass
class PublishCommit(WriterCommitMessage):
    published: int
    duplicates: int
    resent: int = 0


_LENGTHS = struct.Struct("<QQ")  # subject and data lengths, ahead of both in a row's digest


class _ContentIds:
    """Message ids from a row's content: ``<prefix>.<digest>.<occurrence>``.

    The digest covers subject, headers and data; the occurrence counts the
    identical rows seen before in this partition. A retried task gets the same
    multiset of rows, so whatever their order every row gets the id it had
    before (identical rows are interchangeable), and distinct rows never share one.

    The digest's input says where each field ends (the lengths of subject and
    data come first), so no two distinct rows hash the same input: data
    ``ab`` on subject ``c`` and data ``a`` on subject ``bc`` once did, and were
    then counted as one row's two occurrences, which a retry in another order
    gave to the other row (one row stored twice, the other never).
    """

    def __init__(self, prefix: str):
        if any(c in prefix for c in "\r\n\t ") or not prefix.isprintable():
            raise ValueError(f"message id prefix {prefix!r} must be printable, without spaces")
        self.prefix = prefix.encode() + b"."
        self.seen: dict[bytes, int] = {}

    def __call__(self, subject: bytes, data: bytes, headers: Any) -> bytes:
        h = hashlib.blake2b(_LENGTHS.pack(len(subject), len(data)), digest_size=12, person=b"natsjs-row-2")
        h.update(subject)
        h.update(data)
        if headers:
            h.update(repr(sorted(headers.items())).encode())
        digest = h.digest()
        seen = self.seen
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        return b"%s%s.%d" % (self.prefix, base64.urlsafe_b64encode(digest), n)


def _subject_bytes(cache: dict[str | None, bytes], subject: str | None, default: str | None) -> bytes:
    """A row's subject, validated once per distinct value."""
    b = cache.get(subject)
    if b is None:
        name = subject or default
        if name is None:
            raise ValueError("writing to jetstream: a row has no subject (null in the subject column and "
                             "no option 'subject')")
        b = cache[subject] = publish_subject(name)
    return b


def _batch_datas(batch: Any, di: int, value_format: str = "binary") -> list[bytes]:
    """The payload column as bytes (strings encoded as UTF-8, nulls empty; with ``valueFormat``
    json or msgpack, each struct, map or array cell encoded, a null one as null)."""
    column = batch.column(di)
    if value_format != "binary":
        encode = encoder(value_format)
        return [encode(d) for d in column.to_pylist(maps_as_pydicts="strict")]
    datas: list[Any] = column.to_pylist()
    if datas and not isinstance(datas[0], bytes):
        return [b"" if d is None else d.encode() if isinstance(d, str) else d for d in datas]
    if column.null_count:
        return [b"" if d is None else d for d in datas]
    return datas


def _batch_subjects(batch: Any, si: int | None, cache: dict[str | None, bytes], default: str | None) -> list[bytes]:
    """Each row's subject (the subject/topic column, or the option for all rows)."""
    if si is None:
        return [_subject_bytes(cache, None, default)] * batch.num_rows
    return [_subject_bytes(cache, s, default) for s in batch.column(si).to_pylist()]


def _with_content_type(headers: dict[str, Any] | None, ctype: str | None) -> dict[str, Any] | None:
    """A row's headers with the payload's ``content-type`` added, unless the row has one (in any case)."""
    if ctype is None or (headers is not None and any(k.lower() == CONTENT_TYPE for k in headers)):
        return headers
    return {CONTENT_TYPE: ctype} if headers is None else {CONTENT_TYPE: ctype, **headers}


def _batch_header_blocks(batch: Any, cols: dict[str, int], ids: _ContentIds, subjects: list[bytes],
                         datas: list[bytes], ctype: str | None = None) -> list[bytes]:
    """Each row's encoded header block: the payload's content type (``ctype``, unless the row's
    headers name one), its headers column and its message id (given, or derived).

    A derived id digests the headers column only, not the content type the
    write adds: ids stay what they were for a write run again by an earlier version.
    """
    mids = batch.column(cols["msg_id"]).to_pylist() if "msg_id" in cols else None
    hdrs = batch.column(cols["headers"]).to_pylist() if "headers" in cols else None
    if hdrs is None and mids is None:
        lines = b"" if ctype is None else b"%s: %s\r\n" % (CONTENT_TYPE.encode(), ctype.encode())
        return [msg_id_headers(ids(subjects[i], datas[i], None), lines) for i in range(batch.num_rows)]
    blocks = []
    for i in range(batch.num_rows):
        headers = _header_dict(hdrs[i]) if hdrs is not None else None
        mid = mids[i] if mids is not None else None
        if mid is None:
            mid = ids(subjects[i], datas[i], headers).decode()
        blocks.append(encode_headers(publish_headers(_with_content_type(headers, ctype), mid)))
    return blocks


def _write_batches(wo: WriteOptions, batches: Iterator[Any], id_prefix: str) -> PublishCommit:
    """Publish Arrow record batches (columns data/value, subject/topic, headers, msg_id).

    Each Arrow batch is encoded as frames and sent in one buffered write as it
    arrives (nothing waits for the end of the partition); acks are counted in bulk.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    ids = _ContentIds(f"{id_prefix}.{ctx.partitionId() if ctx is not None else 0}")
    cfg = wo.cfg
    core = link(cfg.client())
    subjects_cache: dict[str | None, bytes] = {}
    ctype = content_type(wo.value_format)
    # No deadline for the whole partition: each ack has its own (the timeout),
    # and an outage is ridden out for retry_timeout.
    with FramePublisher(core, 4000, cfg.timeout, cfg.retry_timeout) as pub:
        for batch in batches:
            cols = {n.lower(): i for i, n in enumerate(batch.schema.names)}
            di = cols.get("data", cols.get("value"))
            assert di is not None  # checked on the driver
            datas = _batch_datas(batch, di, wo.value_format)
            subjects = _batch_subjects(batch, cols.get("subject", cols.get("topic")), subjects_cache, wo.subject)
            pub.publish(subjects, _batch_header_blocks(batch, cols, ids, subjects, datas, ctype), datas)
    return PublishCommit(pub.published, pub.duplicates, pub.resent)


class JetStreamBatchWriter(DataSourceArrowWriter):
    def __init__(self, wo: WriteOptions):
        self.wo = wo
        # Made once on the driver and shipped to every task (and its retries).
        self.write_id = wo.write_id or uuid.uuid4().hex[:16]

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_batches(self.wo, iterator, self.write_id)


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, wo: WriteOptions):
        self.wo = wo
        self.fallback_id = wo.write_id or uuid.uuid4().hex[:16]

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        # A micro-batch replayed after a failure has the same query id and batch id.
        prefix = f"{self.wo.write_id or query or self.fallback_id}.{batch if batch is not None else 'x'}"
        return _write_batches(self.wo, iterator, prefix)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass



__all__ = ["JetStreamBatchWriter", "JetStreamStreamWriter", "PublishCommit", "check_write_schema"]
