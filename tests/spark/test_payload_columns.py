"""Payloads as columns (``valueFormat`` json/msgpack with ``valueSchema``): written from struct
columns, read back as columns, in batch and streaming, bad payloads failing the task with
their sequence or kept in a column of their own, never dropped."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

pytestmark = pytest.mark.slow

SCHEMA = "id BIGINT, name STRING, tags ARRAY<STRING>, attrs MAP<STRING, INT>, " \
         "`at home` STRUCT<city: STRING, since: DATE>, price DECIMAL(10, 2), seen TIMESTAMP"


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer() as s:
        yield s


@pytest.fixture
def js(server: NatsServer) -> Iterator[Any]:
    nc = nats.connect(server.url)
    yield nc.jetstream()
    nc.close()


@pytest.fixture(autouse=True)
def registered(spark: Any) -> None:
    from natsjs_sync.spark.datasource import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


def _stream(js: Any, name: str) -> None:
    try:
        js.delete_stream(name)
    except nats.NatsError:
        pass
    js.create_stream(name=name, subjects=[f"{name.lower()}.>"])


def _read(spark: Any, server: NatsServer, stream: str, **opts: Any) -> Any:
    r = spark.read.format("jetstream").option("servers", server.url)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(stream)


ROWS = [
    (1, "ann", ["a", "b"], {"x": 1}, ("Oslo", datetime.date(2020, 1, 2)), decimal.Decimal("9.99"),
     datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)),
    (2, None, [], {}, None, None, None),
]


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
def test_struct_columns_written_as_payloads_read_back_as_columns(spark: Any, server: NatsServer, js: Any,
                                                               fmt: str) -> None:
    name = f"PAY{fmt.upper()}"
    _stream(js, name)
    sub = js.nc.subscribe(f"{name.lower()}.>")
    df = spark.createDataFrame(ROWS, SCHEMA)
    (df.selectExpr(f"'{name.lower()}.in' as subject", "struct(*) as value")
       .write.format("jetstream").option("servers", server.url).option("valueFormat", fmt).mode("append").save())
    raw = js.stream(name).get_msg(1).data
    decoded = msgspec.json.decode(raw) if fmt == "json" else msgspec.msgpack.decode(raw)
    assert decoded["name"] in ("ann", None) and "at home" in decoded  # the payload is the struct, by field name
    # Each message names its format (the codecs' header): a typed reader picks the codec by it.
    msgs = [sub.next_msg(10), sub.next_msg(10)]
    assert {m.headers["content-type"] for m in msgs} == {f"application/{fmt}"}
    assert sorted(m.decode(dict[str, Any])["id"] for m in msgs) == [1, 2]  # no codec given: JSON but for the header
    got = _read(spark, server, name, valueFormat=fmt, valueSchema=SCHEMA)
    assert got.columns == ["stream", "subject", "seq", "timestamp", "headers", "id", "name", "tags", "attrs",
                           "at home", "price", "seen"]
    collected = got.collect()
    rows = sorted((tuple(r)[5:] for r in collected), key=lambda r: r[0])
    as_written = sorted((tuple(r) for r in df.collect()), key=lambda r: r[0])
    assert rows == as_written
    assert [sorted(r.headers) for r in collected] == [["Nats-Msg-Id", "content-type"]] * 2
    assert {tuple(r.headers["content-type"]) for r in collected} == {(f"application/{fmt}",)}


def _publish_bad(js: Any, name: str) -> None:
    js.publish(f"{name.lower()}.a", b'{"id": 1, "name": "ok"}')
    js.publish(f"{name.lower()}.b", b'{"id": "one"}')            # a string for a BIGINT
    js.publish(f"{name.lower()}.c", b"not json")
    js.publish(f"{name.lower()}.d", b'{"id": 4, "price": "123456789012.5"}')  # too many digits for DECIMAL(10,2)
    js.publish(f"{name.lower()}.e", b'{"id": 5}')


def test_a_bad_payload_fails_the_read_naming_its_sequence_and_field(spark: Any, server: NatsServer,
                                                                    js: Any) -> None:
    _stream(js, "PAYBAD")
    _publish_bad(js, "PAYBAD")
    with pytest.raises(Exception, match=r"sequence 2 \(subject 'paybad.b'\).*\$\.id"):
        _read(spark, server, "PAYBAD", valueFormat="json", valueSchema=SCHEMA).collect()


def test_permissive_keeps_every_row_and_the_bad_payloads_in_their_own_column(spark: Any, server: NatsServer,
                                                                            js: Any) -> None:
    _stream(js, "PAYPERM")
    _publish_bad(js, "PAYPERM")
    df = _read(spark, server, "PAYPERM", valueFormat="json", valueSchema=SCHEMA, mode="PERMISSIVE",
               columnNameOfCorruptRecord="bad", includeHeaders="false")
    got = sorted((r.seq, r.id, r.bad) for r in df.collect())
    assert got == [(1, 1, None), (2, None, b'{"id": "one"}'), (3, None, b"not json"),
                   (4, None, b'{"id": 4, "price": "123456789012.5"}'), (5, 5, None)]


def test_a_deeply_nested_payload_is_a_bad_payload_in_either_mode(spark: Any, server: NatsServer, js: Any) -> None:
    """Nesting past the decoder's limit (in a field the schema does not name) is a corrupt record, not a crash."""
    _stream(js, "PAYDEEP")
    deep = b'{"id": 1, "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    js.publish("paydeep.a", deep)
    js.publish("paydeep.b", b'{"id": 2}')
    df = _read(spark, server, "PAYDEEP", valueFormat="json", valueSchema="id BIGINT", mode="PERMISSIVE")
    assert sorted((r.seq, r.id, r._corrupt_record) for r in df.collect()) == [(1, None, deep), (2, 2, None)]
    with pytest.raises(Exception, match=r"sequence 1 \(subject 'paydeep.a'\).*nested too deeply"):
        _read(spark, server, "PAYDEEP", valueFormat="json", valueSchema="id BIGINT").collect()


def test_streaming_reads_payload_columns(spark: Any, server: NatsServer, js: Any, tmp_path: Path) -> None:
    _stream(js, "PAYSTREAM")
    for i in range(20):
        js.publish(f"paystream.{i}", msgspec.json.encode({"id": i, "tags": [str(i)]}))
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("valueFormat", "json")
         .option("valueSchema", "id BIGINT, tags ARRAY<STRING>").load("PAYSTREAM")
         .writeStream.format("memory").queryName("paystream").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    q.awaitTermination(180)
    got = sorted((r.id, list(r.tags)) for r in spark.sql("select id, tags from paystream").collect())
    assert got == [(i, [str(i)]) for i in range(20)]


def test_payload_options_are_checked_before_anything_is_read_or_sent(spark: Any, server: NatsServer,
                                                                     js: Any) -> None:
    _stream(js, "PAYOPTS")
    with pytest.raises(Exception, match="'valueSchema' needs 'valueFormat' json or msgpack"):
        _read(spark, server, "PAYOPTS", valueSchema="id BIGINT")
    with pytest.raises(Exception, match="'valueFormat' 'json' needs 'valueSchema'"):
        _read(spark, server, "PAYOPTS", valueFormat="json")
    with pytest.raises(Exception, match="'mode' must be FAILFAST or PERMISSIVE"):
        _read(spark, server, "PAYOPTS", valueFormat="json", valueSchema="id BIGINT", mode="DROPMALFORMED")
    with pytest.raises(Exception, match="field 'Subject' has the name of a column every row has"):
        _read(spark, server, "PAYOPTS", valueFormat="json", valueSchema="Subject STRING").collect()
    with pytest.raises(Exception, match="map with int keys"):
        _read(spark, server, "PAYOPTS", valueFormat="json", valueSchema="m MAP<INT, STRING>").collect()
    df = spark.createDataFrame([("payopts.x", "text")], "subject STRING, value STRING")
    with pytest.raises(Exception, match="must be a struct, map or array"):
        df.write.format("jetstream").option("servers", server.url).option("valueFormat", "json") \
            .mode("append").save()
    assert js.stream("PAYOPTS").info().state.messages == 0  # nothing was sent


def test_integer_timestamps_read_as_sparks_own_json_reader_reads_them(spark: Any, server: NatsServer,
                                                                     js: Any) -> None:
    """An integer in a TIMESTAMP field is seconds since the epoch, as in ``spark.read.json`` (run here on the
    same payloads); a fraction, a boolean, and a number for DATE are bad payloads in both."""
    _stream(js, "PAYEPOCH")
    schema = "id BIGINT, seen TIMESTAMP, times ARRAY<TIMESTAMP>, day DATE"
    payloads = ['{"id": 1, "seen": 1700000000, "times": [0, "2024-01-02T03:04:05Z"]}',
                '{"id": 2, "seen": -1, "day": "2024-01-02"}',
                '{"id": 3, "seen": "2024-01-02T03:04:05Z"}',
                '{"id": 4, "seen": 1700000000.5}',
                '{"id": 5, "seen": 1.7e9}',
                '{"id": 6, "seen": true}',
                '{"id": 7, "times": [1, 1.5]}',
                '{"id": 8, "day": 19000}']
    for i, p in enumerate(payloads):
        js.publish(f"payepoch.{i}", p.encode())
    ours = _read(spark, server, "PAYEPOCH", valueFormat="json", valueSchema=schema, mode="PERMISSIVE")
    sparks = spark.read.schema(schema + ", _corrupt_record STRING").json(spark.sparkContext.parallelize(payloads))
    got = {r.seq: (r.id, r.seen, r.times, r.day) for r in ours.collect() if r._corrupt_record is None}
    want = {i + 1: (r.id, r.seen, r.times, r.day) for i, r in enumerate(sparks.collect()) if r._corrupt_record is None}
    assert sorted(got) == [1, 2, 3] and got == want
    assert got[1][1] == datetime.datetime.fromtimestamp(1700000000)  # the session's time zone, as Spark collects
    with pytest.raises(Exception, match=r"sequence 4 \(subject 'payepoch.3'\).*\$\.seen"):
        _read(spark, server, "PAYEPOCH", valueFormat="json", valueSchema=schema).collect()
    _stream(js, "PAYEPOCHMP")
    js.publish("payepochmp.a", msgspec.msgpack.encode({"id": 1, "seen": 1700000000, "times": [0]}))
    (row,) = _read(spark, server, "PAYEPOCHMP", valueFormat="msgpack", valueSchema=schema).collect()
    assert (row.seen, row.times) == (got[1][1], [datetime.datetime.fromtimestamp(0)])


def test_a_headers_column_is_merged_and_its_own_content_type_kept(spark: Any, server: NatsServer, js: Any) -> None:
    _stream(js, "PAYHDRS")
    rows = [("payhdrs.a", (1,), {"X-Trace": "t1"}), ("payhdrs.b", (2,), {"Content-Type": "application/vnd.x+json"}),
            ("payhdrs.c", (3,), None)]
    df = spark.createDataFrame(rows, "subject STRING, value STRUCT<id: BIGINT>, headers MAP<STRING, STRING>")
    df.write.format("jetstream").option("servers", server.url).option("valueFormat", "json").mode("append").save()
    got = {}
    for seq in (1, 2, 3):
        m = js.stream("PAYHDRS").get_msg(seq)
        got[m.subject] = {k: v for k, v in m.headers.items() if k != "Nats-Msg-Id"}
    assert got == {"payhdrs.a": {"content-type": "application/json", "X-Trace": "t1"},
                   "payhdrs.b": {"Content-Type": "application/vnd.x+json"},  # the row's own, in any case, wins
                   "payhdrs.c": {"content-type": "application/json"}}
