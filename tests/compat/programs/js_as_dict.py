"""as_dict() writes what nats-py's writes for the same server answer: every field nats-py
models that the server sent (zeros and False included), none it leaves out (no unknown
keys, no ts/first_ts/last_ts), nats-py's always-written defaults (duplicate_window,
max_age, ack_wait ... as 0 when unset), durations in nanoseconds, times as a datetime
or, where nats-py writes text, RFC 3339 text. Values that differ from run to run (times,
server ids, nuids, the server's own metadata, API call counts) are normalised here."""

import asyncio
import datetime
import os

import nats
from nats.js.api import ConsumerConfig, KeyValueConfig, ObjectStoreConfig, StreamConfig, StreamSource

URL = os.environ["NATS_URL"]
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def norm(d, times_as, key=""):
    """Replace the per-run values by their kind; ``times_as`` names the type each time has."""
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            if k in ("created", "time", "last_active", "mtime"):
                assert isinstance(v, times_as[k]), (k, type(v))
                v = "<time>"
            elif k in ("leader", "nuid"):
                assert isinstance(v, str) and v, (k, v)
                v = "<id>"
            elif k == "metadata":
                v = {mk: mv for mk, mv in v.items() if not mk.startswith("_nats.")}
            else:
                v = norm(v, times_as, k)
            out[k] = v
        return out
    if isinstance(d, list):
        return [norm(v, times_as, key) for v in d]
    return d


STREAM_CONFIG = {
    "name": "ASD", "subjects": ["asd.>"], "retention": "limits", "max_consumers": -1, "max_msgs": -1,
    "max_bytes": -1, "discard": "old", "discard_new_per_subject": False, "max_age": 0,
    "max_msgs_per_subject": -1, "max_msg_size": -1, "storage": "file", "num_replicas": 1, "no_ack": False,
    "duplicate_window": 120_000_000_000, "sealed": False, "deny_delete": False, "deny_purge": False,
    "allow_rollup_hdrs": False, "allow_direct": False, "mirror_direct": False, "compression": "none",
    "allow_msg_ttl": False, "metadata": {"team": "a"}, "consumer_limits": {},
}


async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream()

    # Configs built in code: the fields set plus nats-py's defaults that are not None.
    assert StreamConfig(name="X").as_dict() == {
        "name": "X", "discard": "old", "discard_new_per_subject": False, "max_age": 0, "max_msgs_per_subject": -1,
        "max_msg_size": -1, "no_ack": False, "duplicate_window": 0, "sealed": False, "deny_delete": False,
        "deny_purge": False, "allow_rollup_hdrs": False,
    }, StreamConfig(name="X").as_dict()
    src = StreamSource(name="X", opt_start_time=T0).as_dict()
    assert src == {"name": "X", "opt_start_time": "2026-01-02T03:04:05Z"}, src
    cc = ConsumerConfig(durable_name="d", ack_wait=2.5, backoff=[1, 2], max_deliver=3).as_dict()
    assert cc == {
        "durable_name": "d", "deliver_policy": "all", "ack_policy": "explicit", "ack_wait": 2_500_000_000,
        "max_deliver": 3, "backoff": [1_000_000_000, 2_000_000_000], "replay_policy": "instant",
        "idle_heartbeat": 0, "inactive_threshold": 0,
    }, cc
    kvc = KeyValueConfig(bucket="b", ttl=10).as_dict()
    assert kvc == {"bucket": "b", "history": 1, "ttl": 10_000_000_000, "replicas": 1}, kvc
    osc = ObjectStoreConfig(bucket="o").as_dict()
    assert osc == {"bucket": "o", "ttl": 0, "replicas": 1}, osc

    # A stream: the server's answer, zeros and False kept, its extra keys left out.
    await js.add_stream(name="ASD", subjects=["asd.>"], metadata={"team": "a"})
    await js.publish("asd.a", b"one", headers={"X": "1"})
    info = (await js.stream_info("ASD")).as_dict()
    assert norm(info, {"created": datetime.datetime}) == {
        "config": STREAM_CONFIG,
        "state": {"messages": 1, "bytes": 60, "first_seq": 1, "last_seq": 1, "consumer_count": 0},
        "cluster": {"leader": "<id>"},
        "created": "<time>",
    }, info
    assert (await js.stream_info("ASD")).config.as_dict() == info["config"]

    # A consumer, before and after a delivery.
    await js.add_consumer("ASD", durable_name="C1", ack_wait=3)
    sub = await js.pull_subscribe_bind("C1", stream="ASD")
    (msg,) = await sub.fetch(1, timeout=5)
    await msg.ack_sync()
    ci = (await js.consumer_info("ASD", "C1")).as_dict()
    times = {"created": str, "last_active": str}
    assert norm(ci, times) == {
        "name": "C1", "stream_name": "ASD", "created": "<time>",
        "config": {
            "name": "C1", "durable_name": "C1", "deliver_policy": "all", "ack_policy": "explicit",
            "ack_wait": 3_000_000_000, "max_deliver": -1, "replay_policy": "instant", "max_waiting": 512,
            "max_ack_pending": 1000, "idle_heartbeat": 0, "inactive_threshold": 0, "num_replicas": 0,
            "metadata": {},
        },
        "delivered": {"consumer_seq": 1, "stream_seq": 1, "last_active": "<time>"},
        "ack_floor": {"consumer_seq": 1, "stream_seq": 1, "last_active": "<time>"},
        "num_ack_pending": 0, "num_redelivered": 0, "num_waiting": 0, "num_pending": 0,
    }, ci

    # The account: every limit, the -1s and False included.
    ai = (await js.account_info()).as_dict()
    assert isinstance(ai["api"].pop("total"), int) and isinstance(ai["api"].pop("level"), int), ai
    assert ai == {
        "memory": 0, "storage": 60, "streams": 1, "consumers": 1, "api": {"errors": 0},
        "limits": {
            "max_memory": -1, "max_storage": -1, "max_streams": -1, "max_consumers": -1, "max_ack_pending": -1,
            "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1, "max_bytes_required": False,
        },
    }, ai

    # A stored message.
    raw = (await js.get_msg("ASD", 1)).as_dict()
    assert norm(raw, {"time": datetime.datetime}) == {
        "subject": "asd.a", "seq": 1, "data": b"one", "hdrs": "TkFUUy8xLjANClg6IDENCg0K", "headers": {"X": "1"},
        "time": "<time>",
    }, raw

    # A key-value bucket's stream, as its status holds it.
    kv = await js.create_key_value(bucket="KVA", history=3, ttl=60, direct=True)
    status = (await kv.status()).stream_info.as_dict()
    assert norm(status, {"created": datetime.datetime})["config"] == dict(
        STREAM_CONFIG, name="KV_KVA", subjects=["$KV.KVA.>"], discard="new", max_age=60_000_000_000,
        duplicate_window=60_000_000_000, max_msgs_per_subject=3, allow_rollup_hdrs=True, deny_delete=True,
        allow_direct=True, allow_msg_ttl=status["config"]["allow_msg_ttl"], metadata={},
    ), status
    assert norm(status, {"created": datetime.datetime})["state"] == {
        "messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0,
    }, status

    # An object's info.
    obs = await js.create_object_store("OBA")
    oi = (await obs.put("f", b"data")).as_dict()
    assert norm(oi, {"mtime": str}) == {
        "name": "f", "bucket": "OBA", "nuid": "<id>", "size": 4, "mtime": "<time>", "chunks": 1,
        "digest": "SHA-256=Om6weQ85rIfJTzhWst0sXREOaBFgImGpqSPTuyOtyLc=", "deleted": False,
        "options": {"max_chunk_size": 131072},
    }, oi

    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
