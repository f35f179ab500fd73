"""nats.js 3.4 and natsjs_sync on one server: key-value entries, objects (empty,
one chunk, a chunk and a byte, large, links, metadata) and JetStream messages
with headers, written by one client and read by the other, both ways."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import KeyValueOp, ObjectMeta
from natsjs_sync.protocol.headers import Headers

from .conftest import NodeJS

CHUNK = 128 * 1024  # the default chunk size of both clients
SIZES = {"empty": 0, "one": CHUNK, "plus1": CHUNK + 1, "large": 3 * CHUNK + 12345}

# The same bytes on both sides: byte i is (i * 7 + 3) % 251.
_PATTERN = bytes((i * 7 + 3) % 251 for i in range(251))


def data(size: int) -> bytes:
    reps, rest = divmod(size, 251)
    return _PATTERN * reps + _PATTERN[:rest]


JS_HELPERS = """
import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { createHash } from "node:crypto";
const nc = await connect({ servers: process.env.NATS_URL });
const pattern = (n) => {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = ((i % 251) * 7 + 3) % 251;
    return b;
};
const sha = (b) => createHash("sha256").update(b).digest("hex");
const out = {};
"""

JS_DONE = """
await nc.close();
console.log(JSON.stringify(out));
"""


def run(nodejs: NodeJS, url: str, body: str) -> Any:
    return nodejs.run(JS_HELPERS + body + JS_DONE, url)


def test_pattern_is_the_same_on_both_sides(nodejs: NodeJS, nats_url: str) -> None:
    got = run(nodejs, nats_url, 'out.sha = sha(pattern(1000003));')
    assert got["sha"] == hashlib.sha256(data(1000003)).hexdigest()


# ---------------------------------------------------------------------- key-value


def test_kv_written_by_nats_js_read_by_us(nodejs: NodeJS, nats_url: str) -> None:
    got = run(nodejs, nats_url, """
        const kv = await new Kvm(nc).create("fromjs", { history: 5 });
        out.r1 = await kv.put("user.sue", "blue");
        out.r2 = await kv.put("user.sue", "green");
        out.r3 = await kv.put("user.bob", pattern(300));
        await kv.delete("user.bob");
        await kv.put("gone", "x");
        await kv.purge("gone");
    """)
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        kv = js.key_value("fromjs")
        e = kv.get("user.sue")
        assert (e.value, e.revision) == (b"green", got["r2"])
        assert kv.get("user.sue", revision=got["r1"]).value == b"blue"
        with pytest.raises(nats.KeyDeletedError):
            kv.get("user.bob")
        with pytest.raises(nats.KeyDeletedError):
            kv.get("gone")
        assert [x.value for x in kv.history("user.bob")] == [data(300), b""]
        assert [x.operation for x in kv.history("user.bob")] == [KeyValueOp.PUT, KeyValueOp.DEL]
        assert kv.keys() == ["user.sue"]
        assert kv.status().history == 5
        # Making "the same" bucket again opens the one nats.js made.
        again = js.create_key_value(bucket="fromjs", history=5)
        assert again.get("user.sue").value == b"green"
        again.put("user.ann", b"from us")
    got = run(nodejs, nats_url, """
        const kv = await new Kvm(nc).open("fromjs");
        out.ann = (await kv.get("user.ann")).string();
    """)
    assert got["ann"] == "from us"


def test_kv_written_by_us_read_by_nats_js(nodejs: NodeJS, nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        kv = nc.jetstream().create_key_value(bucket="fromus", history=3)
        r1 = kv.put("a", b"1")
        r2 = kv.put("a", data(500))
        kv.put("b", b"x")
        kv.delete("b")
        kv.put("c", b"y")
        kv.purge("c")
        if nc.jetstream().supports("msg_ttl"):
            kv.create("short", b"lives", ttl=3600)
    got = run(nodejs, nats_url, f"""
        const kv = await new Kvm(nc).create("fromus", {{ history: 3 }});  // opens ours
        const a = await kv.get("a");
        out.a = {{ rev: a.revision, sha: sha(a.value), op: a.operation }};
        out.a1 = (await kv.get("a", {{ revision: {r1} }})).string();
        out.b = (await kv.get("b")).operation;
        out.c = (await kv.get("c")).operation;
        out.keys = [];
        for await (const k of await kv.keys()) out.keys.push(k);
        out.keys.sort();
        const st = await kv.status();
        out.history = st.history;
        out.hist = [];
        for await (const e of await kv.history({{ key: "b" }})) out.hist.push(e.operation);
    """)
    assert got["a"] == {"rev": r2, "sha": hashlib.sha256(data(500)).hexdigest(), "op": "PUT"}
    assert got["a1"] == "1"
    assert (got["b"], got["c"]) == ("DEL", "PURGE")
    assert got["keys"] == (["a", "short"] if "short" in got["keys"] else ["a"])
    assert got["history"] == 3 and got["hist"] == ["PUT", "DEL"]


# ---------------------------------------------------------------------- objects


def test_objects_written_by_us_read_by_nats_js(nodejs: NodeJS, nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        obs = js.create_object_store(bucket="ourobjs")
        other = js.create_object_store(bucket="otherobjs")
        infos = {}
        for name, size in SIZES.items():
            meta = ObjectMeta(description=f"{name} object", metadata={"size": str(size)},
                              headers={"Content-Type": ["application/octet-stream"]})
            infos[name] = obs.put(name, data(size), meta=meta)
        obs.add_link("link-to-one", infos["one"])
        obs.add_bucket_link("link-to-bucket", other)
        obs.put("gone", b"bye")
        obs.delete("gone")
    got = run(nodejs, nats_url, """
        const os = await new Objm(nc).open("ourobjs");
        for (const name of ["empty", "one", "plus1", "large", "link-to-one"]) {
            const info = await os.info(name);
            const blob = await os.getBlob(name);
            out[name] = { size: info.size, chunks: info.chunks, digest: info.digest, mtime: info.mtime,
                          description: info.description ?? null, metadata: info.metadata ?? null,
                          ctype: info.headers ? info.headers.get("Content-Type") : null,
                          link: info.options?.link ?? null, got: blob === null ? null : sha(blob),
                          len: blob === null ? null : blob.length };
        }
        const bl = await os.info("link-to-bucket");
        out.bucketLink = bl.options.link;
        out.listed = (await os.list()).map((i) => i.name).sort();
        const gone = await os.info("gone");
        out.gone = gone === null ? null : gone.deleted;
    """)
    for name, size in SIZES.items():
        entry = got[name]
        assert entry["size"] == size and entry["len"] == size
        assert entry["got"] == hashlib.sha256(data(size)).hexdigest()
        assert entry["chunks"] == infos[name].chunks and entry["digest"] == infos[name].digest
        assert entry["mtime"] and not entry["mtime"].startswith("0001")  # nats.js shows the real time
        assert entry["description"] == f"{name} object" and entry["metadata"] == {"size": str(size)}
        assert entry["ctype"] == "application/octet-stream"
    assert got["link-to-one"]["link"] == {"bucket": "ourobjs", "name": "one"}
    assert got["link-to-one"]["got"] == hashlib.sha256(data(CHUNK)).hexdigest()
    assert got["bucketLink"] == {"bucket": "otherobjs"}
    assert got["listed"] == sorted([*SIZES, "link-to-one", "link-to-bucket"])
    assert got["gone"] in (None, True)  # nats.js shows a deleted object as gone or as deleted


def test_objects_written_by_nats_js_read_by_us(nodejs: NodeJS, nats_url: str) -> None:
    sizes = ", ".join(f'["{k}", {v}]' for k, v in SIZES.items())
    got = run(nodejs, nats_url, f"""
        const objm = new Objm(nc);
        const os = await objm.create("jsobjs");
        const other = await objm.create("jsother");
        out.infos = {{}};
        for (const [name, size] of [{sizes}]) {{
            const h = headers(); h.set("Content-Type", "text/plain");
            const info = await os.putBlob({{ name, description: name + " object", metadata: {{ size: String(size) }},
                                            headers: h }}, pattern(size));
            out.infos[name] = {{ digest: info.digest, chunks: info.chunks }};
        }}
        await os.link("link-to-one", await os.info("one"));
        await os.linkStore("link-to-bucket", other);
        await os.putBlob({{ name: "gone" }}, pattern(10));
        await os.delete("gone");
    """)
    with nats.connect(nats_url) as nc:
        obs = nc.jetstream().object_store("jsobjs")
        for name, size in SIZES.items():
            info = obs.get_info(name)
            assert info.size == size and info.digest == got["infos"][name]["digest"]
            assert info.chunks == got["infos"][name]["chunks"]
            assert info.description == f"{name} object" and info.metadata == {"size": str(size)}
            assert info.headers == {"Content-Type": ["text/plain"]}
            assert info.mtime is not None and info.mtime.year > 2000
            assert obs.get_bytes(name) == data(size)  # digest checked on the way
        link = obs.get_info("link-to-one")
        assert link.is_link and link.options is not None and link.options.link is not None
        assert link.options.link.name == "one" and obs.get_bytes("link-to-one") == data(CHUNK)
        bucket_link = obs.get_info("link-to-bucket")
        assert bucket_link.options is not None and bucket_link.options.link is not None
        assert bucket_link.options.link.bucket == "jsother" and bucket_link.options.link.name is None
        with pytest.raises(nats.ObjectNotFoundError):
            obs.get_info("gone")
        assert obs.get_info("gone", show_deleted=True).deleted
        names = sorted(i.name for i in obs.list())
        assert names == sorted([*SIZES, "link-to-one", "link-to-bucket"])
        with obs.watch() as w:
            seen = set()
            while (item := w.next(timeout=10)) is not None:
                seen.add(item.name)
        assert seen >= set(SIZES)


# ---------------------------------------------------------------------- JetStream messages


def test_jetstream_messages_with_headers_both_ways(nodejs: NodeJS, nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="XS", subjects=["xs.>"])
        hdrs = Headers()
        hdrs.add("X-Multi", "one")
        hdrs.add("X-Multi", "two")
        hdrs["X-Single"] = "é unicode"
        ack = js.publish("xs.from-us", data(1000), headers=hdrs, msg_id="us-1")
    got = run(nodejs, nats_url, """
        const js = jetstream(nc);
        const jsm = await jetstreamManager(nc);
        const sm = await jsm.streams.getMessage("XS", { seq: 1 });
        out.fromUs = { subject: sm.subject, sha: sha(sm.data), multi: sm.header.values("X-Multi"),
                       single: sm.header.get("X-Single"), id: sm.header.get("Nats-Msg-Id") };
        const h = headers(); h.append("X-Multi", "a"); h.append("X-Multi", "b"); h.set("X-Js", "yes");
        const pa = await js.publish("xs.from-js", pattern(777), { headers: h, msgID: "js-1" });
        out.seq = pa.seq;
        const dup = await js.publish("xs.from-js", pattern(777), { headers: h, msgID: "js-1" });
        out.dup = dup.duplicate;
        await jsm.consumers.add("XS", { durable_name: "jsreader", ack_policy: AckPolicy.Explicit,
                                          filter_subject: "xs.from-us" });
        const c = await js.consumers.get("XS", "jsreader");
        const m = await c.next({ expires: 5000 });
        out.consumed = { multi: m.headers.values("X-Multi"), redelivered: m.redelivered, seq: m.seq };
        m.ack();
    """)
    assert got["fromUs"] == {"subject": "xs.from-us", "sha": hashlib.sha256(data(1000)).hexdigest(),
                             "multi": ["one", "two"], "single": "é unicode", "id": "us-1"}
    assert got["consumed"] == {"multi": ["one", "two"], "redelivered": False, "seq": ack.seq}
    assert got["dup"] is True
    with nats.connect(nats_url) as nc:
        st = nc.jetstream().stream("XS")
        cons = st.create_consumer(durable_name="pyreader", filter_subject="xs.from-js")
        msg = cons.next(timeout=5)
        assert msg.data == data(777) and msg.metadata.sequence.stream == got["seq"]
        assert msg.headers is not None
        assert msg.headers.get_all("X-Multi") == ["a", "b"] and msg.headers["X-Js"] == "yes"
        assert msg.headers["Nats-Msg-Id"] == "js-1"
        msg.ack_sync()
        raw = st.get_msg(got["seq"])
        assert raw.headers is not None and raw.headers.get_all("X-Multi") == ["a", "b"]
