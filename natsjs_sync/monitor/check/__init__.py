"""Health checks in the spirit of ``nats server check``: a status, a line, an exit code.

Each check returns a :class:`CheckResult` whose :attr:`~CheckResult.status` is a
Nagios status (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and whose
:meth:`~CheckResult.line` is one line starting with the status word, with Nagios
performance data after ``|``; so a check can sit in a cron job, a Nagios or
Icinga service, or a Kubernetes probe (``natsjs-sync server check ...``).

A check never raises for what it checks: a server that cannot be reached, a
stream that is missing, a request that times out are CRITICAL results. Only
arguments a check cannot use raise (``ValueError``).

What counts as degraded and what as down:

- a replica (of a stream, a consumer) that is offline or behind, while the group
  still has a leader and a quorum of current peers, is WARNING: the asset works,
  with less redundancy;
- no leader, fewer current peers than a quorum, the asset missing, the server
  unreachable: CRITICAL;
- a threshold given by the caller and crossed: the level that threshold names.

One module a check (``connection``, ``jetstream``, ``stream``, ``consumer``, ``message``, ``kv``,
``request``, ``credential``, ``server``, ``meta``), beside what they share: :class:`CheckResult`
(``result``), its rendering (``render``), thresholds, durations, metadata, Raft groups (``cluster``)
and Go's regular expressions (``goregexp``). Import them from here.
"""

from __future__ import annotations

from .cluster import _check_group as _check_group
from .cluster import _check_peers as _check_peers
from .connection import check_connection, without_credentials
from .consumer import check_consumer
from .credential import check_credential
from .durations import metadata_duration
from .jetstream import check_jetstream
from .kv import check_kv
from .message import _LITERAL_SUBJECT as _LITERAL_SUBJECT
from .message import check_message
from .meta import check_meta
from .metadata import CONSUMER_METADATA, STREAM_METADATA
from .request import check_request
from .result import DEFAULT_NAMESPACE, FORMATS, CheckResult, Status, worst
from .server import check_server
from .stream import check_stream

__all__ = [
    "CONSUMER_METADATA",
    "DEFAULT_NAMESPACE",
    "FORMATS",
    "STREAM_METADATA",
    "CheckResult",
    "Status",
    "check_connection",
    "check_consumer",
    "check_credential",
    "check_jetstream",
    "check_kv",
    "check_message",
    "check_meta",
    "check_request",
    "check_server",
    "check_stream",
    "metadata_duration",
    "without_credentials",
    "worst",
]
