"""docs/services.rst runs: every ``python`` code block, in page order, against a
real server. A block that starts with ``# shop/<name>.py`` becomes the module
``shop.<name>`` (so the Flask and Django files import the service module as a
project would); the other blocks share one namespace, as in a session."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

from natsjs_sync.testing import NatsServer

PAGE = Path(__file__).resolve().parents[1] / "docs" / "services.rst"
_BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", re.M)
_MODULE = re.compile(r"# (shop)/(\w+)\.py\n")


def python_blocks() -> list[str]:
    return [textwrap.dedent(block) for block in _BLOCK.findall(PAGE.read_text())]


def test_the_page_has_the_blocks_we_expect() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 8
    assert [b.splitlines()[0] for b in blocks if _MODULE.match(b)] == [
        "# shop/nats_service.py", "# shop/web.py", "# shop/apps.py"]


def test_every_code_block_runs(nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("flask")
    pytest.importorskip("django")
    monkeypatch.setenv("NATS_URL", nats_server.url)
    package = types.ModuleType("shop")
    package.__path__ = [str(tmp_path / "shop")]
    monkeypatch.setitem(sys.modules, "shop", package)
    session: dict[str, object] = {"__name__": "services_page"}
    for i, code in enumerate(python_blocks()):
        match = _MODULE.match(code)
        if match is None:
            exec(compile(code, f"{PAGE.name} block {i}", "exec"), session)
            continue
        name = f"shop.{match.group(2)}"
        module = types.ModuleType(name)
        module.__file__ = str(tmp_path / "shop" / f"{match.group(2)}.py")  # Flask finds its root from it
        monkeypatch.setitem(sys.modules, name, module)
        setattr(package, match.group(2), module)
        exec(compile(code, f"{PAGE.name} block {i} ({name})", "exec"), module.__dict__)
    nc = session["nc"]
    assert getattr(nc, "is_closed", False)  # the page cleans up after itself
