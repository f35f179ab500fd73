"""A permissions violation reaches ``error_cb`` with nats-py's text, so a program that
matches on it runs on both clients; nats-py's own run shows the text is its."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer

USERS = [{"user": "app", "password": "pw",
          "permissions": {"subscribe": {"deny": ["foo", "Mixed.Case"]}, "publish": {"deny": ["Pub.Case"]}}}]
EXPECTED = 'nats: permissions violation for subscription to "foo"'
#: nats-py lower-cases the whole -ERR line, the subject included: so does this client.
EXPECTED_MIXED = ['nats: permissions violation for subscription to "mixed.case"',
                  'nats: permissions violation for publish to "pub.case"']


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(users=USERS, jetstream=False) as srv:
        yield srv


def test_the_text_is_nats_pys(server: NatsServer) -> None:
    errors: list[Exception] = []
    got = threading.Event()

    def error_cb(exc: Exception) -> None:
        errors.append(exc)
        got.set()

    with nats.connect(server.url, user="app", password="pw", error_cb=error_cb) as nc:
        nc.subscribe("foo")
        assert got.wait(10), "no error reported"
    assert isinstance(errors[0], nats.PermissionsError)
    assert str(errors[0]) == EXPECTED


def test_nats_py_says_the_same(server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

    async def main() -> str:
        got: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def error_cb(exc: Exception) -> None:
            if not got.done():
                got.set_result(str(exc))

        nc = await nats_py.connect(server.url, user="app", password="pw", error_cb=error_cb)
        try:
            await nc.subscribe("foo")
            return await asyncio.wait_for(got, 10)
        finally:
            await nc.close()

    assert asyncio.run(main()) == EXPECTED


def test_a_mixed_case_subject_is_lower_cased_as_nats_py_does(server: NatsServer) -> None:
    errors: list[str] = []
    lock = threading.Lock()
    both = threading.Event()

    def error_cb(exc: Exception) -> None:
        with lock:
            errors.append(str(exc))
            if len(errors) == 2:
                both.set()

    with nats.connect(server.url, user="app", password="pw", error_cb=error_cb) as nc:
        nc.subscribe("Mixed.Case")
        nc.flush()
        nc.publish("Pub.Case", b"x")
        nc.flush()
        assert both.wait(10), errors
    assert sorted(errors) == sorted(EXPECTED_MIXED)


def test_nats_py_lower_cases_the_same(server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

    async def main() -> list[str]:
        errors: list[str] = []
        both = asyncio.Event()

        async def error_cb(exc: Exception) -> None:
            errors.append(str(exc))
            if len(errors) == 2:
                both.set()

        nc = await nats_py.connect(server.url, user="app", password="pw", error_cb=error_cb)
        try:
            await nc.subscribe("Mixed.Case")
            await nc.flush()
            await nc.publish("Pub.Case", b"x")
            await nc.flush()
            await asyncio.wait_for(both.wait(), 10)
            return errors
        finally:
            await nc.close()

    assert sorted(asyncio.run(main())) == sorted(EXPECTED_MIXED)
