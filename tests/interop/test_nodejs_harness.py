"""The nats.js harness itself: a message crosses from nats.js to natsjs_sync and back."""

from __future__ import annotations

import natsjs_sync as nats

from .conftest import NodeJS


def test_nats_js_and_natsjs_sync_exchange_a_request(nodejs: NodeJS, nats_url: str) -> None:
    with nats.connect(nats_url) as nc:
        nc.subscribe("interop.echo", cb=lambda m: m.respond(b"echo:" + m.data))
        nc.flush()
        got = nodejs.run(
            """
            import { connect } from "@nats-io/transport-node";
            const nc = await connect({ servers: process.env.NATS_URL });
            const r = await nc.request("interop.echo", "from js", { timeout: 5000 });
            await nc.close();
            console.log(JSON.stringify({ reply: r.string(), server: nc.info?.version ?? null }));
            """,
            nats_url,
        )
    assert got["reply"] == "echo:from js"
