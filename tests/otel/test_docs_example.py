"""The worked example of docs/observability.rst runs, and its trace is the one the page draws."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from natsjs_sync.otel import NatsjsSyncInstrumentor
from natsjs_sync.testing import NatsServer
from tests.test_docs_blocks import DEFAULT_URL, python_blocks

pytest.importorskip("flask", reason="the example is a Flask app (flask is in the test extra)")
ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/observability.rst"


def test_flask_jetstream_worker_trace(nats_server: NatsServer) -> None:
    blocks = python_blocks(PAGE)
    assert len(blocks) == 4
    namespace: dict[str, object] = {"__name__": "observability_page"}
    try:
        for block in blocks:
            exec(compile(textwrap.dedent(block).replace(DEFAULT_URL, nats_server.url), PAGE, "exec"), namespace)
    finally:
        NatsjsSyncInstrumentor().uninstrument()
        for name in ("nc", "worker_nc"):
            client = namespace.get(name)
            if client is not None:
                client.close()  # type: ignore[attr-defined]
    spans = namespace["spans"]
    assert isinstance(spans, dict)
    web, pub = spans["POST /orders/<order_id>"], spans["publish orders.created"]
    proc, ack, recv = spans["process ORDERS"], spans["ack ORDERS"], spans["receive ORDERS"]
    assert pub.parent.span_id == web.context.span_id
    assert proc.parent.span_id == pub.context.span_id
    assert ack.parent.span_id == proc.context.span_id
    assert pub.attributes["messaging.message.id"] == "o-1" and pub.attributes["messaging.nats.stream"] == "ORDERS"
    assert proc.attributes["messaging.consumer.group.name"] == "billing"
    assert proc.attributes["messaging.nats.delivery_count"] == 1 and ack.attributes["messaging.nats.ack.kind"] == "ack"
    assert recv.parent is None and [link.context.span_id for link in recv.links] == [pub.context.span_id]
    # the kinds the page draws
    assert [span.kind.name for span in (web, pub, proc, ack, recv)] == [
        "SERVER", "PRODUCER", "CONSUMER", "CLIENT", "CLIENT"]


def test_the_page_names_only_what_is_emitted() -> None:
    """Every conventions name the page mentions is one the instrumentation emits (the page once
    said ``messaging.destination.subscription_name`` where the code emits ``...subscription.name``)."""
    from natsjs_sync.otel import attributes, metrics

    emitted = {v for k, v in vars(attributes).items() if k.isupper() and isinstance(v, str)}
    emitted |= {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str)}
    text = (ROOT / PAGE).read_text()
    named = set(re.findall(r"``((?:messaging|server|error)\.[a-z_.]+[a-z_])``", text))
    assert named, "the page names no attribute"
    assert named <= emitted, sorted(named - emitted)
    assert attributes.SCHEMA_URL in text

