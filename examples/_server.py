"""Where the examples find a NATS server.

``python examples/<name>.py nats://host:4222`` uses that server; with no URL
the ``NATS_URL`` environment variable is used, and without it an embedded
nats-server (from the ``server`` extra) is started for the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def server_url(argv: list[str] | None = None) -> Iterator[str]:
    args = sys.argv[1:] if argv is None else argv
    url = args[0] if args else os.environ.get("NATS_URL")
    if url:
        yield url
        return
    from natsjs_sync.testing import NatsServer

    with NatsServer() as server:
        print(f"(embedded nats-server at {server.url})")
        yield server.url
