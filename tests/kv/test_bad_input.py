"""Issue 20, key-value bucket names and keys past the server's control-line
limit are refused before anything is sent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

from ..recovery import Events, Guarded, guard, run_in_child

LONG = "k" * 5000


@pytest.fixture
def guarded(shared_server: NatsServer) -> Iterator[Guarded]:
    with guard(shared_server.url) as g:
        g.nc.jetstream().create_key_value(bucket="BADKV", storage="memory")
        try:
            yield g
        finally:
            g.witness.jetstream().delete_key_value("BADKV")


CALLS: dict[str, Callable[[nats.Client], object]] = {
    "create bucket": lambda nc: nc.jetstream().create_key_value(bucket=LONG),
    "open bucket": lambda nc: nc.jetstream().key_value(LONG),
    "put": lambda nc: nc.jetstream().key_value("BADKV").put(LONG, b"v"),
    "get": lambda nc: nc.jetstream().key_value("BADKV").get(LONG),
    "create": lambda nc: nc.jetstream().key_value("BADKV").create(LONG, b"v"),
    "delete": lambda nc: nc.jetstream().key_value("BADKV").delete(LONG),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_an_overlong_bucket_or_key_is_refused_before_sending(guarded: Guarded, call: str) -> None:
    with pytest.raises(ValueError):  # InvalidKeyError and InvalidBucketNameError are ValueErrors
        CALLS[call](guarded.nc)
    guarded.check_untouched()


# Watching, listing keys and history run an ordered consumer: today its re-creation
# retries the dropped connection for ever (even after close), so these run in a
# forked child that is killed if it hangs.
WATCHING: dict[str, Callable[[nats.Client], object]] = {
    "watch": lambda nc: nc.jetstream().key_value("BADKV").watch(LONG),
    "keys": lambda nc: nc.jetstream().key_value("BADKV").keys(LONG),
    "history": lambda nc: nc.jetstream().key_value("BADKV").history(LONG),
}


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("call", list(WATCHING))
def test_an_overlong_key_filter_is_refused_before_sending(guarded: Guarded, call: str) -> None:
    url = guarded.witness.connected_url
    assert url is not None

    def child() -> dict[str, Any]:
        ev = Events()
        with nats.connect(url, **ev.kwargs()) as nc:
            try:
                WATCHING[call](nc)
            except ValueError as exc:
                nc.flush(timeout=5)
                return {"refused": type(exc).__name__, "disconnected": ev.disconnected.is_set()}
            return {"refused": None, "disconnected": ev.disconnected.is_set()}

    result = run_in_child(child, timeout=6)
    assert result.get("refused") and result.get("disconnected") is False, result
    guarded.check_untouched()
