"""Packaging: the license, the metadata, an sdist the tests run from, the Spark
entry module without pyspark."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_license_file_and_metadata_agree() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    meta = metadata.metadata("natsjs-sync")
    classifiers = meta.get_all("Classifier") or []
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    for minor in range(10, 14):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert meta.get_all("Project-URL")


def _shipped_sources() -> set[str]:
    """The files of docs/, examples/, tests/ and benchmarks/ that the tests need."""
    found = set()
    for top in ("docs", "examples", "tests", "benchmarks"):
        for path in (ROOT / top).rglob("*"):
            rel = path.relative_to(ROOT)
            if path.is_file() and "__pycache__" not in rel.parts and "_build" not in rel.parts \
                    and not path.name.startswith(".coverage"):
                found.add(rel.as_posix())
    return found


@pytest.mark.slow
def test_sdist_carries_docs_examples_and_tests(tmp_path: Path) -> None:
    # A copy of the tree, so the build leaves nothing in the checkout.
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", str(ROOT), str(src)], check=True, timeout=120)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")], cwd=src,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr
    (sdist,) = list((tmp_path / "dist").glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for needed in ("LICENSE", "README.rst", "setup.cfg", "pyproject.toml", ".ci/run", "tests/conftest.py",
                   "docs/conf.py", "natsjs_sync/protocol/_speedups.c", "natsjs_sync/py.typed"):
        assert needed in names, needed
    missing = sorted(_shipped_sources() - names)
    assert not missing, f"not in the sdist: {missing}"


def test_spark_entry_module_without_pyspark_says_what_to_install() -> None:
    # A child interpreter where importing pyspark fails, as on a machine without it.
    code = (
        "import sys\n"
        "class NoPyspark:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'pyarrow'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoPyspark())\n"
        "import natsjs_sync.spark\n"  # the package itself imports without pyspark
        "import pyspark_jetstream\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: the 'jetstream' Spark data source needs PySpark"), proc.stderr
    assert "natsjs-sync[spark]" in last
