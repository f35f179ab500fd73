"""A real nats.js for cross-client tests: the npm packages, run by the machine's node.

The packages are installed once into a cache directory (``$NATSJS_SYNC_NODE_CACHE``,
else ``~/.cache/natsjs-sync-tests/node-<versions>``) and reused by later runs. Tests
that use the ``nodejs`` fixture skip, saying why, when node or npm is missing or the
registry cannot be reached; nothing else is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

#: The nats.js packages and versions the interop tests run against.
NODE_PACKAGES = {
    "@nats-io/transport-node": "3.4.0",
    "@nats-io/jetstream": "3.4.0",
    "@nats-io/kv": "3.4.0",
    "@nats-io/obj": "3.4.0",
    "@nats-io/services": "3.0.0-25",
}


class NodeJS:
    """Runs ES-module scripts with nats.js importable; each script prints one JSON value."""

    def __init__(self, node: str, folder: Path):
        self.node = node
        self.folder = folder

    def run(self, script: str, url: str, timeout: float = 60.0, **env: str) -> Any:
        """Run ``script`` (top-level ``await`` allowed) with ``NATS_URL`` set; returns the
        JSON the script printed last on stdout.

        Raises:
            AssertionError: the script failed (its stderr is in the message).
        """
        path = self.folder / f"script-{os.getpid()}-{abs(hash(script))}.mjs"
        path.write_text(textwrap.dedent(script))
        try:
            done = subprocess.run(
                [self.node, str(path)],
                cwd=self.folder,
                env={**os.environ, "NATS_URL": url, **env},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            path.unlink(missing_ok=True)
        assert done.returncode == 0, f"node script failed:\n{done.stderr[-4000:]}"
        lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
        assert lines, f"node script printed nothing; stderr:\n{done.stderr[-2000:]}"
        return json.loads(lines[-1])


def _cache_folder() -> Path:
    env = os.environ.get("NATSJS_SYNC_NODE_CACHE")
    if env:
        return Path(env)
    tag = hashlib.sha256(json.dumps(NODE_PACKAGES, sort_keys=True).encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "natsjs-sync-tests" / f"node-{tag}"


@pytest.fixture(scope="session")
def nodejs() -> NodeJS:
    """nats.js, installed on first use; skips with the reason when it cannot be had."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("nats.js interop needs node and npm on PATH")
    folder = _cache_folder()
    stamp = folder / "installed.json"
    if not stamp.exists() or json.loads(stamp.read_text()) != NODE_PACKAGES:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps({"name": "natsjs-sync-interop", "private": True,
                                                         "type": "module"}))
        specs = [f"{k}@{v}" for k, v in NODE_PACKAGES.items()]
        try:
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs],
                                  cwd=folder, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of nats.js timed out (is the npm registry reachable?)")
        if done.returncode != 0:
            pytest.skip(f"npm install of nats.js failed (is the npm registry reachable?): {done.stderr[-500:]}")
        stamp.write_text(json.dumps(NODE_PACKAGES))
    return NodeJS(node, folder)
