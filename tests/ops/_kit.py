"""What the ops tests share: a cluster configuration with a system account, and a poll."""

from __future__ import annotations

import functools
from typing import Any

from ..conftest import wait_until

#: A system account "SYS" and an application account "APP" with JetStream.
ACCOUNTS: dict[str, Any] = {
    "accounts": {
        "SYS": {"users": [{"user": "sys", "password": "sys"}]},
        "APP": {"jetstream": "enabled", "users": [{"user": "app", "password": "app"}]},
    },
    "system_account": "SYS",
}

#: Polls server state that offers nothing to wait on; each probe is a whole request
#: (or a whole CLI check), so not too often.
eventually = functools.partial(wait_until, interval=0.2)
