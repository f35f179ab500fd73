"""Issue 20, object names whose subject would pass the server's control-line
limit (names grow by a third in base64) are refused before anything is sent."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import InvalidObjectNameError
from natsjs_sync.testing import NatsServer

from ..recovery import Guarded, guard

LONG = "n" * 3500  # 4,668 characters once base64-encoded into the subject


@pytest.fixture
def guarded(shared_server: NatsServer) -> Iterator[Guarded]:
    with guard(shared_server.url) as g:
        g.nc.jetstream().create_object_store(bucket="BADOBJ", storage="memory")
        try:
            yield g
        finally:
            g.witness.jetstream().delete_object_store("BADOBJ")


CALLS: dict[str, Callable[[nats.Client], object]] = {
    "put": lambda nc: nc.jetstream().object_store("BADOBJ").put(LONG, b"data"),
    "put from a file": lambda nc: nc.jetstream().object_store("BADOBJ").put(LONG, io.BytesIO(b"data")),
    "get_info": lambda nc: nc.jetstream().object_store("BADOBJ").get_info(LONG),
    "get": lambda nc: nc.jetstream().object_store("BADOBJ").get(LONG),
    "delete": lambda nc: nc.jetstream().object_store("BADOBJ").delete(LONG),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_an_overlong_object_name_is_refused_before_sending(guarded: Guarded, call: str) -> None:
    with pytest.raises(ValueError):
        CALLS[call](guarded.nc)
    guarded.check_untouched()


EMPTY_NAME: dict[str, Callable[[nats.Client], object]] = {
    "put": lambda nc: nc.jetstream().object_store("BADOBJ").put("", b"data"),
    "put_string": lambda nc: nc.jetstream().object_store("BADOBJ").put_string("", "data"),
    "get_info": lambda nc: nc.jetstream().object_store("BADOBJ").get_info(""),
    "get": lambda nc: nc.jetstream().object_store("BADOBJ").get(""),
    "delete": lambda nc: nc.jetstream().object_store("BADOBJ").delete(""),
    "add_bucket_link": lambda nc: nc.jetstream().object_store("BADOBJ").add_bucket_link(
        "", nc.jetstream().object_store("BADOBJ")),
}


@pytest.mark.parametrize("call", list(EMPTY_NAME))
def test_an_empty_object_name_raises_invalid_object_name_before_sending(guarded: Guarded, call: str) -> None:
    with pytest.raises(InvalidObjectNameError) as info:
        EMPTY_NAME[call](guarded.nc)
    assert isinstance(info.value, ValueError)
    assert guarded.witness.jetstream().stream("OBJ_BADOBJ").info().state.messages == 0
    guarded.check_untouched()
