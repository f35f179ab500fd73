"""natsio, another Python NATS client, as the real other side of interop tests.

natsio and its extensions need Python 3.13 or newer, so they run in an
interpreter of their own: ``NATSIO_PYTHON`` when set, else a virtual
environment made once per machine (under ``~/.cache/natsjs-sync-tests``) from a
Python 3.13+ found on ``PATH`` or installed by pyenv, with the packages below
from PyPI. A test that needs it is skipped, saying why, only where no such
interpreter exists or the packages cannot be installed.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: What the interop tests use of natsio's world (one environment serves them all).
PACKAGES = ("natsio", "natsio-natscontext", "natsio-otel", "natsio-pcgroups", "natsio-kvcodec", "opentelemetry-sdk")

_MINOR_VERSIONS = ("3.13", "3.14", "3.15")


def _interpreter() -> str | None:
    """A Python 3.13 or newer: on PATH, or the newest pyenv installs."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for version in _MINOR_VERSIONS:
        # pyenv's shim on PATH answers only for a version made global: try it last.
        candidates = [*(str(c) for c in sorted(root.glob(f"{version}.*/bin/python{version}"), reverse=True)),
                      shutil.which(f"python{version}")]
        for candidate in candidates:
            if candidate and _imports(candidate, ()):
                return candidate
    return None


def _imports(python: str, modules: tuple[str, ...]) -> bool:
    code = "; ".join(f"import {m}" for m in modules) or "pass"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def _environment() -> tuple[str | None, str]:
    """(the natsio interpreter, or None; why not)."""
    given = os.environ.get("NATSIO_PYTHON")
    if given:
        return given, ""
    base = _interpreter()
    if base is None:
        return None, "no Python 3.13 or newer on PATH or in pyenv (natsio needs it; or set NATSIO_PYTHON)"
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "natsjs-sync-tests"
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"natsio-{Path(base).name}"
    python = venv / "bin" / "python"
    with open(cache / "natsio.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker at a time (parallel test runs)
        if python.exists() and _imports(str(python), ("natsio", "natsio.pcgroups", "natsio.otel",
                                                      "natsio.natscontext", "natsio.kvcodec",
                                                      "opentelemetry.sdk")):
            return str(python), ""
        shutil.rmtree(venv, ignore_errors=True)
        try:
            subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True,
                           capture_output=True, timeout=900)
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            tail = detail.decode(errors="replace").strip().splitlines()[-1:] if detail else [str(exc)]
            return None, f"could not install {', '.join(PACKAGES)} for {base}: {' '.join(tail)}"
    return str(python), ""


def natsio_python(*modules: str) -> str:
    """The interpreter that has natsio (and ``modules``), or skip the test saying why."""
    python, why = _environment()
    if python is None:
        pytest.skip(why)
    if not _imports(python, modules):
        pytest.skip(f"{python} cannot import {', '.join(modules)}")
    return python


if __name__ == "__main__":  # prepare the environment ahead of a run: python -m tests.natsio_env
    print(_environment()[0] or _environment()[1])
    sys.exit(0 if _environment()[0] else 1)
