"""nats-py programs, migrated by the rule, run against a real server.

Each program in ``programs/`` is written for nats-py (asyncio, ``import nats``).
The test applies the migration rule mechanically (:mod:`tests.compat.rewrite`)
and runs the result in a fresh interpreter against a fresh server; the original
also runs under nats-py, to show the program itself is right.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import natsjs_sync
from natsjs_sync.testing import NatsServer

from .rewrite import migrate

PROGRAMS = Path(__file__).parent / "programs"
#: Where the natsjs_sync under test lives: the migrated program must import this
#: copy (a worktree, a checkout), not whichever one is installed in the environment.
SOURCE_ROOT = str(Path(natsjs_sync.__file__).resolve().parents[1])
#: Programs that use a feature of a newer server than the oldest the suite runs against.
NEEDS_SERVER = {"kv_ttl": "2.11", "js_consumer_pause": "2.11", "js_as_dict": "2.11", "js_unset_values": "2.11"}
#: Programs showing nats-py behaviour that waits for a change below the nats-py layer
#: (named in the reason). Strict: the mark has to go once the change lands.
PENDING: dict[str, str] = {}


def _params(migrated: bool) -> list[Any]:
    params = []
    for stem in sorted(p.stem for p in PROGRAMS.glob("*.py")):
        marks = [pytest.mark.server(NEEDS_SERVER[stem])] if stem in NEEDS_SERVER else []
        if migrated and stem in PENDING:
            marks.append(pytest.mark.xfail(strict=True, reason=f"needs: {PENDING[stem]}"))
        params.append(pytest.param(stem, marks=marks, id=stem))
    return params


def _run(path: Path, url: str, pythonpath: str = "") -> None:
    env = dict(os.environ, NATS_URL=url, PYTHONPATH=pythonpath)
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=path.parent)
    assert proc.returncode == 0, f"{path.name} failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("name", _params(migrated=True))
def test_migrated_program_runs(name: str, nats_server: NatsServer, tmp_path: Path) -> None:
    source = (PROGRAMS / f"{name}.py").read_text(encoding="utf-8")
    migrated = migrate(source)
    assert "await " not in migrated and "import nats\n" not in migrated
    target = tmp_path / f"{name}.py"
    target.write_text(migrated, encoding="utf-8")
    _run(target, nats_server.url, SOURCE_ROOT)


@pytest.mark.parametrize("name", _params(migrated=False))
def test_original_program_runs_under_nats_py(name: str, nats_server: NatsServer) -> None:
    pytest.importorskip("nats", reason="nats-py is not installed")
    # natsjs_sync importable as itself: a program may use its test kit (a fault proxy).
    _run(PROGRAMS / f"{name}.py", nats_server.url, SOURCE_ROOT)


def test_rewrite_applies_the_rule_and_nothing_else() -> None:
    source = (
        "import asyncio\n"
        "import nats\n"
        "import nats.js.errors\n"
        "from nats.aio.client import Client as NATS\n"
        "from nats.errors import TimeoutError\n"
        "\n"
        "async def main():\n"
        "    nc = await nats.connect()\n"
        "    async for m in sub.messages:\n"
        "        await asyncio.sleep(1)\n"
        "    async with x:\n"
        "        pass\n"
        "    natsy = 'await nats'\n"
        "\n"
        "asyncio.run(main())\n"
    )
    assert migrate(source) == (
        "import asyncio\n"
        "import time\n"
        "import natsjs_sync as nats\n"
        "import natsjs_sync.js.errors\n"
        "from natsjs_sync.aio.client import Client as NATS\n"
        "from natsjs_sync.errors import TimeoutError\n"
        "\n"
        "def main():\n"
        "    nc = nats.connect()\n"
        "    for m in sub.messages:\n"
        "        time.sleep(1)\n"
        "    with x:\n"
        "        pass\n"
        "    natsy = 'nats'\n"
        "\n"
        "main()\n"
    )
