"""Running a function in a forked child, for the tests of fork safety."""

from __future__ import annotations

import json
import os
import select
import signal
import time
import warnings
from collections.abc import Callable


def run_in_child(fn: Callable[[], dict[str, object]], timeout: float = 60.0) -> dict[str, object]:
    """Fork, run ``fn()`` in the child, return what it reported (as JSON).

    An exception in the child is reported as ``{"error": ...}``. A child that has not
    reported within ``timeout`` seconds is killed and the test fails; so the child's own
    waits should be bounded well below it, and report a hang as a result.
    """
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() of a process with threads
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child: no pytest from here on, only os._exit
        code = 1
        try:
            try:
                result = fn()
            except BaseException as exc:
                result = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(w, json.dumps(result).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            readable, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"the forked child did not report within {timeout} s")
            chunk = os.read(r, 65536)
            if not chunk:  # the child has exited (its end of the pipe is closed)
                break
            chunks.append(chunk)
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(b"".join(chunks))  # type: ignore[no-any-return]
