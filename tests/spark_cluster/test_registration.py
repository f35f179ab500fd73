"""Spark finds the ``jetstream`` source by itself in the install users make (README: ``pip install -e``)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

LISTING = """
import json, pkgutil, pyspark_jetstream
from natsjs_sync.spark.datasource import JetStreamDataSource
print(json.dumps({
    "listed": sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")),
    "default_source_is_ours": pyspark_jetstream.DefaultSource is JetStreamDataSource,
    "name": pyspark_jetstream.DefaultSource.name(),
}))
"""


def _installed() -> None:
    try:
        importlib.metadata.distribution("natsjs-sync")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("natsjs-sync is not installed in this Python (run `pip install -e .` first)")


def test_spark_lookup_lists_the_entry_module_without_the_checkout_on_the_path(tmp_path: Path) -> None:
    """What PySpark's data source lookup does, in a process that knows the package only by its install."""
    _installed()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", LISTING], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert "pyspark_jetstream" in got["listed"], "reinstall with `pip install -e .` (setup.py adds the entry module)"
    assert got["default_source_is_ours"] and got["name"] == "jetstream"


def test_the_editable_install_is_editable_and_a_wheel_carries_the_entry_module() -> None:
    _installed()
    dist = importlib.metadata.distribution("natsjs-sync")
    files = {str(f) for f in dist.files or []}
    assert "pyspark_jetstream.py" in files  # installed as a file, editable or not: pip uninstall removes it
    direct = dist.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        import natsjs_sync

        # Editable: the package is still served from the checkout.
        assert Path(natsjs_sync.__file__).resolve().parent == (REPO / "natsjs_sync").resolve()
