"""Time bounds of a read (starting/ending timestamps, the time pushdown) turned
into sequences on the driver: exact whatever the server's speed, on every
server version, and the assumption they rest on."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import FaultProxy, NatsServer

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (the 'spark' extra)")
pytestmark = pytest.mark.slow


def _between(js: Any, stream: str, a: int, b: int) -> datetime.datetime:
    """A time after message ``a`` was stored and before message ``b`` was."""
    st = js.stream(stream)
    ta, tb = st.get_msg(a).time, st.get_msg(b).time
    # The client has the times rounded to microseconds: the middle is strictly between when they are 3 µs apart.
    assert tb - ta >= datetime.timedelta(microseconds=3), "messages stored too close together for this test"
    return ta + (tb - ta) / 2


def _rows(reader: Any, parts: Any) -> list[int]:
    seqs: list[int] = []
    for part in parts:
        for batch in reader.read(part):
            seqs.extend(pa.Table.from_batches([batch]).column("seq").to_pylist())
    return sorted(seqs)


def test_time_bounds_on_a_slow_server_are_exact_never_empty(nats_server: NatsServer,
                                                            nats_fault_proxy: FaultProxy) -> None:
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThanOrEqual

    from natsjs_sync.spark.options import read_options
    from natsjs_sync.spark.reader import JetStreamBatchReader, JetStreamPushdownReader
    from natsjs_sync.spark.stream_reader import JetStreamStreamReader

    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="TSLOW", subjects=["tslow.>"])
        for i in range(10):
            js.publish("tslow.x", str(i).encode())
        after5, after8 = _between(js, "TSLOW", 5, 6), _between(js, "TSLOW", 8, 9)
    opts = {"servers": nats_fault_proxy.url, "stream": "TSLOW", "retryTimeout": "20",
            "startingTimestamp": after5.isoformat(), "endingTimestamp": after8.isoformat()}
    batch_ro = read_options(opts, streaming=False)
    batch_ro.cfg.client()  # connected before the network slows down
    # Each byte is held 0.7 s each way: a request takes 1.4 s, so a lookup that creates a consumer
    # and then fetches within one 2 s wait comes back empty (it read as "nothing at or after t").
    nats_fault_proxy.latency(0.7)
    reader = JetStreamBatchReader(batch_ro)
    parts = reader.partitions()
    assert [(p.start, p.end) for p in parts] == [(6, 8)]  # type: ignore[attr-defined]

    # The same bounds as pushed-down filters: timestamp >= after5 and timestamp <= after8.
    plain = {k: v for k, v in opts.items() if not k.endswith("Timestamp")}
    pushed = JetStreamPushdownReader(read_options(plain, streaming=False))
    kept = list(pushed.pushFilters([GreaterThanOrEqual(("timestamp",), after5),
                                    LessThanOrEqual(("timestamp",), after8)]))
    assert len(kept) == 2  # Spark applies them again
    assert [(p.start, p.end) for p in pushed.partitions()] == [(6, 8)]  # type: ignore[attr-defined]

    stream_opts = {k: v for k, v in opts.items() if k != "endingTimestamp"}
    streaming = JetStreamStreamReader(read_options(stream_opts, streaming=True))
    assert streaming.initialOffset()["streams"]["TSLOW"]["next"] == 6  # not the end of the stream

    nats_fault_proxy.heal()
    assert _rows(reader, parts) == [6, 7, 8]


def test_both_lookups_of_a_time_agree_whatever_the_server_version(nats_server: NatsServer) -> None:
    """The message get by time (2.11+) and the consumer placed at a time (older
    servers) give the same first sequence, across deleted messages and past the end."""
    from natsjs_sync.spark.options import connection
    from natsjs_sync.spark.reader import _consumer_seq_at_time, _get_seq_at_time

    cfg = connection({"servers": nats_server.url})
    js = cfg.jetstream()
    js.create_stream(name="TBOTH", subjects=["tboth.>"])
    for i in range(6):
        js.publish("tboth.x", str(i).encode())
    js.stream("TBOTH").delete_msg(3)
    times = {s: js.stream("TBOTH").get_msg(s).time for s in (1, 2, 4, 5, 6)}
    probes = [(times[1] - datetime.timedelta(hours=1), 1), (_between(js, "TBOTH", 2, 4), 4),
              (_between(js, "TBOTH", 5, 6), 6), (times[6] + datetime.timedelta(hours=1), None)]
    for t, want in probes:
        assert _consumer_seq_at_time(js, "TBOTH", t) == want
        if want is None:
            with pytest.raises(nats.MsgNotFoundError):
                _get_seq_at_time(cfg, js, "TBOTH", t)
        else:
            assert _get_seq_at_time(cfg, js, "TBOTH", t) == want
    assert list(js.consumer_names("TBOTH")) == []  # nothing left behind
