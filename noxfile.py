"""The test suite on every supported Python found on this machine.

    python -m pip install nox
    nox -r                                   # the whole suite, each interpreter
    nox -r -- tests/protocol tests/core      # a subset (the arguments go to pytest)
    nox -r -s tests-3.12                     # one interpreter

``-r`` reuses each interpreter's virtual environment (under ``.nox/``) after
the first run, which installs ``-e .[test]`` (PySpark included: the real
suite). Interpreters that are not installed are skipped, not failed.

Besides ``PATH``, interpreters are looked for in pyenv's versions directory,
so a machine with several pyenv Pythons needs no ``pyenv global`` juggling.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

#: The versions setup.cfg declares (its classifiers and python_requires).
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["tests"]


def _pyenv_bins() -> list[str]:
    """The bin directory of each pyenv-installed Python of a supported version (newest patch first)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if not root.is_dir():
        return []
    found: list[str] = []
    for version in PYTHONS:
        candidates = sorted(root.glob(f"{version}.*/bin"), key=lambda p: [int(x) for x in
                            p.parent.name.split(".") if x.isdigit()], reverse=True)
        found.extend(str(c) for c in candidates[:1] if (c / f"python{version}").exists())
    return found


# pyenv's shims answer "python3.10" only for the versions made global; the
# interpreters themselves are found directly (ahead of the shims on PATH).
os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Install ``-e .[test]`` and run pytest (arguments after ``--`` go to pytest)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)
