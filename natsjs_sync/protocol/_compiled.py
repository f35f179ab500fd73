"""The optional compiled extension (``_speedups.c``) and the choice of its twins.

Where a C compiler was present at install time the extension is built; each of
its functions has a pure-Python twin that is the reference (and what runs
without a compiler). ``NATSJS_SYNC_PURE_PYTHON=1`` in the environment makes
the package use the Python twins where the extension exists, to test them.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TypeVar

F = TypeVar("F")

speedups: ModuleType | None
try:
    from . import _speedups as speedups
except ImportError:  # pragma: no cover - depends on the install
    speedups = None
if os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
    speedups = None


def twin(name: str, reference: F) -> F:
    """``_speedups.<name>`` where the extension is in use, else ``reference`` (its Python twin)."""
    if speedups is None:
        return reference
    compiled: F = getattr(speedups, name)
    return compiled
