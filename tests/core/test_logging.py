"""The library's manners: it logs through ``natsjs_sync.*`` loggers, prints nothing
unless the application configures logging, and never logs a credential."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer


def test_lifecycle_is_logged_at_info_without_credentials(caplog: pytest.LogCaptureFixture) -> None:
    reconnected = threading.Event()
    with NatsServer(user="alice", password="s3cret-pw", jetstream=False) as server:
        url = f"nats://alice:s3cret-pw@127.0.0.1:{server.port}"
        with caplog.at_level(logging.DEBUG, logger="natsjs_sync"):
            nc = nats.connect(url, name="logged", reconnect_time_wait=0.05, max_reconnect_attempts=-1,
                              reconnected_cb=reconnected.set)
            server.restart()
            assert reconnected.wait(20)
            nc.close()
    records = [r for r in caplog.records if r.name.startswith("natsjs_sync")]
    text = "\n".join(r.getMessage() for r in records)
    assert "connected to nats://127.0.0.1" in text
    assert "disconnected from" in text and "reconnecting to" in text and "reconnected to" in text
    assert "closed" in text
    assert "s3cret-pw" not in text and "alice" not in text
    info = {r.name for r in records if r.levelno == logging.INFO}
    assert info <= {"natsjs_sync.connection", "natsjs_sync.reconnect"}, info
    assert all(not r.getMessage().startswith("natsjs_sync:") for r in records)


def test_errors_go_to_error_cb_or_the_log_never_both(caplog: pytest.LogCaptureFixture) -> None:
    errors: list[Exception] = []
    got = threading.Event()
    with NatsServer(jetstream=False) as server:
        with caplog.at_level(logging.WARNING, logger="natsjs_sync"), \
                nats.connect(server.url, error_cb=lambda e: (errors.append(e), got.set())) as nc:
            sub = nc.subscribe("slow", pending_msgs_limit=1)
            for _ in range(5):
                nc.publish("slow", b"x")
            nc.flush()
            assert got.wait(5)
            assert sub.dropped > 0
    assert any(isinstance(e, nats.SlowConsumerError) for e in errors)
    assert not [r for r in caplog.records if "slow consumer" in r.getMessage()]


def test_nothing_is_printed_without_logging_configuration() -> None:
    """A script that never configures logging sees nothing on stderr, even through a restart."""
    script = """
import threading, natsjs_sync as nats
from natsjs_sync.testing import NatsServer
with NatsServer(jetstream=False) as server:
    back = threading.Event()
    nc = nats.connect(server.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, reconnected_cb=back.set)
    server.restart()
    assert back.wait(20)
    sub = nc.subscribe("s", pending_msgs_limit=1)
    for _ in range(3):
        nc.publish("s", b"x")
    nc.flush()
    nc.close()
print("done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done" and done.stderr == ""
