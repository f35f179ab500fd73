"""README.rst's two commands: the test command is exactly what CI runs first, and
the main-job command names the installed entry point."""

from __future__ import annotations

import argparse
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


def _install_by_name(text: str) -> list[str]:
    """The pip commands in ``text`` that name the project as an index package (``natsjs-sync``,
    ``"natsjs-sync[otel]"``), which no index has."""
    return re.findall(r"""pip install\s+(?:-\S+\s+)*["']?natsjs[-_]sync(?![-\w.*/])[^\n`]*""", text)


def test_every_install_instruction_works_from_a_checkout_or_a_wheel() -> None:
    pages = [ROOT / "README.rst", *sorted((ROOT / "docs").glob("*.rst"))]
    wrong = {page.name: found for page in pages if (found := _install_by_name(page.read_text()))}
    assert not wrong, f"natsjs-sync is on no package index: {wrong}"


def test_readme_lists_every_command() -> None:
    from natsjs_sync.cli import build_parser

    text = (ROOT / "README.rst").read_text()
    listed = text.split("Command line\n", 1)[1].split("\n\n", 2)[1]  # the paragraph under the heading
    (commands,) = [a.choices for a in build_parser()._actions if a.nargs == argparse.PARSER]
    missing = [name for name in commands if f"``{name}``" not in listed]
    assert not missing, f"README's command line section does not name {missing}"


def test_the_light_test_extra_is_the_test_extra_without_spark() -> None:
    from setuptools.config.setupcfg import read_configuration

    extras = read_configuration(str(ROOT / "setup.cfg"))["options"]["extras_require"]
    full, core = set(extras["test"]), set(extras.get("test-core", extras.get("test_core", ())))
    names = {re.split(r"[<>=\[]", req, maxsplit=1)[0] for req in full - core}
    assert core < full and names == {"pyspark", "pyarrow", "pandas", "venv-pack"}, names


def test_readme_says_how_long_the_suite_takes() -> None:
    text = (ROOT / "README.rst").read_text()
    assert re.search(r"suite takes about \d+ minutes on \d+ cores", text)
