"""nats-py's public names exist under natsjs_sync with the same class relations.

Checked against the nats-py installed beside the tests: every exception class
of ``nats.errors`` and ``nats.js.errors`` exists here under the same name, and
every base it has in nats-py is a base here too (so an ``except`` written for
nats-py catches the same errors).
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

MODULES = ["errors", "js.errors", "js.api", "js.kv", "js.object_store", "js.client", "js.manager", "aio.client",
           "aio.msg", "aio.subscription", "aio.errors"]


def _public(module: object) -> dict[str, object]:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return {n: getattr(module, n) for n in names if hasattr(module, n)}


# nats-py's machinery, not API: transports, the parser, iterator helpers and wire constants.
INTERNAL = {"StopIterSentinel", "StreamsListIterator", "StreamPurgeRequest", "Parser", "Transport", "TcpTransport",
            "WebSocketTransport", "Srv", "Server", "RawCredentials", "NUID"}
CONSTANT = re.compile(r"^(DEFAULT_(?!BUFFER)\w+|KV_\w+|OBJ_\w+|VALID_\w+|SCHEDULE_\w+|INBOX_PREFIX"
                      r"|MSG_ROLLUP_SUBJECT)$")


@pytest.mark.parametrize("path", MODULES)
def test_every_public_class_and_constant_exists(path: str) -> None:
    theirs = importlib.import_module(f"nats.{path}")
    ours = importlib.import_module(f"natsjs_sync.{path}")
    missing = []
    for name, value in _public(theirs).items():
        if name in INTERNAL:
            continue
        own_class = inspect.isclass(value) and value.__module__ == theirs.__name__
        if (own_class or CONSTANT.match(name)) and not hasattr(ours, name):
            missing.append(name)
    assert not missing, f"natsjs_sync.{path} lacks {missing}"


@pytest.mark.parametrize("path", ["errors", "js.errors", "aio.errors"])
def test_exception_bases_hold(path: str) -> None:
    theirs = importlib.import_module(f"nats.{path}")
    ours = importlib.import_module(f"natsjs_sync.{path}")
    wrong = []
    for name, cls in _public(theirs).items():
        if not (inspect.isclass(cls) and issubclass(cls, BaseException)):
            continue
        mine = getattr(ours, name)
        for base in cls.__mro__[1:]:
            if base.__module__.startswith("nats."):
                mod = importlib.import_module("natsjs_sync." + base.__module__.split(".", 1)[1])
                my_base = getattr(mod, base.__name__)
            elif base.__module__ in ("builtins", "asyncio.exceptions"):
                my_base = base
            else:
                continue
            if not issubclass(mine, my_base):
                wrong.append(f"{name} is not a {base.__module__}.{base.__name__}")
    assert not wrong, wrong


def test_constants_have_nats_py_values() -> None:
    import nats.js.api
    import nats.js.kv

    import natsjs_sync.js.api as api
    import natsjs_sync.js.kv as kv

    assert {h.name: h.value for h in api.Header} == {h.name: h.value for h in nats.js.api.Header}
    assert (kv.KV_DEL, kv.KV_PURGE, kv.KV_OP) == (nats.js.kv.KV_DEL, nats.js.kv.KV_PURGE, nats.js.kv.KV_OP)
    for enum_name in ("AckPolicy", "DeliverPolicy", "ReplayPolicy", "RetentionPolicy", "StorageType",
                      "DiscardPolicy"):
        theirs = {m.name: m.value for m in getattr(nats.js.api, enum_name)}
        ours = {m.name: m.value for m in getattr(api, enum_name)}
        assert theirs.items() <= ours.items(), enum_name


def test_server_errors_map_to_nats_py_classes(nc: object) -> None:
    import natsjs_sync.js.errors as jse
    from natsjs_sync.errors import jetstream_error

    assert type(jetstream_error(404, 10059, "stream not found")).__name__ == "StreamNotFoundError"
    assert isinstance(jetstream_error(404, 10059, "x"), jse.NotFoundError)
    assert type(jetstream_error(404, 99999, "x")) is jse.NotFoundError
    assert type(jetstream_error(400, 99999, "x")) is jse.BadRequestError
    assert type(jetstream_error(503, 99999, "x")) is jse.ServiceUnavailableError
    assert type(jetstream_error(500, 99999, "x")) is jse.ServerError
    e = jetstream_error(400, 10071, "wrong last sequence: 3")
    assert isinstance(e, jse.BadRequestError) and (e.code, e.err_code) == (400, 10071)
