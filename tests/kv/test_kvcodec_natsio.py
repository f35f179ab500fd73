"""A bucket written through our key and value codecs is read through natsio-kvcodec's,
and the other way round: the same stored keys and bytes (orbit.go's encodings).

natsio needs Python 3.13: it runs in its own interpreter (tests/natsio_env.py).
"""

from __future__ import annotations

import json
import subprocess
import textwrap

from natsjs_sync.jetstream import KeyValue
from natsjs_sync.kvcodec import Base64KeyCodec, ChainKeyCodec, PathKeyCodec, ZlibValueCodec
from natsjs_sync.testing import NatsServer

from ..natsio_env import natsio_python

#: natsio reads what it is given (argv: url, bucket, JSON of keys to read) and writes its own keys.
NATSIO_SIDE = textwrap.dedent("""
    import asyncio, json, sys
    import natsio
    from natsio.kvcodec import Base64KeyCodec, ChainKeyCodec, PathKeyCodec, ZlibValueCodec

    async def main():
        url, bucket, theirs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        nc = await natsio.connect(url)
        js = nc.jetstream()
        b64 = await js.key_value(bucket, key_codec=Base64KeyCodec(), value_codec=ZlibValueCodec())
        paths = await js.key_value(bucket, key_codec=ChainKeyCodec(PathKeyCodec(), Base64KeyCodec()))
        read = {}
        for key in theirs["b64"]:
            read[key] = (await b64.get(key)).value.decode()
        for key in theirs["paths"]:
            read[key] = (await paths.get(key)).value.decode()
        await b64.put("natsio wrote.this key!", b"from natsio")
        await paths.put("/natsio/a b/c", b"a path from natsio")
        print(json.dumps({"read": read, "keys": sorted(await b64.keys())}), flush=True)
        await nc.close()

    asyncio.run(asyncio.wait_for(main(), 60))
""")


def test_natsio_and_we_read_each_others_encoded_keys_and_values(kv: KeyValue, shared_server: NatsServer) -> None:
    python = natsio_python("natsio.kvcodec")
    b64 = kv.with_codecs(key_codec=Base64KeyCodec(), value_codec=ZlibValueCodec())
    paths = kv.with_codecs(key_codec=ChainKeyCodec(PathKeyCodec(), Base64KeyCodec()))
    b64.put("sue@example.com.favourite colour", b"blue")
    paths.put("/etc/my app/conf", b"on")
    ours = {"b64": ["sue@example.com.favourite colour"], "paths": ["/etc/my app/conf"]}
    proc = subprocess.run([python, "-c", NATSIO_SIDE, shared_server.url, kv.bucket, json.dumps(ours)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["read"] == {"sue@example.com.favourite colour": "blue", "/etc/my app/conf": "on"}
    assert b64.get("natsio wrote.this key!").value == b"from natsio"
    assert paths.get("/natsio/a b/c").value == b"a path from natsio"
    # The same stored keys, decoded the same way on both sides (the path keys are base64 of their tokens too).
    assert sorted(b64.keys()) == theirs["keys"]
    assert "natsio wrote.this key!" in theirs["keys"] and "_root_.natsio.a b.c" in theirs["keys"]
