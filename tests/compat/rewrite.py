"""The migration rule, applied mechanically to the text of a nats-py program.

The rule (docs/migrating.rst): replace ``nats`` by ``natsjs_sync`` in imports,
delete ``async`` and ``await``, and turn ``asyncio.sleep`` into ``time.sleep``
(``asyncio.run(main())`` becomes ``main()``). Nothing else: a program this
produces must run unchanged.

Run as a script it rewrites the file named on the command line to stdout.
"""

from __future__ import annotations

import re
import sys

_IMPORT_AS = re.compile(r"^(\s*)import nats(\s+as\s+\w+)?\s*$", re.M)
_IMPORT_SUB = re.compile(r"^(\s*)import nats\.([\w.]+)(\s+as\s+\w+)?\s*$", re.M)
_FROM = re.compile(r"^(\s*)from nats((?:\.[\w.]+)?) import ", re.M)
_ASYNC = re.compile(r"\basync\s+(?=def\b|for\b|with\b)")
_AWAIT = re.compile(r"\bawait\s+")
_SLEEP = re.compile(r"\basyncio\.sleep\(")
_RUN = re.compile(r"\basyncio\.run\((\w+\(\))\)")


def migrate(source: str) -> str:
    """The program text with the migration rule applied."""
    out = _IMPORT_AS.sub(lambda m: f"{m.group(1)}import natsjs_sync as {(m.group(2) or ' as nats').split()[-1]}",
                         source)
    out = _IMPORT_SUB.sub(lambda m: f"{m.group(1)}import natsjs_sync.{m.group(2)}{m.group(3) or ''}", out)
    out = _FROM.sub(lambda m: f"{m.group(1)}from natsjs_sync{m.group(2)} import ", out)
    out = _ASYNC.sub("", out)
    out = _AWAIT.sub("", out)
    if _SLEEP.search(out):
        out = _SLEEP.sub("time.sleep(", out)
        if not re.search(r"^import time\s*$", out, re.M):
            out = re.sub(r"^import asyncio\s*$", "import asyncio\nimport time", out, count=1, flags=re.M)
    return _RUN.sub(r"\1", out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(migrate(f.read()))
