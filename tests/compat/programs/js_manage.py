"""JetStream management: streams, consumers, messages, account info."""

import asyncio
import os

import nats
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)
from nats.js.errors import NotFoundError

URL = os.environ["NATS_URL"]


async def main():
    nc = await nats.connect(URL)
    jsm = nc.jsm()
    js = nc.jetstream()

    info = await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], storage=StorageType.MEMORY,
                                            retention=RetentionPolicy.LIMITS, max_msgs=1000, allow_direct=True))
    assert isinstance(info, StreamInfo)
    assert info.config.name == "ORDERS"
    assert info.config.subjects == ["orders.>"]
    assert info.state.messages == 0
    assert info.config.as_dict()["name"] == "ORDERS"

    info = await jsm.update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], storage=StorageType.MEMORY,
                                                max_msgs=2000, description="orders", allow_direct=True))
    assert info.config.max_msgs == 2000
    assert info.config.description == "orders"
    cfg = info.config.evolve(max_msgs=3000)
    info = await js.update_stream(cfg)
    assert info.config.max_msgs == 3000

    await js.add_stream(name="EVENTS", subjects=["events.*"])
    names = sorted(si.config.name for si in await js.streams_info())
    assert names == ["EVENTS", "ORDERS"], names
    assert len(await js.streams_info(offset=1)) == 1
    assert await js.find_stream_name_by_subject("orders.new") == "ORDERS"

    for i in range(5):
        await js.publish(f"orders.{i}", f"order {i}".encode())
    info = await js.stream_info("ORDERS")
    assert info.state.messages == 5
    assert info.state.last_seq == 5

    msg = await js.get_msg("ORDERS", 2)
    assert msg.seq == 2 and msg.subject == "orders.1" and msg.data == b"order 1"
    last = await js.get_last_msg("ORDERS", "orders.4")
    assert last.data == b"order 4"
    direct = await js.get_msg("ORDERS", subject="orders.3", direct=True)
    assert direct.data == b"order 3"

    assert await js.delete_msg("ORDERS", 1) is True
    try:
        await js.get_msg("ORDERS", 1)
    except NotFoundError:
        pass
    else:
        raise AssertionError("deleted message still there")

    cinfo = await js.add_consumer("ORDERS", ConsumerConfig(durable_name="proc", ack_policy=AckPolicy.EXPLICIT,
                                                           deliver_policy=DeliverPolicy.ALL))
    assert cinfo.name == "proc"
    assert cinfo.config.durable_name == "proc"
    assert cinfo.num_pending == 4
    cinfo = await js.consumer_info("ORDERS", "proc")
    assert cinfo.stream_name == "ORDERS"
    await js.add_consumer("ORDERS", durable_name="multi",
                          config=ConsumerConfig(filter_subjects=["orders.1", "orders.2"]))
    multi = await js.consumer_info("ORDERS", "multi")
    assert multi.config.filter_subjects == ["orders.1", "orders.2"]
    assert sorted(c.name for c in await jsm.consumers_info("ORDERS")) == ["multi", "proc"]
    assert await js.delete_consumer("ORDERS", "multi") is True

    acct = await js.account_info()
    assert acct.streams == 2

    assert await js.purge_stream("ORDERS") is True
    assert (await js.stream_info("ORDERS")).state.messages == 0

    assert await js.delete_stream("EVENTS") is True
    try:
        await js.stream_info("EVENTS")
    except NotFoundError:
        pass
    else:
        raise AssertionError("stream still there")

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
