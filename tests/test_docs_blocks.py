"""Every ``python`` code block of README.rst and docs/ runs against a real
server, page by page in page order, the blocks of one page sharing one
namespace as in an interactive session. Blocks written as a ``>>>`` session
are run as doctests (their output is checked). Pages name the default URL
``nats://127.0.0.1:4222``; the test points it at its own server, and runs each
page in an empty directory holding the few files the pages open."""

from __future__ import annotations

import contextlib
import doctest
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync
from natsjs_sync.testing import FaultProxy, NatsServer

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", re.M)
DEFAULT_URL = "nats://127.0.0.1:4222"

PAGES = ["README.rst", "docs/index.rst", "docs/quickstart.rst", "docs/jetstream.rst", "docs/kv.rst",
         "docs/object_store.rst", "docs/pcgroups.rst", "docs/testing.rst", "docs/codecs.rst"]
#: Pages showing features of newer servers: skipped, saying so, on older ones.
NEEDS_SERVER = {"docs/jetstream.rst": "2.14", "docs/pcgroups.rst": "2.11"}
#: Pages whose blocks run elsewhere, and why.
ELSEWHERE = {
    "docs/services.rst": "tests/test_docs_services.py runs it with Flask and Django modules",
    "docs/spark.rst": "needs a Spark session (Java): the Spark tests run the pipeline example",
    "docs/observability.rst": "needs the otel extra: tests/otel/test_docs_example.py runs it and checks its trace",
}
#: Files pages open as a user's own files would be.
FILES = {"report.pdf": b"%PDF-1.4 " + bytes(range(256)) * 1000, "app.yaml": b"replicas: 3\n",
         "model.bin": bytes(300_000)}


def python_blocks(page: str) -> list[str]:
    return [textwrap.dedent(b) for b in _BLOCK.findall((ROOT / page).read_text())]


def _run_page_test(fn: Any, server: NatsServer) -> None:
    """Call a test function a page shows, with the fixtures it names."""
    params = list(inspect.signature(fn).parameters)
    if {"spark_cluster", "spark_connect"} & set(params):
        # The page's Spark-cluster examples name a job file of the reader's own;
        # tests/spark_cluster runs the same fixtures with real jobs. Here the
        # block is only compiled and its function defined.
        return
    with contextlib.ExitStack() as stack:
        fixtures: dict[str, Any] = {"nats_server": server, "nats_url": server.url}
        if "nats_fault_proxy" in params:
            fixtures["nats_fault_proxy"] = stack.enter_context(FaultProxy(server.url))
        fn(**{name: fixtures[name] for name in params})


def test_every_page_with_python_blocks_is_run() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in [ROOT / "README.rst", *(ROOT / "docs").glob("*.rst")]
             if python_blocks(p.relative_to(ROOT).as_posix())}
    assert pages == set(PAGES) | set(ELSEWHERE)


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=[pytest.mark.server(NEEDS_SERVER[p])] if p in NEEDS_SERVER else []) for p in PAGES])
def test_every_code_block_of_the_page_runs(page: str, nats_server: NatsServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NATS_URL", nats_server.url)
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    session: dict[str, object] = {"__name__": f"docs_{Path(page).stem}"}
    blocks = python_blocks(page)
    assert blocks
    try:
        for i, code in enumerate(blocks):
            code = code.replace(DEFAULT_URL, nats_server.url)
            where = f"{page} block {i}"
            if code.lstrip().startswith(">>>"):
                test = doctest.DocTestParser().get_doctest(code, session, where, page, 0)
                runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
                out: list[str] = []
                runner.run(test, out=out.append, clear_globs=False)
                assert runner.failures == 0, "".join(out)
            else:
                before = set(session)
                exec(compile(code, where, "exec"), session)
                for name in sorted(set(session) - before):
                    if name.startswith("test_") and callable(session[name]):
                        _run_page_test(session[name], nats_server)
        open_clients = [name for name, value in session.items()
                        if isinstance(value, natsjs_sync.Client) and not value.is_closed]
        assert not open_clients, f"{page} leaves its clients open: {open_clients}"
    finally:
        for value in list(session.values()):
            if isinstance(value, natsjs_sync.Client):
                value.close()
