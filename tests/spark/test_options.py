"""The data source's options, checked on the driver: no Spark session needed."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (the 'spark' extra)")

from natsjs_sync.spark.options import Position, read_options, write_options

URL = "nats://127.0.0.1:4222"


def _read(streaming: bool = False, **opts: Any) -> Any:
    return read_options({"servers": URL, "stream": "ORDERS", **opts}, streaming=streaming)


@pytest.mark.parametrize(("opts", "streaming", "match"), [
    ({"minPartitions": "two"}, False, r"'minPartitions' must be an integer, got 'two'"),
    ({"maxMessagesPerPartition": "0"}, False, r"'maxMessagesPerPartition' must be >= 1, got '0'"),
    ({"maxRecordsPerPartition": "-3"}, False, r"'maxMessagesPerPartition' must be >= 1, got '-3'"),
    ({"maxMessagesPerTrigger": "lots"}, True, r"'maxMessagesPerTrigger' must be an integer, got 'lots'"),
    ({"maxOffsetsPerTrigger": "0"}, True, r"'maxMessagesPerTrigger' must be >= 1, got '0'"),
    ({"failOnDataLoss": "ture"}, True, r"'failOnDataLoss' must be true or false, got 'ture'"),
    ({"includeHeaders": "yes please"}, False, r"'includeHeaders' must be true or false"),
    ({"startingOffsets": "beginning"}, False, r"'startingOffsets' must be 'earliest', 'latest' or JSON"),
    ({"startingOffsets": '{"ORDERS": 0}'}, False, r"position for 'ORDERS' must be a sequence >= 1"),
    ({"startingOffsets": '{"AUDIT": 5}'}, False, r"names 'AUDIT', which this read does not read"),
    ({"endingOffsets": "earliest"}, False, r"'endingOffsets' cannot be 'earliest'"),
    ({"endingOffsets": '{"ORDERS": -2}'}, False, r"position for 'ORDERS' must be a sequence >= 1 or -1"),
    ({"startingSequence": "5", "startingOffsets": "latest"}, False, r"both say where to start: give one"),
    ({"startingTimestamp": "yesterday"}, False, r"'startingTimestamp' must be milliseconds since the epoch"),
    ({"headersFormat": "json"}, False, r"'headersFormat' must be 'map' or 'kafka', got 'json'"),
    ({"timeout": "-1"}, False, r"'timeout' must be a finite number of seconds > 0, got '-1'"),
    ({"connectTimeout": "nan"}, False, r"'connectTimeout' must be a finite number of seconds"),
    ({"maxTriggerDelay": "soon", "minOffsetsPerTrigger": "5"}, True, r"'maxTriggerDelay' must be a duration"),
    ({"maxTriggerDelay": "5m"}, True, r"'maxTriggerDelay' needs 'minMessagesPerTrigger'"),
    ({"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, True, r"is above 'maxMessagesPerTrigger'"),
    # Typos and names of other systems are refused, never ignored.
    ({"startingOffset": "latest"}, False, r"unknown option 'startingOffset'.*did you mean 'startingOffsets'"),
    ({"maxMesagesPerTrigger": "5"}, True, r"unknown option 'maxMesagesPerTrigger'.*'maxMessagesPerTrigger'"),
    ({"kafka.bootstrap.servers": "h:9092"}, False, r"'kafka.bootstrap.servers' .* use 'servers'"),
    ({"subscribe": "orders"}, False, r"'subscribe' .* use 'stream'"),
    ({"kafka.security.protocol": "SSL"}, False, r"Kafka client settings do not apply"),
    ({"groupIdPrefix": "x"}, True, r"no consumer group"),
    # Options of the other kind of query are refused where they mean nothing.
    ({"endingOffsets": "latest"}, True, r"'endingOffsets' does not apply to a streaming read"),
    ({"maxOffsetsPerTrigger": "10"}, False, r"'maxOffsetsPerTrigger' does not apply to a batch read"),
    ({"subject": "a.b", "subjects": "a.c"}, False, r"are the same option"),
    ({"stream": "ORDERS,ORDERS"}, False, r"names a stream twice"),
    ({"stream": "ORD ERS"}, False, r"is not a stream name"),
])
def test_bad_read_options_are_refused_naming_option_and_value(opts: dict[str, str], streaming: bool,
                                                               match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _read(streaming, **opts)


def test_options_without_servers_or_stream_are_refused() -> None:
    with pytest.raises(ValueError, match="needs the option 'servers'"):
        read_options({"stream": "ORDERS"}, streaming=False)
    with pytest.raises(ValueError, match="needs a stream"):
        read_options({"servers": URL}, streaming=False)
    with pytest.raises(ValueError, match="'servers': 'http://x:1' is not a NATS URL"):
        read_options({"servers": "http://x:1", "stream": "S"}, streaming=False)


def test_kafka_names_have_kafka_meaning() -> None:
    ro = _read(streaming=True, maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10", maxTriggerDelay="30s",
               failOnDataLoss="FALSE", startingOffsets="latest")
    assert (ro.max_per_trigger, ro.min_per_trigger, ro.max_trigger_delay) == (100, 10, 30.0)
    assert ro.fail_on_data_loss is False
    assert ro.start == {"ORDERS": Position(seq=-1)}
    # endingOffsets is exclusive (Kafka's meaning); endingSequence is inclusive: both stop after 9.
    assert _read(endingOffsets='{"ORDERS": 10}').end == _read(endingSequence="9").end == {"ORDERS": Position(seq=10)}
    two = read_options({"servers": URL, "stream": "A, B", "startingOffsets": '{"A": -2, "B": 7}',
                        "maxRecordsPerPartition": "500", "minPartitions": "3"}, streaming=False)
    assert two.streams == ("A", "B") and two.start == {"A": Position(seq=-2), "B": Position(seq=7)}
    assert (two.per_partition, two.min_partitions) == (500, 3)
    by_time = _read(startingOffsetsByTimestamp='{"ORDERS": 1700000000000}')
    assert by_time.start["ORDERS"].time == datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)
    # Option names are case-insensitive, as Spark's are.
    assert _read(STARTINGSEQUENCE="4").start == {"ORDERS": Position(seq=4)}


def test_client_settings_pass_through() -> None:
    ro = _read(name="etl-7", connectTimeout="3.5", tlsHostname="nats.internal", maxReconnectAttempts="-1",
               reconnectTimeWait="0.5", retryTimeout="20", timeout="4", domain="hub", tlsVerifyHostname="false")
    cfg = ro.cfg
    assert (cfg.name, cfg.connect_timeout, cfg.max_reconnect_attempts, cfg.reconnect_time_wait) == (
        "etl-7", 3.5, -1, 0.5)
    assert (cfg.retry_timeout, cfg.timeout, cfg.domain, cfg.tls_verify_hostname) == (20.0, 4.0, "hub", False)
    assert dict(cfg.options) == {"tls_hostname": "nats.internal"}


@pytest.mark.parametrize(("opts", "match"), [
    ({"subject": "orders.*"}, r"'subject' must be a subject without wildcards, got 'orders.\*'"),
    ({"writeId": ""}, r"'writeId' must be 1 to 64 characters"),
    ({"startingOffsets": "latest"}, r"'startingOffsets' does not apply to a write"),
    ({"topik": "x"}, r"unknown option 'topik'.*did you mean 'topic'"),
])
def test_bad_write_options_are_refused(opts: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        write_options({"servers": URL, **opts}, streaming=False)


def test_topic_is_an_alias_of_subject_and_spark_own_options_pass() -> None:
    wo = write_options({"servers": URL, "topic": "orders.new", "checkpointLocation": "/tmp/x"}, streaming=True)
    assert wo.subject == "orders.new"
