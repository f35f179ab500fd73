"""Object infos as every client writes them: always size, chunks and mtime on
the way out; on the way in, what other clients write (links without a nuid,
deletes with an empty mtime), and one unreadable info never breaks the bucket."""

from __future__ import annotations

import json

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.jetstream.object_models import encode_name
from natsjs_sync.protocol.nuid import next_nuid


def test_infos_always_carry_size_chunks_and_mtime(js: JetStream) -> None:
    bucket = "o" + next_nuid()
    obs = js.create_object_store(bucket=bucket, storage="memory")
    try:
        obs.put("empty", b"")
        other = js.create_object_store(bucket=bucket + "x", storage="memory")
        obs.add_bucket_link("blink", other)
        st = js.stream(f"OBJ_{bucket}")
        for name in ("empty", "blink"):
            raw = json.loads(st.get_last_msg_for_subject(f"$O.{bucket}.M.{encode_name(name)}").data)
            assert raw["size"] == 0 and raw["chunks"] == 0 and raw["mtime"].endswith("Z"), raw
        with obs.get("empty") as result:
            assert result.read() == b""
        js.delete_object_store(bucket + "x")
    finally:
        js.delete_object_store(bucket)


def test_infos_other_clients_write_are_read(js: JetStream) -> None:
    bucket = "o" + next_nuid()
    obs = js.create_object_store(bucket=bucket, storage="memory")
    try:
        target = obs.put("target", b"payload")

        def raw_info(name: str, body: bytes) -> None:
            js.publish(f"$O.{bucket}.M.{encode_name(name)}", body, headers={"Nats-Rollup": "sub"})

        # nats.js: a link with no nuid, and options.link.name present.
        raw_info("jslink", json.dumps({"name": "jslink", "bucket": bucket, "size": 0, "chunks": 0,
                                       "mtime": "2026-01-01T00:00:00.000Z", "digest": "",
                                       "options": {"link": {"bucket": bucket, "name": "target"}}}).encode())
        # nats-py: a delete with an empty mtime and nulls.
        raw_info("pydel", json.dumps({"name": "pydel", "bucket": bucket, "nuid": "N1", "size": 0, "chunks": 0,
                                      "mtime": "", "digest": None, "deleted": True, "description": None,
                                      "headers": None, "options": None}).encode())
        # Something no client could have meant.
        raw_info("broken", b"{not json")
        raw_info("wrongtype", json.dumps({"name": "wrongtype", "bucket": bucket, "size": "big"}).encode())

        link = obs.get_info("jslink")
        assert link.is_link and link.nuid == "" and link.mtime is not None
        assert obs.get_bytes("jslink") == b"payload"
        assert obs.get_info("pydel", show_deleted=True).deleted
        with pytest.raises(nats.ObjectNotFoundError):
            obs.get_info("pydel")
        for bad in ("broken", "wrongtype"):
            with pytest.raises(nats.ObjectStoreError) as info:
                obs.get_info(bad)
            assert not isinstance(info.value, nats.ObjectNotFoundError)
        # The bucket as a whole still lists and watches.
        assert sorted(i.name for i in obs.list()) == ["jslink", "target"]
        assert sorted(i.name for i in obs.list(show_deleted=True)) == ["jslink", "pydel", "target"]
        with obs.watch() as w:
            seen = []
            while (item := w.next(timeout=10)) is not None:
                seen.append(item.name)
        assert sorted(seen) == ["jslink", "pydel", "target"]
        assert target.size == 7
    finally:
        js.delete_object_store(bucket)


def test_seal_keeps_the_stream_settings(js: JetStream) -> None:
    bucket = "o" + next_nuid()
    obs = js.create_object_store(bucket=bucket, storage="memory", metadata={"team": "a"}, description="d")
    try:
        obs.put("x", b"1")
        obs.seal()
        status = obs.status()
        assert status.sealed and status.metadata.get("team") == "a" and status.description == "d"
        with pytest.raises(nats.JetStreamError):
            obs.put("y", b"2")
    finally:
        js.delete_object_store(bucket)
