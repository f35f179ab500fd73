"""The Sphinx docs build with warnings as errors (broken references fail CI)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def test_docs_build_without_warnings(tmp_path: pathlib.Path) -> None:
    # A subprocess: pytest's warning filters would turn Sphinx's own internal
    # deprecation warnings into errors; -W still fails on any docs warning.
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "index.html").exists()
