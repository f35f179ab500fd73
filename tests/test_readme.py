"""README.rst's two commands: the test command is exactly what CI runs first, and
the main-job command names the installed entry point."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    text = (ROOT / "README.rst").read_text()
    after = text.split("Two commands on a fresh machine\n", 1)[1]
    section = after.split("\n", 1)[1].split("\n----", 1)[0]  # past the heading's underline
    return [line.strip() for line in section.splitlines() if re.match(r"\s{4}python -m pip install", line)]


def test_readme_gives_two_commands_and_ci_runs_the_test_one() -> None:
    main_job, tests = _commands()
    assert main_job.endswith("natsjs-sync demo") and '".[server]"' in main_job
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in ci
                if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert commands[0] == tests, "the first command of .ci/run must be README's test command"
    assert 'natsjs-sync = natsjs_sync.cli:main' in (ROOT / "setup.cfg").read_text()
